// A block's candidate buffer in shared memory: the heart of Sample-Filter-Select.
//
// 1. offer(): each thread proposes a few (key, index) pairs; those whose composite is >= the gate
//    are appended with one shared-memory atomic per warp.
// 2. make_room(): before a tile, if the tile might not fit, compact() keeps exactly the best k
//    entries (radix select over the buffer, then survivors past position k move into the holes
//    left before it) and raises the gate to the k-th kept entry. The gate only rises, and the
//    buffer never drops an entry that can still be in the answer.
// 3. emit(): the final radix select writes the best k entries (and -1 padding) to the output.
#pragma once

#include <cstdint>

#include "core/score_keys.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/score_source.cuh"

namespace litetopk::cuda_select {

template <int kThreads_, int kCapacity_, int kMaxK_>
struct CandidateBuffer {
  static constexpr int kThreads = kThreads_;
  static constexpr int kCapacity = kCapacity_;
  static constexpr int kMaxK = kMaxK_;
  static_assert(kMaxK <= 65536, "hole positions are 16-bit");
  using Finder = DigitFinder<kThreads>;

  struct Storage {
    uint64_t entries[kCapacity];
    uint16_t holes[kMaxK];
    uint32_t histogram[kRadixBins];
    typename Finder::Storage finder;
    uint64_t gate;  // admit composites >= gate
    uint32_t count;
    uint32_t tie_counter;
    uint32_t slot_counter;
    uint32_t hole_counter;
    uint32_t hole_taken;
  };

  Storage& s;
  uint32_t k;
  bool deterministic;

  __device__ CandidateBuffer(Storage& storage, uint32_t k_, bool deterministic_)
      : s(storage), k(k_), deterministic(deterministic_) {}

  // Thread 0 only, followed by a barrier.
  __device__ void reset(uint64_t gate) {
    s.count = 0;
    s.gate = max_u64(gate, keys::kAdmitAllValid);
  }

