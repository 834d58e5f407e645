// A block's candidate buffer in shared memory: the heart of Sample-Filter-Select.
//
// 1. offer_step(): every thread proposes a few (key, index) pairs; those whose composite is >= the
//    thread's gate are counted with one shared-memory atomic per warp, then (after the step's one
//    barrier) written behind the buffer's count. The step counters are triple-buffered so that one
//    barrier per step suffices.
// 2. When a step would overflow the buffer, compact() keeps exactly the best k entries and raises
//    the gate to the k-th kept entry; the step is then filtered again with the new gate (it fits:
//    the capacity is at least k plus one step). The k-th entry comes from a range select: 2048
//    equal-width bins over [min, max] of the entries, refined inside the bin that holds the k-th,
//    so concentrated scores never pile into a few contended bins. Survivors past position k then
//    move into the holes left before it. The gate only rises, and the buffer never drops an entry
//    that can still be in the answer.
// 3. emit(): the final range select writes the best k entries (and -1 padding) to the output.
// Also: appends that move the count directly (resume_steps after them) and count_at_or_above (the
// check of sample_filter_select.cu's estimated gate).
#pragma once

#include <cstdint>

#include "cuda/common/warp_scan.cuh"
#include "formats/score_keys.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/score_source.cuh"

namespace litetopk::cuda_select {

// The result of a range selection of the k-th best entry, in value space v = c >> shift: entries
// with v > hi are selected (count_greater of them); those with lo <= v <= hi are ties, of which
// k - count_greater are selected.
struct RangePivot {
  uint64_t lo;
  uint64_t hi;
  int shift;
  uint32_t count_greater;

  // Does composite c beat the pivot (+1), tie with it (0) or lose (-1)?
  __device__ __forceinline__ int compare(uint64_t c) const {
    const uint64_t v = c >> shift;
    return v > hi ? 1 : (v >= lo ? 0 : -1);
  }
};

// Pairs already decoded into registers (the merge of candidate lists, the row's head and tail).
template <int kCount_>
struct ArrayItems {
  static constexpr int kCount = kCount_;
  uint32_t key[kCount];
  uint32_t index[kCount];
  uint32_t definite = 0;
  uint32_t tie = 0;  // bit i: pair i is present (checked exactly)

  __device__ __forceinline__ void get(int i, uint32_t* k, uint32_t* x) const {
    *k = key[i];
    *x = index[i];
  }
};

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
    uint64_t range_min;  // select_pivot's block reduction
    uint64_t range_max;
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

  // After appends that moved s.count directly (not through offer_step): a barrier, then the
  // step counters start again from s.count.
  __device__ void resume_steps() {
    __syncthreads();
    if (threadIdx.x == 0) {
      s.step_count[0] = s.count;
      for (int i = 0; i < 3; ++i) s.step_pending[i] = 0;
    }
    __syncthreads();
  }

  // Offers one step of pairs (sample_filter_select.cu's tile steps follow the same protocol in
  // offer_elements). `items` (ArrayItems below) holds kCount pairs per thread, decoded by get(i),
  // and two bit masks: `definite` (pairs known to pass the gate) and `tie` (pairs to check
  // exactly). Step numbers count 0, 1, 2, ... since the last reset/finish_steps (or
  // resume_steps). All threads call it; it contains
  // one barrier (two when it compacts), after which thread 0 runs after_barrier(). `gate` is the
  // calling thread's gate; it only rises. Returns the bound a compaction established (k entries
  // at or above it; other blocks of the row may use it as a gate), or 0 when none ran.
  template <typename Items, typename AfterBarrier>
  __device__ __forceinline__ uint64_t offer_step(uint32_t step, const Items& items, uint64_t& gate,
                                                 AfterBarrier&& after_barrier) {
    static_assert(Items::kCount * kThreads <= kCapacity - kMaxK,
                  "a step must fit after a compaction");
    const uint32_t slot = step % 3;
    uint32_t pass = items.definite;
    if (items.tie != 0) pass |= exact_passes(items, gate, items.tie);
    uint32_t before = 0;  // passing pairs of lower lanes in this warp
    uint32_t warp_base = reserve(pass, &s.step_pending[slot], &before);
    __syncthreads();
    if (threadIdx.x == 0) after_barrier();
    const uint32_t base = s.step_count[slot];
    const uint32_t total = s.step_pending[slot];
    uint64_t bound = 0;
    if (base + total > kCapacity) {
      // Rare: compact, then filter this step again with the risen gate.
      if (threadIdx.x == 0) s.count = base;
      __syncthreads();
      bound = shared_bound(compact());
      gate = max_u64(gate, s.gate);
      if (pass != 0) pass = exact_passes(items, gate, pass);
      warp_base = reserve(pass, &s.count, &before);
      write(items, pass, warp_base + before);
      __syncthreads();
      if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = s.count;
    } else {
      write(items, pass, base + warp_base + before);
      if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = base + total;
    }
    // The counter of step - 1 is free again: every thread has passed this step's barrier.
    if (threadIdx.x == 0) s.step_pending[(slot + 2) % 3] = 0;
    return bound;
  }

