// Exact top-k over a candidate list in global memory, run by a team of 1 to 32 warps synchronized
// by a named barrier (the fused indexer's side warps, the fused retrieval scan's math warpgroups,
// its final selection's 32 warps).
//
// Candidates are distinct 64-bit composites (score key << 32 | ~key index, formats/score_keys.h):
// larger is better and no two are equal, so "the k best" is always exactly k elements.
// 1. find_boundary: radix descent, kRadixBits per pass from the top or from a start that
//    shared_prefix found (always 64 - a multiple of kRadixBits, so every pass is 9 or 11 bits
//    wide: the digit search needs at least 32 bins), kListBatch loads in flight per thread: a
//    2048-bin histogram of the candidates that share the prefix found so far picks the digit
//    holding the k-th best, until the candidates of that prefix are all needed (at the latest
//    when one is left). Scores of one query share their top bits, so this takes 2 to 3 passes.
// 2. for_each_kept: an order-preserving pass over kListBatch rounds of 32 * warps candidates at a
//    time (two barriers per batch), handing every kept element (top bits >= the prefix: exactly
//    k) and its position to a writer: compact (in place: a batch reads everything before it
//    writes, and writes only below what it has read) or the kernel's output.
// keep_best = both on one list; it returns the gate that the kept list implies: any later
// candidate at or below it is beaten by the k kept ones and can be dropped.
#pragma once

#include <cstdint>

#include "cuda/common/warp_scan.cuh"
#include "cuda/common/wgmma_sm90.cuh"

namespace litetopk::cuda_indexer {

constexpr int kRadixBits = 11;
constexpr int kRadixBins = 1 << kRadixBits;
constexpr int kListBatch = 8;  // candidates per thread in flight

template <int kWarps>
struct ListScratch {
  static_assert(kWarps >= 1 && kWarps <= 32, "a team is 1 to 32 warps");
  uint32_t histogram[kRadixBins];
  uint32_t warp_counts[kListBatch][kWarps];
  uint64_t prefix;
  uint32_t need;
  uint32_t done;
};

template <int kWarps>
struct ListTeam {
  static constexpr int kThreads = kWarps * 32;
  ListScratch<kWarps>& scratch;
  uint32_t barrier_id;
  int thread;  // 0 .. kThreads - 1

  __device__ __forceinline__ void sync() const { sm90::named_barrier(barrier_id, kThreads); }

  // The k best are the elements c with (c >> shift) >= prefix.
  struct Boundary {
    uint64_t prefix;
    uint32_t shift;
    __device__ bool keeps(uint64_t c) const { return (c >> shift) >= prefix; }
    // Any later candidate at or below this is beaten by the k kept ones.
    __device__ uint64_t gate() const { return (prefix << shift) - 1; }
  };

  // This thread's kListBatch candidates of the batch at `base` (0 past the end), all loads in
  // flight at once; candidate j is list[base + j * kThreads + thread].
  __device__ __forceinline__ void load_batch(const uint64_t* list, uint32_t n, uint32_t base,
                                             uint64_t (&c)[kListBatch]) const {
#pragma unroll
    for (int j = 0; j < kListBatch; ++j) {
      const uint32_t i = base + static_cast<uint32_t>(j * kThreads + thread);
      c[j] = i < n ? list[i] : 0;
    }
  }

  // A prefix that every element of list[0, n) shares (n >= 2 distinct elements), the longest that
  // ends on a pass boundary, as a start for find_boundary: it skips the passes whose histogram
  // would hold everything in one bin (scores close together, e.g. a pool above a tight gate).
  __device__ Boundary shared_prefix(const uint64_t* list, uint32_t n) const {
    const int lane = thread % 32;
    static_assert(alignof(ListScratch<kWarps>) >= alignof(unsigned long long),
                  "the histogram, the scratch's first member, holds two 64-bit words here");
    auto* bits = reinterpret_cast<unsigned long long*>(scratch.histogram);  // [0] any, [1] all
    if (thread == 0) {
      bits[0] = 0;
      bits[1] = ~0ull;
    }
    sync();
    uint64_t any = 0;
    uint64_t all = ~uint64_t{0};
    for (uint32_t base = 0; base < n; base += kListBatch * kThreads) {
      uint64_t c[kListBatch];
      load_batch(list, n, base, c);
#pragma unroll
      for (int j = 0; j < kListBatch; ++j) {
        if (base + static_cast<uint32_t>(j * kThreads + thread) < n) {
          any |= c[j];
          all &= c[j];
        }
      }
    }
    const auto high = [](uint64_t v) { return static_cast<uint32_t>(v >> 32); };
    const auto low = [](uint64_t v) { return static_cast<uint32_t>(v); };
    any = uint64_t{__reduce_or_sync(0xffffffffu, high(any))} << 32 |
          __reduce_or_sync(0xffffffffu, low(any));
    all = uint64_t{__reduce_and_sync(0xffffffffu, high(all))} << 32 |
          __reduce_and_sync(0xffffffffu, low(all));
    if (lane == 0) {
      atomicOr(&bits[0], any);
      atomicAnd(&bits[1], all);
    }
    sync();
    const uint64_t shared = bits[1];
    const uint32_t differ =
        64u - static_cast<uint32_t>(__clzll(static_cast<long long>(bits[0] ^ shared)));
    sync();  // the histogram is find_boundary's again
    // Rounded up to a pass boundary of the descent from 64 (a coarser prefix is shared too), so
    // that no pass is narrower than 9 bits.
    const uint32_t shift = 64u - kRadixBits * ((64u - differ) / kRadixBits);
    return {shift == 64 ? 0 : shared >> shift, shift};
  }

