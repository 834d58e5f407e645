// Sieve select, for few long rows: a row is cut into interleaved segments, each segment keeps only
// its few best entries (a sieve sized for its share of the top k), and the row's last block to
// finish selects exactly among the survivors. One read of the row, no block ever waits for another.
//
// Pipeline of sieve_kernel (block = (row, segment)):
// 1. Load: the segment's 128-byte chunks of the row (chunk c belongs to segment c % segments, so a
//    run of high scores is spread over many segments) become keys in shared memory; the elements
//    outside whole 16-byte vectors go to the last segment.
// 2. Cut: a radix search over the keys for the bin of the segment's `keep`-th best key (one digit
//    of 11 bits, more while the entries from that bin up would not fit the segment's `capacity`).
//    Every key from the bin's floor up survives; at full precision, ties at the cutoff survive up
//    to the capacity. A segment with at most `capacity` valid keys keeps them all.
// 3. Publish: the survivors as composites in the segment's `capacity` slots of the row's list
//    (positions from a block scan, empty composites after them), its cutoff and whether anything
//    was left behind; then one release atomic on the row's arrival counter, zeroed by a reset
//    kernel launched before this one (the sieve is its programmatic dependent and waits for it
//    only here, so its loads overlap the reset and its own launch). Every block but the row's
//    last returns.
// 4. Select, in the last block: the cutoffs, then the row's list in rounds of eight loads a
//    thread. An exact answer lies at or above the highest cutoff of a segment that left entries
//    behind, so only survivors from there up count: they are compacted into shared memory (warp
//    ballots, one shared atomic a warp per round). The pivot of the k-th best of them: radix
//    digits of up to 11 bits over the composites minus the lowest counted key (so that the first
//    digit spreads a narrow key range over its bins), until the pivot's bin is small enough for
//    one warp to rank. Each segment left behind only entries below its cutoff (or ties at it);
//    when every such cutoff lies at or below the pivot's bin (ties at a key-precision pivot are
//    interchangeable unless deterministic), the entries above the pivot and the ties still
//    needed are written (positions from a block scan). Otherwise the block selects over the
//    whole row itself. It resets the row's counter for the next launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>
#include <cuda/functional>
#include <cuda/std/functional>

#include "cuda/common/counter_reset.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/warp_scan.cuh"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kThreads = 512;
constexpr int kChunkVectors = 8;               // 16-byte vectors per chunk
constexpr int64_t kMaxSegmentElements = 8192;  // keys a segment holds on chip
constexpr int64_t kMinSegmentElements = 1024;  // shorter segments cost more than they spread
constexpr int kMaxSegments = 2 * kThreads;     // the last block reads two cutoffs a thread
constexpr int64_t kMaxSurvivors = 12288;       // per row (segments * capacity)
constexpr int kUnroll = 4;
constexpr int kListUnroll = 8;  // survivors a thread loads per round in the last block
constexpr int kSmallBin = 32;  // a pivot bin this small is finished by one warp

constexpr uint32_t kLeftBehind = 1;   // the segment had valid entries that did not survive
constexpr uint32_t kPartialTies = 2;  // some of its ties at the (full-precision) cutoff did not

struct alignas(8) SegmentInfo {
  uint32_t cutoff;  // every key above it survived (and every key equal, unless kPartialTies)
  uint32_t flags;
};

template <typename Traits>
struct SegmentGeometry {
  static constexpr int kPer = Traits::kPerVector;
  static constexpr int kChunkElements = kChunkVectors * kPer;
  int chunks;        // this segment's chunks of the row
  int vector_slots;  // key slots of those chunks
  int slots;         // plus the scalar elements (last segment only)

  __device__ __forceinline__ SegmentGeometry(const RowLayout<Traits>& layout, int segment,
                                             int segments) {
    const int row_chunks = (layout.num_vectors + kChunkVectors - 1) / kChunkVectors;
    chunks = segment < row_chunks ? (row_chunks - segment + segments - 1) / segments : 0;
    vector_slots = chunks * kChunkElements;
    slots = vector_slots + (segment == segments - 1 ? layout.num_scalar() : 0);
  }