  // Appends the pairs whose composite passes `gate`. All threads of the block call it; the caller
  // guarantees room for kItems entries per thread.
  template <int kItems>
  __device__ __forceinline__ void offer(const uint32_t (&key)[kItems],
                                        const uint32_t (&index)[kItems], uint64_t gate) {
    const uint32_t gate_key = static_cast<uint32_t>(gate >> 32);
    bool pass[kItems];
    uint32_t mine = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      pass[i] = key[i] >= gate_key && keys::make_composite(key[i], index[i]) >= gate;
      mine += pass[i] ? 1u : 0u;
    }
    const unsigned full = 0xffffffffu;
    if (!__any_sync(full, mine != 0)) return;
    const int lane = static_cast<int>(threadIdx.x % 32);
    uint32_t inclusive = mine;
#pragma unroll
    for (int delta = 1; delta < 32; delta *= 2) {
      const uint32_t other = __shfl_up_sync(full, inclusive, delta);
      if (lane >= delta) inclusive += other;
    }
    uint32_t base = 0;
    if (lane == 31) base = atomicAdd(&s.count, inclusive);
    base = __shfl_sync(full, base, 31);
    uint32_t at = base + inclusive - mine;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (pass[i]) s.entries[at++] = keys::make_composite(key[i], index[i]);
    }
  }

  // Radix select of the k-th best entry among the first `count`. Requires count > k.
  __device__ Pivot select_pivot(uint32_t count) {
    uint64_t prefix = 0;
    uint32_t rank = k;
    uint32_t greater = 0;
    int top = 64;
    const int last = final_shift(deterministic);
    while (top > last) {
      const int width = digit_width(top);
      const int shift = top - width;
      for (int i = threadIdx.x; i < kRadixBins; i += kThreads) s.histogram[i] = 0;
      __syncthreads();
      for (uint32_t e = threadIdx.x; e < count; e += kThreads) {
        const uint64_t c = s.entries[e];
        if (matches_prefix(c, prefix, top)) {
          atomicAdd(&s.histogram[(c >> shift) & ((1u << width) - 1)], 1u);
        }
      }
      __syncthreads();
      uint32_t above = 0;
      const uint32_t digit = Finder::find(s.finder, s.histogram, rank, &above);
      const uint32_t in_bin = s.histogram[digit];
      rank -= above;
      greater += above;
      prefix = (prefix << width) | digit;
      top = shift;
      __syncthreads();  // histogram and finder are reused by the next digit
      if (in_bin == rank) break;  // the whole bin is selected: no ties to resolve further
    }
    return {prefix, top, greater};
  }

  // Is entry c kept by a selection at `pivot`? Ties are granted in arrival order.
  __device__ __forceinline__ bool keeps(uint64_t c, const Pivot& pivot, uint32_t ties_wanted) {
    const int order = compare_to_pivot(c, pivot);
    return order > 0 || (order == 0 && atomicAdd(&s.tie_counter, 1u) < ties_wanted);
  }

  // The lowest composite that can still enter after a selection at `pivot` kept k entries. At full
  // resolution (ties resolved) only strictly better entries can help.
  __device__ __forceinline__ uint64_t gate_after(const Pivot& pivot) const {
    const bool resolved = pivot.shift == final_shift(deterministic);
    return (resolved ? pivot.prefix + 1 : pivot.prefix) << pivot.shift;
  }

  // A lower bound of the row's k-th best composite that other blocks of the row may use: the
  // buffer holds k entries at or above it.
  __device__ __forceinline__ static uint64_t shared_bound(const Pivot& pivot) {
    return pivot.prefix << pivot.shift;
  }

  // Keeps exactly the best k entries. Returns the pivot. All threads call it; count > k.
  __device__ Pivot compact() {
    const uint32_t count = s.count;
    const Pivot pivot = select_pivot(count);
    const uint32_t ties_wanted = k - pivot.count_greater;
    if (threadIdx.x == 0) {
      s.tie_counter = 0;
      s.hole_counter = 0;
      s.hole_taken = 0;
    }
    __syncthreads();
    // Entries before position k stay put when kept; the others leave holes.
    for (uint32_t e = threadIdx.x; e < k; e += kThreads) {
      if (!keeps(s.entries[e], pivot, ties_wanted)) {
        s.holes[atomicAdd(&s.hole_counter, 1u)] = static_cast<uint16_t>(e);
      }
    }
    __syncthreads();
    // Kept entries past position k fill the holes (as many as there are holes).
    for (uint32_t e = k + threadIdx.x; e < count; e += kThreads) {
      const uint64_t c = s.entries[e];
      if (keeps(c, pivot, ties_wanted)) s.entries[s.holes[atomicAdd(&s.hole_taken, 1u)]] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      s.count = k;
      s.gate = max_u64(s.gate, gate_after(pivot));
    }
    __syncthreads();
    return pivot;
  }

  // Writes the best min(k, count) entries of row `row` to its output slots, then -1 padding.
  template <typename Traits>
  __device__ void emit(const SelectArgs& args, int64_t row) {
    const uint32_t count = s.count;
    if (count <= k) {
      for (uint32_t slot = threadIdx.x; slot < k; slot += kThreads) {
        write_output<Traits>(args, row, static_cast<int32_t>(slot),
                             slot < count ? s.entries[slot] : keys::kEmptyComposite);
      }
      return;
    }
    const Pivot pivot = select_pivot(count);
    const uint32_t ties_wanted = k - pivot.count_greater;
    if (threadIdx.x == 0) {
      s.tie_counter = 0;
      s.slot_counter = 0;
    }
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < count; e += kThreads) {
      const uint64_t c = s.entries[e];
      const int order = compare_to_pivot(c, pivot);
      if (order > 0) {
        write_output<Traits>(args, row, static_cast<int32_t>(atomicAdd(&s.slot_counter, 1u)), c);
      } else if (order == 0) {
        const uint32_t tie = atomicAdd(&s.tie_counter, 1u);
        if (tie < ties_wanted) {
          write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie), c);
        }
      }
    }
  }
};

}  // namespace litetopk::cuda_select
