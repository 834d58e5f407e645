// Exact top-k over a candidate list in global memory, run by a team of warps (a math warpgroup or
// the side warps of the fused indexer kernel) synchronized by a named barrier.
//
// Candidates are distinct 64-bit composites (score key << 32 | ~key index, core/score_keys.h):
// larger is better and no two are equal, so "the k best" is always exactly k elements.
// 1. find_boundary (over one list or the union of two): radix descent, 8 bits per pass from the
//    top, 8 loads in flight per thread: a 256-bin histogram of the candidates that share the
//    prefix found so far picks the digit holding the k-th best, until the candidates of that
//    prefix are all needed (at the latest when one is left).
// 2. for_each_kept: an order-preserving pass, 32 * warps candidates per step, hands every kept
//    element (top bits >= the prefix: exactly k over the lists) and its position to a writer:
//    compact (in place) or the kernel's output.
// keep_best = both on one list; it returns the gate that the kept list implies: any later
// candidate at or below it is beaten by the k kept ones and can be dropped.
#pragma once

#include <cstdint>

#include "cuda/common/wgmma_sm90.cuh"

namespace litetopk::cuda_indexer {

constexpr int kRadixBins = 256;

struct ListScratch {
  uint32_t histogram[kRadixBins];
  uint32_t warp_counts[4];
  uint64_t prefix;
  uint32_t need;
  uint32_t done;
};

template <int kWarps>
struct ListTeam {
  static constexpr int kThreads = kWarps * 32;
  ListScratch& scratch;
  uint32_t barrier_id;
  int thread;  // 0 .. kThreads - 1

  __device__ __forceinline__ void sync() const { sm90::named_barrier(barrier_id, kThreads); }

  // The boundary of the k best of the union of lists[0][0, n[0]) and lists[1][0, n[1]) (together
  // more than k): the k best are the elements c with (c >> shift) >= prefix.
  struct Boundary {
    uint64_t prefix;
    uint32_t shift;
    __device__ bool keeps(uint64_t c) const { return (c >> shift) >= prefix; }
    // Any later candidate at or below this is beaten by the k kept ones.
    __device__ uint64_t gate() const { return (prefix << shift) - 1; }
  };

  __device__ Boundary find_boundary(const uint64_t* const (&lists)[2], const uint32_t (&n)[2],
                                    uint32_t k) const {
    constexpr int kBatch = 8;  // loads in flight per thread
    const int lane = thread % 32;
    const int warp = thread / 32;
    uint64_t prefix = 0;
    uint32_t shift = 64;
    uint32_t need = k;
    for (;;) {
      shift -= 8;
      for (int b = thread; b < kRadixBins; b += kThreads) scratch.histogram[b] = 0;
      sync();
      for (int l = 0; l < 2; ++l) {
        for (uint32_t base = 0; base < n[l]; base += kBatch * kThreads) {
          uint64_t c[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const uint32_t i = base + static_cast<uint32_t>(j * kThreads + thread);
            c[j] = i < n[l] ? lists[l][i] : 0;
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const uint32_t i = base + static_cast<uint32_t>(j * kThreads + thread);
            if (i < n[l] && (shift == 56 || (c[j] >> (shift + 8)) == prefix)) {
              atomicAdd(&scratch.histogram[(c[j] >> shift) & 0xffu], 1u);
            }
          }
        }
      }
      sync();
      if (warp == 0) {
        // Lane l holds bins 255 - 8 l - j (j < 8): counts from the top, then a warp scan.
        uint32_t counts[8];
        uint32_t lane_total = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          counts[j] = scratch.histogram[kRadixBins - 1 - 8 * lane - j];
          lane_total += counts[j];
        }
        uint32_t inclusive = lane_total;
#pragma unroll
        for (int offset = 1; offset < 32; offset *= 2) {
          const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
          if (lane >= offset) inclusive += up;
        }
        uint32_t above = inclusive - lane_total;  // in bins above this lane's
        if (above < need && need <= inclusive) {
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            if (above < need && need <= above + counts[j]) {
              const uint32_t digit = static_cast<uint32_t>(kRadixBins - 1 - 8 * lane - j);
              const uint32_t remaining = need - above;
              scratch.prefix = (prefix << 8) | digit;
              scratch.need = remaining;
              scratch.done = counts[j] == remaining ? 1u : 0u;
            }
            above += counts[j];
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

  // Keeps the k best of list[0, n) (n > k) in list[0, k); returns the new gate.
  __device__ uint64_t keep_best(uint64_t* list, uint32_t n, uint32_t k) const {
    const uint64_t* const lists[2] = {list, list};
    const uint32_t counts[2] = {n, 0};
    const Boundary boundary = find_boundary(lists, counts, k);
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
    uint32_t written = first;
    for (uint32_t base = 0; base < n; base += kThreads) {
      const uint32_t i = base + static_cast<uint32_t>(thread);
      const uint64_t c = i < n ? list[i] : 0;
      const bool keep = i < n && boundary.keeps(c);
      const uint32_t ballot = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) scratch.warp_counts[warp] = static_cast<uint32_t>(__popc(ballot));
      sync();
      uint32_t offset = written;
      uint32_t total = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const uint32_t count = scratch.warp_counts[w];
        if (w < warp) offset += count;
        total += count;
      }
      if (keep) write(offset + __popc(ballot & ((1u << lane) - 1u)), c);
      written += total;
      sync();
    }
    return written;
  }

  // In place: a step writes only below what it has read (positions <= the read index).
  __device__ void compact(uint64_t* list, uint32_t n, const Boundary& boundary) const {
    for_each_kept(list, n, boundary, 0, [list](uint32_t position, uint64_t c) { list[position] = c; });
  }
};

}  // namespace litetopk::cuda_indexer