  // The row element held in key slot s.
  __device__ __forceinline__ uint32_t element(const RowLayout<Traits>& layout, int segment,
                                              int segments, int s) const {
    if (s >= vector_slots) return static_cast<uint32_t>(layout.scalar_index(s - vector_slots));
    const int q = s / kChunkElements;
    const int within = s - q * kChunkElements;
    const int64_t vector = int64_t{segment + q * segments} * kChunkVectors + within / kPer;
    return static_cast<uint32_t>(layout.head + vector * kPer + within % kPer);
  }
};

// The lowest and highest key of the survivors that count, in the last block.
struct Bounds {
  uint32_t low;
  uint32_t high;
};
struct BoundsOp {
  __device__ __forceinline__ Bounds operator()(const Bounds& a, const Bounds& b) const {
    return {min(a.low, b.low), max(a.high, b.high)};
  }
};

using Reduce = cub::BlockReduce<uint32_t, kThreads>;
using BoundsReduce = cub::BlockReduce<Bounds, kThreads>;
using PairScan = cub::BlockScan<uint64_t, kThreads>;

struct SieveShared {
  uint32_t histogram[kRadixBins];
  typename DigitFinder<kThreads>::Storage finder;
  union {
    typename Reduce::TempStorage reduce;
    typename BoundsReduce::TempStorage bounds;
    typename PairScan::TempStorage scan;
  } temp;
  uint32_t sum;
  uint32_t kept;
  uint64_t pair_total;
  Bounds bounds;
  uint64_t bin[kSmallBin];  // a small pivot bin's entries (offset composites)
  uint32_t bin_count;
  Pivot small_pivot;
  bool last;
};

// The block-wide reduction of every thread's value by op, returned to every thread.
template <typename Op>
__device__ __forceinline__ uint32_t block_reduce(SieveShared& sh, uint32_t value, Op op) {
  const uint32_t reduced = Reduce(sh.temp.reduce).Reduce(value, op);
  if (threadIdx.x == 0) sh.sum = reduced;
  __syncthreads();
  const uint32_t all = sh.sum;
  __syncthreads();
  return all;
}

__device__ __forceinline__ uint32_t block_sum(SieveShared& sh, uint32_t value) {
  return block_reduce(sh, value, cuda::std::plus<uint32_t>{});
}

// Two counts a thread (first, second) packed as first | second << 32: each thread's exclusive
// prefix sums, and the block's totals in *total.
__device__ __forceinline__ uint64_t block_pair_prefix(SieveShared& sh, uint32_t first,
                                                      uint32_t second, uint64_t* total) {
  uint64_t prefix = 0;
  uint64_t all = 0;
  PairScan(sh.temp.scan).ExclusiveSum(uint64_t{first} | (uint64_t{second} << 32), prefix, all);
  if (threadIdx.x == 0) sh.pair_total = all;
  __syncthreads();
  *total = sh.pair_total;
  __syncthreads();
  return prefix;
}

