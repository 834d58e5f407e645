// Warp-wide prefix sums: the radix digit searches' (every lane of a full warp calls them) and the
// warp-aggregated slot reservation of the selections' output and candidate writes.
#pragma once

#include <cstdint>

namespace litetopk::cuda_common {

// The sum of `value` over the lanes of this lane's group of kWidth (a power of two) up to and
// including this one (Hillis-Steele; every lane of the full warp calls it).
template <int kWidth = 32>
__device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t value, int lane) {
  static_assert(kWidth >= 1 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0,
                "groups of a power of two lanes");
  uint32_t inclusive = value;
#pragma unroll
  for (int offset = 1; offset < kWidth; offset *= 2) {
    const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, offset, kWidth);
    if (lane % kWidth >= offset) inclusive += up;
  }
  return inclusive;
}

// A slot of `counter` (global or shared) for each calling lane, one atomic per warp: the active
// lanes get consecutive slots in lane order.
__device__ __forceinline__ uint32_t warp_aggregated_slot(uint32_t* counter) {
  const unsigned active = __activemask();
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int leader = __ffs(active) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, static_cast<uint32_t>(__popc(active)));
  base = __shfl_sync(active, base, leader);
  return base + static_cast<uint32_t>(__popc(active & ((1u << lane) - 1u)));
}

}  // namespace litetopk::cuda_common
