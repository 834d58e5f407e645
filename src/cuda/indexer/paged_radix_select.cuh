// Radix-select pieces shared by the paged indexer's selections (paged_fused_kernel.cu across the
// blocks of a request, decode_select_kernel.cu inside one block): three digits of 11, 11 and 10
// bits of the order-preserving fp32 keys (formats/score_keys.h: NaN is key 0, never selected),
// most significant first, and the warp-wide search for the bin holding a row's rank-th key.
#pragma once

#include <cstdint>

#include "cuda/common/warp_scan.cuh"
#include "formats/score_keys.h"

namespace litetopk::cuda_indexer::radix {

constexpr int kBins = 2048;
constexpr int kPasses = 3;

// Digit `pass` of a key: bits 31..21, 20..10, 9..0.
__host__ __device__ constexpr int digit_shift(int pass) { return pass == 0 ? 21 : (pass == 1 ? 10 : 0); }
__host__ __device__ constexpr uint32_t digit_mask(int pass) { return pass == 2 ? 1023u : 2047u; }
__host__ __device__ constexpr int digit_bins(int pass) { return pass == 2 ? 1024 : kBins; }

__device__ __forceinline__ uint32_t score_key(float score) {
  return keys::key_from_f32_bits(__float_as_uint(score), /*largest=*/true);
}
__device__ __forceinline__ float key_score(uint32_t key) {
  return __uint_as_float(keys::f32_bits_from_key(key, /*largest=*/true));
}

// A row's selection state.
struct RowSelect {
  uint32_t prefix;  // the key's bits above `shift` found so far
  int32_t shift;    // the digits found cover bits 31 .. shift
  uint32_t rank;    // entries still needed among those matching prefix
  uint32_t above;   // entries whose key >> shift is above prefix (all selected)
  bool done;
};

// Does key (not 0) match the row's digits found so far?
__device__ __forceinline__ bool matches(const RowSelect& row, uint32_t key) {
  return row.shift >= 32 || (key >> row.shift) == row.prefix;
}

// Warp-wide: the bin of `histogram` holding the row's rank-th best entry, the entries above it
// and in it, and the total. Lane l owns the bins l * bins / 32 .. counted from the top.
__device__ __forceinline__ void find_digit(const uint32_t* histogram, int bins, uint32_t rank,
                                           int lane, uint32_t* digit, uint32_t* above_out,
                                           uint32_t* in_bin, uint32_t* total) {
  const int per_lane = bins / 32;
  const int top = bins - 1 - lane * per_lane;  // this lane's bins: top, top - 1, ...
  uint32_t local = 0;
  for (int i = 0; i < per_lane; ++i) local += histogram[top - i];
  const uint32_t inclusive = cuda_common::warp_inclusive_sum(local, lane);
  *total = __shfl_sync(0xffffffffu, inclusive, 31);
  uint32_t above = inclusive - local;
  const bool mine = above < rank && inclusive >= rank;
  uint32_t found_bin = 0;
  uint32_t found_above = 0;
  uint32_t found_count = 0;
  if (mine) {
    for (int i = 0; i < per_lane; ++i) {
      const uint32_t here = histogram[top - i];
      if (above + here >= rank) {
        found_bin = static_cast<uint32_t>(top - i);
        found_above = above;
        found_count = here;
        break;
      }
      above += here;
    }
  }
  const unsigned owner = __ballot_sync(0xffffffffu, mine);
  const int src = owner == 0 ? 0 : __ffs(owner) - 1;
  *digit = __shfl_sync(0xffffffffu, found_bin, src);
  *above_out = __shfl_sync(0xffffffffu, found_above, src);
  *in_bin = __shfl_sync(0xffffffffu, found_count, src);
}

// The row state after pass `pass` found `digit` with `above` entries above its bin and `in_bin`
// in it.
__device__ __forceinline__ RowSelect advance(RowSelect row, int pass, uint32_t digit,
                                             uint32_t above, uint32_t in_bin) {
  row.prefix = row.shift >= 32 ? digit : (row.prefix << (pass == 2 ? 10 : 11)) | digit;
  row.shift = digit_shift(pass);
  row.above += above;
  row.rank -= above;
  row.done = pass == kPasses - 1 || in_bin == row.rank;
  return row;
}

}  // namespace litetopk::cuda_indexer::radix