__device__ __forceinline__ uint32_t low_half(uint64_t v) { return static_cast<uint32_t>(v); }
__device__ __forceinline__ uint32_t high_half(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// 2. The segment's cutoff over keys[0, slots): the cutoff key (1 when every valid key survives:
// all but NaN's key 0), whether ties at it are cut, the survivors and the valid keys.
struct Cut {
  uint32_t cutoff;
  bool partial_ties;
  uint32_t survivors;
  uint32_t valid;
};

__device__ Cut cut_segment(SieveShared& sh, const uint32_t* keys, int slots, uint32_t keep,
                           uint32_t capacity) {
  uint32_t prefix = 0;
  int top = 32;
  uint32_t rank = keep;
  uint32_t kept_above = 0;  // keys in bins above the digits found so far
  uint32_t valid = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int width = pass < 2 ? 11 : 10;
    const int shift = top - width;
    const uint32_t mask = (1u << width) - 1u;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) sh.histogram[i] = 0;
    __syncthreads();
    uint32_t counted = 0;
    for (int s = threadIdx.x; s < slots; s += kThreads) {
      const uint32_t key = keys[s];
      if (key != 0 && (top >= 32 || key >> top == prefix)) {
        atomicAdd(&sh.histogram[(key >> shift) & mask], 1u);
        ++counted;
      }
    }
    if (pass == 0) {
      valid = block_sum(sh, counted);
      if (valid <= capacity) return Cut{1, false, valid, valid};
    }
    __syncthreads();
    uint32_t above = 0;
    const uint32_t digit = DigitFinder<kThreads>::find(sh.finder, sh.histogram, rank, &above);
    const uint32_t in_bin = sh.histogram[digit];
    __syncthreads();
    prefix = (prefix << width) | digit;
    if (kept_above + above + in_bin <= capacity) {
      return Cut{prefix << shift, false, kept_above + above + in_bin, valid};
    }
    rank -= above;
    kept_above += above;
    top = shift;
  }
  // The keep-th key itself, with more ties than fit.
  return Cut{prefix, true, capacity, valid};
}

// The rank-th best (1-based) of the `count` entries of a pivot bin in sh.bin, by one warp: the
// pivot at the final precision (`greater` entries above the bin).
__device__ __forceinline__ void finish_small_bin(SieveShared& sh, uint32_t rank, uint32_t greater,
                                                 int final_bit) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t count = sh.bin_count;
  const uint64_t mine = lane < static_cast<int>(count) ? sh.bin[lane] >> final_bit : 0;
  uint32_t above = 0;
  uint32_t equal = 0;
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t other = sh.bin[j] >> final_bit;
    above += other > mine ? 1u : 0u;
    equal += other == mine ? 1u : 0u;
  }
  if (lane < static_cast<int>(count) && above < rank && rank <= above + equal) {
    sh.small_pivot = Pivot{mine, final_bit, greater + above};  // lanes that agree write the same
  }
}

// 4. The pivot of the `rank`-th best composite of a source: each(fn) calls fn on every composite
// (0 for one that does not count), every thread a share. The digits run over c - base, from bit
// `top` down (every c - base that counts is below 2^top); the pivot is in that offset space. A
// bin of at most kSmallBin entries is gathered and finished by one warp. False when the source
// holds at most `rank`.
template <typename Each>
__device__ bool find_pivot(SieveShared& sh, Each&& each, uint32_t rank, bool deterministic,
                           uint64_t base, int top, Pivot* pivot) {
  uint64_t prefix = 0;
  uint32_t greater = 0;
  const int final_bit = final_shift(deterministic);
  for (bool first = true;; first = false) {
    const int width = min(kRadixBits, top - final_bit);
    const int shift = top - width;
    const uint64_t mask = (uint64_t{1} << width) - 1;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) sh.histogram[i] = 0;
    __syncthreads();
    uint32_t seen = 0;
    each([&](uint64_t c) {
      const uint64_t v = c - base;
      if (c != 0 && matches_prefix(v, prefix, top)) {
        atomicAdd(&sh.histogram[static_cast<uint32_t>((v >> shift) & mask)], 1u);
        ++seen;
      }
    });
    if (first && block_sum(sh, seen) <= rank) return false;
    __syncthreads();
    uint32_t above = 0;
    const uint32_t digit = DigitFinder<kThreads>::find(sh.finder, sh.histogram, rank, &above);
    const uint32_t in_bin = sh.histogram[digit];
    __syncthreads();
    rank -= above;
    greater += above;
    prefix = (prefix << width) | digit;
    top = shift;
    if (in_bin == rank || shift == final_bit) break;
    if (in_bin <= kSmallBin) {
      if (threadIdx.x == 0) sh.bin_count = 0;
      __syncthreads();
      each([&](uint64_t c) {
        const uint64_t v = c - base;
        if (c != 0 && matches_prefix(v, prefix, top)) {
          sh.bin[cuda_common::warp_aggregated_slot(&sh.bin_count)] = v;
        }
      });
      __syncthreads();
      if (threadIdx.x < 32) finish_small_bin(sh, rank, greater, final_bit);
      __syncthreads();
      *pivot = sh.small_pivot;
      return true;
    }
  }
  *pivot = Pivot{prefix, top, greater};
  return true;
}