  // The boundary of the k best of list[0, n) (n >= k), descending from `start` (all of the list
  // shares its prefix; by default none).
  __device__ Boundary find_boundary(const uint64_t* list, uint32_t n, uint32_t k,
                                    Boundary start = {0, 64}) const {
    const int lane = thread % 32;
    const int warp = thread / 32;
    uint64_t prefix = start.prefix;
    uint32_t shift = start.shift;
    uint32_t need = k;
    for (;;) {
      const uint32_t width = shift < kRadixBits ? shift : kRadixBits;
      const uint32_t above = shift;  // bits at and above this are the prefix
      shift -= width;
      const uint32_t bins = 1u << width;
      for (uint32_t b = thread; b < bins; b += kThreads) scratch.histogram[b] = 0;
      sync();
      for (uint32_t base = 0; base < n; base += kListBatch * kThreads) {
        uint64_t c[kListBatch];
        load_batch(list, n, base, c);
#pragma unroll
        for (int j = 0; j < kListBatch; ++j) {
          // One atomic per candidate even where they crowd into one bin: aggregating the lanes
          // of a shared bin (match.any, or lane 0's bin by a shuffle and a ballot) measured
          // slower on the H200.
          const uint32_t i = base + static_cast<uint32_t>(j * kThreads + thread);
          if (i < n && (above == 64 || (c[j] >> above) == prefix)) {
            atomicAdd(&scratch.histogram[(c[j] >> shift) & (bins - 1)], 1u);
          }
        }
      }
      sync();
      if (warp == 0) {
        // Lane l holds the bins_per_lane bins below bins - l * bins_per_lane, from the top.
        const uint32_t per_lane = bins / 32;
        const uint32_t top = bins - 1 - static_cast<uint32_t>(lane) * per_lane;
        uint32_t lane_total = 0;
        for (uint32_t j = 0; j < per_lane; ++j) lane_total += scratch.histogram[top - j];
        const uint32_t inclusive = cuda_common::warp_inclusive_sum(lane_total, lane);
        uint32_t before = inclusive - lane_total;  // in bins above this lane's
        if (before < need && need <= inclusive) {
          for (uint32_t j = 0; j < per_lane; ++j) {
            const uint32_t count = scratch.histogram[top - j];
            if (before < need && need <= before + count) {
              const uint32_t remaining = need - before;
              scratch.prefix = (prefix << width) | (top - j);
              scratch.need = remaining;
              scratch.done = count == remaining ? 1u : 0u;
              break;
            }
            before += count;
          }
        }
      }
      sync();
      need = scratch.need;
      prefix = scratch.prefix;
      const bool done = scratch.done != 0;
      sync();
      if (done) return {prefix, shift};
    }
  }

  // Keeps the k best of list[0, n) (n > k) in list[0, k); returns the new gate. Not inlined: the
  // side warps call it rarely, and inlined it would crowd their 72 registers everywhere.
  __device__ __noinline__ uint64_t keep_best(uint64_t* list, uint32_t n, uint32_t k) const {
    const Boundary boundary = find_boundary(list, n, k);
    compact(list, n, boundary);
    return boundary.gate();
  }

  // Calls write(position, c) for every element c of list[0, n) that the boundary keeps, with
  // positions first, first + 1, ... in list order; returns first + the number kept.
  template <class Write>
  __device__ uint32_t for_each_kept(const uint64_t* list, uint32_t n, const Boundary& boundary,
                                    uint32_t first, Write write) const {
    const int lane = thread % 32;
    const int warp = thread / 32;
    const uint32_t below_lane = (1u << lane) - 1u;
    uint32_t written = first;
    for (uint32_t base = 0; base < n; base += kListBatch * kThreads) {
      uint64_t c[kListBatch];
      uint32_t ballot[kListBatch];
      load_batch(list, n, base, c);
#pragma unroll
      for (int j = 0; j < kListBatch; ++j) {
        const uint32_t i = base + static_cast<uint32_t>(j * kThreads + thread);
        ballot[j] = __ballot_sync(0xffffffffu, i < n && boundary.keeps(c[j]));
        if (lane == 0) scratch.warp_counts[j][warp] = static_cast<uint32_t>(__popc(ballot[j]));
      }
      sync();
#pragma unroll
      for (int j = 0; j < kListBatch; ++j) {
        uint32_t offset = written;
        if constexpr (kWarps <= 4) {
          // A few warps: every thread adds the counts (fewer registers than the scan).
#pragma unroll
          for (int w = 0; w < kWarps; ++w) {
            const uint32_t count = scratch.warp_counts[j][w];
            if (w < warp) offset += count;
            written += count;
          }
        } else {
          // Lane w holds warp w's count: an exclusive scan gives each warp its offset.
          const uint32_t count = lane < kWarps ? scratch.warp_counts[j][lane] : 0u;
          const uint32_t inclusive = cuda_common::warp_inclusive_sum(count, lane);
          offset += __shfl_sync(0xffffffffu, inclusive - count, warp);
          written += __shfl_sync(0xffffffffu, inclusive, kWarps - 1);
        }
        if ((ballot[j] >> lane) & 1u) write(offset + __popc(ballot[j] & below_lane), c[j]);
      }
      sync();
    }
    return written;
  }

  __device__ void compact(uint64_t* list, uint32_t n, const Boundary& boundary) const {
    for_each_kept(list, n, boundary, 0, [list](uint32_t position, uint64_t c) { list[position] = c; });
  }
};

}  // namespace litetopk::cuda_indexer
