// Radix-select building blocks: the bin search over a 2048-bin shared-memory histogram
// (DigitFinder, used by the candidate buffer's range select and by the radix baseline) and the
// fixed-digit pivot of the radix baseline (radix_select.cu).
//
// Selection works on 64-bit composites (formats/score_keys.h). Non-deterministic selection resolves
// only the key (bits 63..32), so ties are broken arbitrarily; deterministic selection resolves all
// 64 bits, and composites are distinct, so it has no ties. The radix baseline's digits are 11, 11,
// 10 bits per 32-bit half, most significant first.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace litetopk::cuda_select {

constexpr int kRadixBits = 11;
constexpr int kRadixBins = 1 << kRadixBits;

__host__ __device__ __forceinline__ uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Lowest bit a selection resolves: 32 (key only) or 0 (key and index).
__host__ __device__ constexpr int final_shift(bool deterministic) { return deterministic ? 0 : 32; }

// Width of the digit whose top bit is just below `top` (64 -> 11, 53 -> 11, 42 -> 10, 32 -> 11...).
__host__ __device__ constexpr int digit_width(int top) { return (top % 32 == 10) ? 10 : 11; }

// The result of a radix selection of the k-th best composite: every composite c with
// (c >> shift) > prefix is selected (count_greater of them); those with (c >> shift) == prefix are
// ties, of which k - count_greater are selected.
struct Pivot {
  uint64_t prefix;
  int shift;
  uint32_t count_greater;
};

// Does composite c beat the pivot (+1), tie with it (0) or lose (-1)?
__device__ __forceinline__ int compare_to_pivot(uint64_t c, const Pivot& p) {
  const uint64_t v = c >> p.shift;
  return v > p.prefix ? 1 : (v == p.prefix ? 0 : -1);
}

// Does c's digit belong to the bin being refined (its bits above `top` equal `prefix`)?
__device__ __forceinline__ bool matches_prefix(uint64_t c, uint64_t prefix, int top) {
  return top >= 64 || (c >> top) == prefix;
}

// Finds the digit d whose bin holds the `rank`-th best (1-based) entry of a histogram in shared
// memory: bins above d hold fewer than `rank` entries, bins from d up hold at least `rank`.
// Every thread of the block must call it; all get the result. Requires sum(histogram) >= rank.
// kAlgorithm: the block scan's (cub's raking by default; warp scans take fewer steps where a
// block waits on the result).
template <int kThreads, cub::BlockScanAlgorithm kAlgorithm = cub::BLOCK_SCAN_RAKING>
struct DigitFinder {
  static_assert(kRadixBins % kThreads == 0, "threads must divide the bins");
  static constexpr int kBinsPerThread = kRadixBins / kThreads;
  using Scan = cub::BlockScan<uint32_t, kThreads, kAlgorithm>;

  struct Storage {
    typename Scan::TempStorage scan;
    uint32_t digit;
    uint32_t count_above;
  };

  // Returns the digit; *count_above = entries in bins above it.
  static __device__ uint32_t find(Storage& s, const uint32_t* histogram, uint32_t rank,
                                  uint32_t* count_above) {
    // Thread t owns a group of bins counted from the top, so an exclusive scan in thread order
    // gives each thread the number of entries above its group.
    const int group = kThreads - 1 - static_cast<int>(threadIdx.x);
    const int first_bin = group * kBinsPerThread;
    uint32_t local = 0;
#pragma unroll
    for (int i = 0; i < kBinsPerThread; ++i) local += histogram[first_bin + i];
    uint32_t above = 0;
    Scan(s.scan).ExclusiveSum(local, above);
    if (above < rank && above + local >= rank) {
      for (int bin = first_bin + kBinsPerThread - 1; bin >= first_bin; --bin) {
        const uint32_t here = histogram[bin];
        if (above + here >= rank) {
          s.digit = static_cast<uint32_t>(bin);
          s.count_above = above;
          break;
        }
        above += here;
      }
    }
    __syncthreads();
    *count_above = s.count_above;
    return s.digit;
  }
};

}  // namespace litetopk::cuda_select