// Writes the source's entries that beat the pivot and the first ties still needed; each(fn) must
// visit every thread's entries in the same order on both calls.
template <typename Traits, typename Each>
__device__ void emit_selected(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each,
                              uint64_t base, const Pivot& pivot) {
  uint32_t above = 0;
  uint32_t ties = 0;
  each([&](uint64_t c) {
    if (c == 0) return;
    const int order = compare_to_pivot(c - base, pivot);
    above += order > 0 ? 1u : 0u;
    ties += order == 0 ? 1u : 0u;
  });
  uint64_t total = 0;
  const uint64_t prefix = block_pair_prefix(sh, above, ties, &total);
  uint32_t above_at = low_half(prefix);
  uint32_t tie_at = high_half(prefix);
  const uint32_t needed_ties = static_cast<uint32_t>(args.k) - pivot.count_greater;
  each([&](uint64_t c) {
    if (c == 0) return;
    const int order = compare_to_pivot(c - base, pivot);
    if (order > 0) {
      write_output<Traits>(args, row, static_cast<int32_t>(above_at++), c);
    } else if (order == 0) {
      if (tie_at < needed_ties) {
        write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie_at), c);
      }
      ++tie_at;
    }
  });
}

// Writes every entry of a source holding at most k, then the padding.
template <typename Traits, typename Each>
__device__ void emit_all(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each) {
  uint32_t mine = 0;
  each([&](uint64_t c) { mine += c != 0 ? 1u : 0u; });
  uint64_t total = 0;
  uint32_t at = low_half(block_pair_prefix(sh, mine, 0, &total));
  each([&](uint64_t c) {
    if (c != 0) write_output<Traits>(args, row, static_cast<int32_t>(at++), c);
  });
  for (uint32_t slot = low_half(total) + threadIdx.x; slot < static_cast<uint32_t>(args.k);
       slot += kThreads) {
    write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::kEmptyComposite);
  }
}

template <typename Traits, typename Each>
__device__ void select_from(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each,
                            uint64_t base, int top) {
  Pivot pivot{};
  if (find_pivot(sh, each, static_cast<uint32_t>(args.k), args.deterministic, base, top, &pivot)) {
    emit_selected<Traits>(sh, args, row, each, base, pivot);
  } else {
    emit_all<Traits>(sh, args, row, each);
  }
}

// May segment `info` have left behind an entry the pivot would select? Its lost entries are below
// its cutoff, or (partial ties) equal to it.
__device__ __forceinline__ bool may_miss(const SegmentInfo& info, uint64_t base,
                                         const Pivot& pivot, bool deterministic) {
  if (!(info.flags & kLeftBehind)) return false;
  const uint64_t bin_floor = base + (pivot.prefix << pivot.shift);
  const uint64_t cutoff = uint64_t{info.cutoff} << 32;
  if (!(info.flags & kPartialTies)) return cutoff > bin_floor;
  // Ties at a pivot resolved to the key are interchangeable when the order is not deterministic.
  if (!deterministic && pivot.shift == 32 && cutoff == bin_floor) return false;
  return (cutoff | 0xffffffffull) >= bin_floor;
}

