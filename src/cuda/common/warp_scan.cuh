// Warp-wide prefix sums for the radix digit searches: every lane of a full warp calls them.
#pragma once

#include <cstdint>

namespace litetopk::cuda_common {

// The sum of `value` over lanes 0 .. lane (Hillis-Steele over the full warp).
__device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t value, int lane) {
  uint32_t inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  return inclusive;
}

}  // namespace litetopk::cuda_common
