// A block's candidate buffer in shared memory: the heart of Sample-Filter-Select.
//
// 1. offer_step(): every thread proposes a few (key, index) pairs; those whose composite is >= the
//    thread's gate are counted with one shared-memory atomic per warp, then (after the step's one
//    barrier) written behind the buffer's count. The step counters are triple-buffered so that one
//    barrier per step suffices.
// 2. When a step would overflow the buffer, compact() keeps exactly the best k entries (radix
//    select over the buffer, then survivors past position k move into the holes left before it)
//    and raises the gate to the k-th kept entry; the step is then filtered again with the new gate
//    (it fits: the capacity is at least k plus one step). The gate only rises, and the buffer never
//    drops an entry that can still be in the answer.
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
    union {  // the radix select's histogram is dead by the time compact() collects holes
      uint32_t histogram[kRadixBins];
      uint16_t holes[kMaxK];
    };
    typename Finder::Storage finder;
    uint64_t gate;  // admit composites >= gate
    uint32_t count;
    uint32_t step_count[3];    // offer_step: entries before step i (slot i % 3)
    uint32_t step_pending[3];  // offer_step: entries step i adds
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

  // Thread 0 only, followed by a barrier: empties the buffer and readies the step counters.
  __device__ void reset(uint64_t gate) {
    s.count = 0;
    s.gate = max_u64(gate, keys::kAdmitAllValid);
    for (int i = 0; i < 3; ++i) {
      s.step_count[i] = 0;
      s.step_pending[i] = 0;
    }
  }

  // After the last offer_step (step index `steps`): a barrier, then s.count is current.
  __device__ void finish_steps(uint32_t steps) {
    __syncthreads();
    if (threadIdx.x == 0) {
      s.count = s.step_count[steps % 3];
      s.step_count[0] = s.count;
      for (int i = 0; i < 3; ++i) s.step_pending[i] = 0;
    }
    __syncthreads();
  }

  // Offers kItems pairs per thread as step number `step` (0, 1, 2, ... since the last
  // reset/finish_steps). All threads call it; it contains one barrier (two when it compacts), after
  // which thread 0 runs after_barrier(). `gate` is the calling thread's gate; it only rises.
  // Returns the pivot of a compaction (for sharing the bound), or prefix 0 / shift 64 when none ran.
  template <int kItems, typename AfterBarrier>
  __device__ __forceinline__ Pivot offer_step(uint32_t step, const uint32_t (&key)[kItems],
                                              const uint32_t (&index)[kItems], uint64_t& gate,
                                              AfterBarrier&& after_barrier) {
    static_assert(kItems * kThreads <= kCapacity - kMaxK, "a step must fit after a compaction");
    const uint32_t slot = step % 3;
    uint32_t mine = 0;
    uint32_t before = 0;  // passing pairs of lower lanes in this warp
    uint32_t warp_base = count_passing(key, index, gate, &s.step_pending[slot], &mine, &before);
    __syncthreads();
    if (threadIdx.x == 0) after_barrier();
    const uint32_t base = s.step_count[slot];
    const uint32_t total = s.step_pending[slot];
    Pivot pivot{0, 64, 0};
    if (base + total > kCapacity) {
      // Rare: compact, then filter this step again with the risen gate.
      if (threadIdx.x == 0) s.count = base;
      __syncthreads();
      pivot = compact();
      gate = max_u64(gate, s.gate);
      warp_base = count_passing(key, index, gate, &s.count, &mine, &before);
      write_passing(key, index, gate, warp_base + before);
      __syncthreads();
      if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = s.count;
    } else {
      write_passing(key, index, gate, base + warp_base + before);
      if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = base + total;
    }
    // The counter of step - 1 is free again: every thread has passed this step's barrier.
    if (threadIdx.x == 0) s.step_pending[(slot + 2) % 3] = 0;
    return pivot;
  }

  // Counts this thread's passing pairs (*mine), those of lower lanes (*before), and reserves the
  // warp's total with one atomicAdd on *counter. Returns the warp's base from the atomic.
  template <int kItems>
  __device__ __forceinline__ uint32_t count_passing(const uint32_t (&key)[kItems],
                                                    const uint32_t (&index)[kItems], uint64_t gate,
                                                    uint32_t* counter, uint32_t* mine,
                                                    uint32_t* before) {
    uint32_t n = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) n += passes(key[i], index[i], gate) ? 1u : 0u;
    *mine = n;
    *before = 0;
    const unsigned full = 0xffffffffu;
    if (!__any_sync(full, n != 0)) return 0;
    const int lane = static_cast<int>(threadIdx.x % 32);
    uint32_t inclusive = n;
#pragma unroll
    for (int delta = 1; delta < 32; delta *= 2) {
      const uint32_t other = __shfl_up_sync(full, inclusive, delta);
      if (lane >= delta) inclusive += other;
    }
    uint32_t warp_base = 0;
    if (lane == 31) warp_base = atomicAdd(counter, inclusive);
    *before = inclusive - n;
    return __shfl_sync(full, warp_base, 31);
  }

  template <int kItems>
  __device__ __forceinline__ void write_passing(const uint32_t (&key)[kItems],
                                                const uint32_t (&index)[kItems], uint64_t gate,
                                                uint32_t at) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (passes(key[i], index[i], gate)) s.entries[at++] = keys::make_composite(key[i], index[i]);
    }
  }

  static __device__ __forceinline__ bool passes(uint32_t key, uint32_t index, uint64_t gate) {
    const auto gate_key = static_cast<uint32_t>(gate >> 32);
    return key > gate_key ||
           (key == gate_key && ~index >= static_cast<uint32_t>(gate));
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