__device__ __forceinline__ SegmentInfo load_info(const SegmentInfo* info) {
  const uint64_t raw = __ldcg(reinterpret_cast<const unsigned long long*>(info));
  return SegmentInfo{low_half(raw), high_half(raw)};
}

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    sieve_kernel(const SelectArgs args, int segments, uint32_t keep, uint32_t capacity,
                 uint32_t* arrivals, SegmentInfo* infos, uint64_t* survivors) {
  extern __shared__ uint4 shared_raw[];
  uint32_t* keys = reinterpret_cast<uint32_t*>(shared_raw);
  __shared__ SieveShared sh;
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  const RowLayout<Traits> layout(args, row);
  const SegmentGeometry<Traits> geometry(layout, segment, segments);
  constexpr int kPer = Traits::kPerVector;
  SegmentInfo* row_infos = infos + row * segments;
  uint64_t* row_survivors = survivors + row * segments * int64_t{capacity};

  // 1. Load.
  for (int base = 0; base < geometry.chunks * kChunkVectors; base += kThreads * kUnroll) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int local = base + u * kThreads + static_cast<int>(threadIdx.x);
      const int q = local / kChunkVectors;
      const int vector = (segment + q * segments) * kChunkVectors + local % kChunkVectors;
      raw[u] = q < geometry.chunks && vector < layout.num_vectors ? layout.load_vector(vector)
                                                                  : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int local = base + u * kThreads + static_cast<int>(threadIdx.x);
      const int q = local / kChunkVectors;
      if (q >= geometry.chunks) break;
      const int vector = (segment + q * segments) * kChunkVectors + local % kChunkVectors;
      const bool present = vector < layout.num_vectors;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        keys[local * kPer + e] =
            present ? Traits::key(element_bits<Traits>(raw[u], e), args.largest) : 0u;
      }
    }
  }
  for (int i = threadIdx.x; i < geometry.slots - geometry.vector_slots; i += kThreads) {
    keys[geometry.vector_slots + i] = layout.scalar_key(layout.scalar_index(i), args.largest);
  }
  __syncthreads();

  // 2. Cut.
  const Cut cut = cut_segment(sh, keys, geometry.slots, keep, capacity);

  // 3. Publish.
  const auto survives_above = [&](uint32_t key) {
    return key != 0 && (cut.partial_ties ? key > cut.cutoff : key >= cut.cutoff);
  };
  const auto is_tie = [&](uint32_t key) { return cut.partial_ties && key == cut.cutoff; };
  uint32_t mine_above = 0;
  uint32_t mine_ties = 0;
  for (int s = threadIdx.x; s < geometry.slots; s += kThreads) {
    mine_above += survives_above(keys[s]) ? 1u : 0u;
    mine_ties += is_tie(keys[s]) ? 1u : 0u;
  }
  uint64_t totals = 0;
  const uint64_t prefix = block_pair_prefix(sh, mine_above, mine_ties, &totals);
  uint64_t* list = row_survivors + int64_t{segment} * capacity;
  uint32_t above_at = low_half(prefix);
  uint32_t tie_at = low_half(totals) + high_half(prefix);
  for (int s = threadIdx.x; s < geometry.slots; s += kThreads) {
    const uint32_t key = keys[s];
    const bool tie = is_tie(key);
    if (survives_above(key) || (tie && tie_at < cut.survivors)) {
      list[tie ? tie_at : above_at] =
          keys::make_composite(key, geometry.element(layout, segment, segments, s));
    }
    above_at += survives_above(key) ? 1u : 0u;
    tie_at += tie ? 1u : 0u;
  }
  for (uint32_t j = cut.survivors + threadIdx.x; j < capacity; j += kThreads) {
    list[j] = keys::kEmptyComposite;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t flags = (cut.valid > cut.survivors ? kLeftBehind : 0u) |
                           (cut.partial_ties ? kPartialTies : 0u);
    row_infos[segment] = SegmentInfo{cut.cutoff, flags};
    sm90::wait_for_prerequisite_grids();  // the counters' reset
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device> arrived(arrivals[row]);
    sh.last = arrived.fetch_add(1u, cuda::memory_order_acq_rel) ==
              static_cast<uint32_t>(segments - 1);
  }
  __syncthreads();
  if (!sh.last) return;

  // 4. Select.
  SegmentInfo mine[2];
  uint32_t floor_key = 0;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int s = static_cast<int>(threadIdx.x) + j * kThreads;
    mine[j] = s < segments ? load_info(&row_infos[s]) : SegmentInfo{0, 0};
    if (mine[j].flags & kLeftBehind) floor_key = max(floor_key, mine[j].cutoff);
  }
  floor_key = block_reduce(sh, floor_key, cuda::maximum<uint32_t>{});
  // The survivors that count (at or above the floor), compacted into shared memory: per round of
  // loads, one shared atomic a warp.
  uint64_t* held = reinterpret_cast<uint64_t*>(shared_raw);
  const uint32_t slots = static_cast<uint32_t>(segments) * capacity;
  uint32_t low = ~0u;
  uint32_t high = 0;
  if (threadIdx.x == 0) sh.kept = 0;
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (uint32_t first = 0; first < slots; first += kThreads * kListUnroll) {
    uint64_t loaded[kListUnroll];
#pragma unroll
    for (int u = 0; u < kListUnroll; ++u) {
      const uint32_t i = first + u * kThreads + threadIdx.x;
      loaded[u] = i < slots ? __ldcg(&row_survivors[i]) : keys::kEmptyComposite;
    }
    unsigned ballots[kListUnroll];
    uint32_t warp_count = 0;
#pragma unroll
    for (int u = 0; u < kListUnroll; ++u) {
      const uint32_t key = keys::composite_key(loaded[u]);
      const bool counts = loaded[u] != keys::kEmptyComposite && key >= floor_key;
      ballots[u] = __ballot_sync(0xffffffffu, counts);
      warp_count += static_cast<uint32_t>(__popc(ballots[u]));
      if (counts) {
        low = min(low, key);
        high = max(high, key);
      }
    }
    uint32_t at = 0;
    if (lane == 0 && warp_count != 0) at = atomicAdd(&sh.kept, warp_count);
    at = __shfl_sync(0xffffffffu, at, 0);
#pragma unroll
    for (int u = 0; u < kListUnroll; ++u) {
      if (ballots[u] >> lane & 1u) {
        held[at + static_cast<uint32_t>(__popc(ballots[u] & ((1u << lane) - 1u)))] = loaded[u];
      }
      at += static_cast<uint32_t>(__popc(ballots[u]));
    }
  }
  const Bounds bounds = BoundsReduce(sh.temp.bounds).Reduce(Bounds{low, high}, BoundsOp{});
  if (threadIdx.x == 0) sh.bounds = bounds;
  __syncthreads();
  const uint32_t kept = sh.kept;
  const bool any = kept != 0;
  const uint32_t lowest = sh.bounds.low;
  const auto each_counted = [&](auto&& fn) {
    for (uint32_t i = threadIdx.x; i < kept; i += kThreads) fn(held[i]);
  };
  // Digits over c - (lowest << 32): the survivors that count span [lowest, high].
  const uint64_t base = any ? uint64_t{lowest} << 32 : 0;
  const int top = any ? 64 - __clz(static_cast<int>(sh.bounds.high - lowest)) : 64;
  Pivot pivot{};
  const bool more_than_k = find_pivot(sh, each_counted, static_cast<uint32_t>(args.k),
                                      args.deterministic, base, top, &pivot);
  bool miss = false;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    // Fewer than k counted are the whole row only when nothing was left behind.
    miss |= more_than_k ? may_miss(mine[j], base, pivot, args.deterministic)
                        : (mine[j].flags & kLeftBehind) != 0;
  }
  if (!__syncthreads_or(miss)) {
    if (more_than_k) {
      emit_selected<Traits>(sh, args, row, each_counted, base, pivot);
    } else {
      emit_all<Traits>(sh, args, row, each_counted);
    }
  } else {
    const auto each_in_row = [&](auto&& fn) {
      for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, 0, 1,
                                              [&](uint32_t key, uint32_t index) {
        fn(key != 0 ? keys::make_composite(key, index) : keys::kEmptyComposite);
      });
    };
    select_from<Traits>(sh, args, row, each_in_row, 0, 64);
  }
  if (threadIdx.x == 0) arrivals[row] = 0;
}