  // The pairs among `candidates` (bit mask) whose composite passes `gate`.
  template <typename Items>
  static __device__ __forceinline__ uint32_t exact_passes(const Items& items, uint64_t gate,
                                                         uint32_t candidates) {
    uint32_t result = 0;
#pragma unroll
    for (int i = 0; i < Items::kCount; ++i) {
      if ((candidates >> i) & 1u) {
        uint32_t key, index;
        items.get(i, &key, &index);
        if (passes(key, index, gate)) result |= 1u << i;
      }
    }
    return result;
  }

  // Reserves room for this thread's passing pairs with one atomicAdd per warp on *counter. Returns
  // the warp's base; *before = passing pairs of lower lanes.
  static __device__ __forceinline__ uint32_t reserve(uint32_t pass, uint32_t* counter,
                                                     uint32_t* before) {
    const unsigned full = 0xffffffffu;
    const auto n = static_cast<uint32_t>(__popc(pass));
    *before = 0;
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

  template <typename Items>
  __device__ __forceinline__ void write(const Items& items, uint32_t pass, uint32_t at) {
    if (pass == 0) return;
#pragma unroll
    for (int i = 0; i < Items::kCount; ++i) {
      if ((pass >> i) & 1u) {
        uint32_t key, index;
        items.get(i, &key, &index);
        s.entries[at++] = keys::make_composite(key, index);
      }
    }
  }

  static __device__ __forceinline__ bool passes(uint32_t key, uint32_t index, uint64_t gate) {
    const auto gate_key = static_cast<uint32_t>(gate >> 32);
    return key > gate_key ||
           (key == gate_key && ~index >= static_cast<uint32_t>(gate));
  }

  // The selection works on values v = c >> value_shift(): the key alone (ties broken in arrival
  // order) or the whole composite (deterministic: no ties).
  __device__ __forceinline__ int value_shift() const { return final_shift(deterministic); }

  // Range select of the k-th best entry among the first `count` (count > k): 2048 equal-width
  // bins over [min, max] of the values, then over the bin holding the k-th entry, until the bin
  // is one value wide or is taken whole, or after `max_levels` levels (then the bin [lo, hi] only
  // holds the k-th entry: at least k entries are at or above lo).
  __device__ RangePivot select_pivot(uint32_t count, int max_levels = 64) {
    const int shift = value_shift();
    if (threadIdx.x == 0) {
      s.range_min = ~uint64_t{0};
      s.range_max = 0;
    }
    __syncthreads();
    uint64_t lo = ~uint64_t{0};
    uint64_t hi = 0;
    for (uint32_t e = threadIdx.x; e < count; e += kThreads) {
      const uint64_t v = s.entries[e] >> shift;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    warp_min_max(&lo, &hi);
    if (threadIdx.x % 32 == 0) {
      atomicMin(reinterpret_cast<unsigned long long*>(&s.range_min), lo);
      atomicMax(reinterpret_cast<unsigned long long*>(&s.range_max), hi);
    }
    __syncthreads();
    lo = s.range_min;
    hi = s.range_max;
    uint32_t rank = k;
    uint32_t greater = 0;
    while (lo < hi) {
      const int width_bits = max(0, 64 - __clzll(static_cast<long long>(hi - lo)) - kRadixBits);
      for (int i = threadIdx.x; i < kRadixBins; i += kThreads) s.histogram[i] = 0;
      __syncthreads();
      for (uint32_t e = threadIdx.x; e < count; e += kThreads) {
        const uint64_t v = s.entries[e] >> shift;
        if (v >= lo && v <= hi) atomicAdd(&s.histogram[(v - lo) >> width_bits], 1u);
      }
      __syncthreads();
      uint32_t above = 0;
      const uint32_t bin = Finder::find(s.finder, s.histogram, rank, &above);
      const uint32_t in_bin = s.histogram[bin];
      rank -= above;
      greater += above;
      const uint64_t bin_lo = lo + (uint64_t{bin} << width_bits);
      const uint64_t bin_hi = bin_lo + ((uint64_t{1} << width_bits) - 1);
      lo = bin_lo;
      hi = bin_hi < hi ? bin_hi : hi;
      __syncthreads();  // histogram and finder are reused by the next level
      if (in_bin == rank) break;  // the whole bin is selected: no ties to resolve further
      if (--max_levels == 0) break;
    }
    return {lo, hi, shift, greater};
  }

  // Is entry c kept by a selection at `pivot`? Ties are granted in arrival order.
  __device__ __forceinline__ bool keeps(uint64_t c, const RangePivot& pivot, uint32_t ties_wanted) {
    const int order = pivot.compare(c);
    return order > 0 || (order == 0 && atomicAdd(&s.tie_counter, 1u) < ties_wanted);
  }

  // The lowest composite that can still enter after a selection at `pivot` kept k entries. When
  // the k-th value is resolved exactly, only strictly better entries can help.
  __device__ __forceinline__ static uint64_t gate_after(const RangePivot& pivot) {
    return (pivot.lo == pivot.hi ? pivot.hi + 1 : pivot.lo) << pivot.shift;
  }

  // A lower bound of the row's k-th best composite that other blocks of the row may use: the
  // buffer holds k entries at or above it.
  __device__ __forceinline__ static uint64_t shared_bound(const RangePivot& pivot) {
    return pivot.lo << pivot.shift;
  }

  static __device__ __forceinline__ void warp_min_max(uint64_t* lo, uint64_t* hi) {
#pragma unroll
    for (int delta = 16; delta > 0; delta /= 2) {
      const uint64_t other_lo = __shfl_xor_sync(0xffffffffu, *lo, delta);
      const uint64_t other_hi = __shfl_xor_sync(0xffffffffu, *hi, delta);
      *lo = other_lo < *lo ? other_lo : *lo;
      *hi = other_hi > *hi ? other_hi : *hi;
    }
  }

  // Keeps exactly the best k entries. Returns the pivot. All threads call it; count > k.
  __device__ RangePivot compact() {
    const uint32_t count = s.count;
    const RangePivot pivot = select_pivot(count);
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

  // How many of the first count entries are at or above `bound`. All threads call it and get it.
  __device__ uint32_t count_at_or_above(uint64_t bound) {
    if (threadIdx.x == 0) s.hole_counter = 0;
    __syncthreads();
    uint32_t mine = 0;
    for (uint32_t e = threadIdx.x; e < s.count; e += kThreads) mine += s.entries[e] >= bound;
    mine = __reduce_add_sync(0xffffffffu, mine);
    if (threadIdx.x % 32 == 0 && mine != 0) atomicAdd(&s.hole_counter, mine);
    __syncthreads();
    const uint32_t total = s.hole_counter;
    __syncthreads();
    return total;
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
    const RangePivot pivot = select_pivot(count);
    const uint32_t ties_wanted = k - pivot.count_greater;
    if (threadIdx.x == 0) {
      s.tie_counter = 0;
      s.slot_counter = 0;
    }
    __syncthreads();
    // Slots with one shared atomic per warp and kind (cuda_common::warp_aggregated_slot): the
    // entries above the pivot take slots from 0 on, the ties theirs from count_greater on in
    // arrival order (those past ties_wanted none).
    for (uint32_t e = threadIdx.x; e < count; e += kThreads) {
      const uint64_t c = s.entries[e];
      const int order = pivot.compare(c);
      if (order > 0) {
        const uint32_t slot = cuda_common::warp_aggregated_slot(&s.slot_counter);
        write_output<Traits>(args, row, static_cast<int32_t>(slot), c);
      } else if (order == 0) {
        const uint32_t tie = cuda_common::warp_aggregated_slot(&s.tie_counter);
        if (tie < ties_wanted) {
          write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie), c);
        }
      }
    }
  }
};

}  // namespace litetopk::cuda_select