template <typename Traits>
const void* kernel_of() {
  return reinterpret_cast<const void*>(sieve_kernel<Traits>);
}

}  // namespace

SievePlan plan_sieve(const SelectProblem& problem, const cuda_common::DeviceShape& device) {
  SievePlan plan{};
  if (problem.batch == 0) {
    plan.segments = 1;  // nothing to launch
    return plan;
  }
  const int per_vector = problem.dtype == DType::kFloat32 ? 4 : 8;
  const int64_t chunk_elements = int64_t{kChunkVectors} * per_vector;
  const int64_t row_chunks =
      std::max<int64_t>(1, (problem.n / per_vector + kChunkVectors - 1) / kChunkVectors);
  // Segments: about two blocks per SM over the batch, within a segment's shared memory and of at
  // least kMinSegmentElements each, then fewer while the survivors would not fit one block.
  const int64_t by_memory =
      (row_chunks * chunk_elements + kMaxSegmentElements - 1) / kMaxSegmentElements;
  const int64_t by_length = std::max<int64_t>(1, row_chunks * chunk_elements / kMinSegmentElements);
  const int64_t by_device = (2 * int64_t{device.sm_count} + problem.batch - 1) / problem.batch;
  int64_t segments =
      std::min(row_chunks, std::clamp(by_device, by_memory, std::max(by_memory, by_length)));
  const auto capacity_of = [&](int64_t parts, int64_t* keep) {
    const int64_t share = (problem.k + parts - 1) / parts;
    *keep = share + 4 * static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(share)))) + 8;
    return (2 * *keep + 15) / 16 * 16;
  };
  int64_t keep = 0;
  int64_t capacity = capacity_of(segments, &keep);
  while (segments * capacity > kMaxSurvivors && segments > by_memory) {
    segments = std::max(by_memory, segments * 3 / 4);
    capacity = capacity_of(segments, &keep);
  }
  if (segments > kMaxSegments || segments * capacity > kMaxSurvivors) return plan;
  const int64_t key_slots =
      (row_chunks + segments - 1) / segments * chunk_elements + 2 * per_vector;
  plan.segments = static_cast<int>(segments);
  plan.keep = static_cast<int>(keep);
  plan.capacity = static_cast<int>(capacity);
  plan.shared_bytes = static_cast<int>(
      std::max<int64_t>(key_slots * int64_t{sizeof(uint32_t)},
                        segments * capacity * int64_t{sizeof(uint64_t)}));
  return plan;
}

SieveWorkspace carve_sieve(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem,
                           const SievePlan& plan) {
  SieveWorkspace ws{};
  const auto batch = static_cast<std::size_t>(problem.batch);
  const auto segments = static_cast<std::size_t>(plan.segments);
  ws.arrivals = carver.take<uint32_t>(batch);
  ws.infos = carver.take<unsigned char>(batch * segments * sizeof(SegmentInfo));
  ws.survivors = carver.take<uint64_t>(batch * segments * static_cast<std::size_t>(plan.capacity));
  return ws;
}

Status launch_sieve(const SelectProblem& problem, const SievePlan& plan, const SelectArgs& args,
                    const SieveWorkspace& ws, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  if (Status s = cuda_common::launch_counter_reset(ws.arrivals, problem.batch, stream); !s) {
    return s;
  }
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    const void* kernel = kernel_of<Traits>();
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, plan.shared_bytes); !s) {
      return s;
    }
    SelectArgs kernel_args = args;
    int segments = plan.segments;
    auto keep = static_cast<uint32_t>(plan.keep);
    auto capacity = static_cast<uint32_t>(plan.capacity);
    uint32_t* arrivals = ws.arrivals;
    auto* infos = static_cast<SegmentInfo*>(ws.infos);
    uint64_t* survivors = ws.survivors;
    void* launch_args[] = {&kernel_args, &segments, &keep, &capacity, &arrivals, &infos, &survivors};
    return cuda_common::launch_dependent(
        kernel, dim3(static_cast<unsigned>(problem.batch * plan.segments)), dim3(kThreads),
        static_cast<std::size_t>(plan.shared_bytes), /*dependent=*/true, stream, launch_args);
  });
}

}  // namespace litetopk::cuda_select
