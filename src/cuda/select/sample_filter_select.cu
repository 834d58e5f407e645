// Sample-Filter-Select on materialized rows: one streaming pass over the scores.
//
// Pipeline of sample_filter_kernel (one block per row segment; narrow blocks of 256 threads or,
// when every block is resident at once, wide ones of 512: BlockShape):
// 1. Estimate: the segment is cut into tiles (16 KB narrow, 32 KB wide) visited in a spread order
//    (0, 8, 16, ..., then 1, 9, ...), one tile per step (four 16-byte vectors per thread: 16 fp32
//    or 32 16-bit scores). The first tile's elements, in registers, go into 2048 equal-width
//    bins over their range; the lower edge of the bin holding their entry of rank
//    r = kEstimateMargin * k * tile / segment (at least kEstimateMinRank, unless that would expect
//    more than half the buffer to fill) becomes an estimated gate, which leaves about
//    kEstimateMargin * k candidates in the whole segment; that tile then passes it like the rest.
// 2. Filter: thread 0 keeps the shape's stages (3 or 2 tiles) in flight with the bulk copy engine
//    (cp.async.bulk into shared memory, completing on mbarriers). Each thread compares its
//    elements of a step, as floats at their own width, with the gate's value; only the few
//    candidates are keyed (the decode picks them out of the registers by position) and written
//    behind the buffer's count with one shared atomic per warp. Behind the estimated gate the
//    warps stream without block barriers: a stage is refilled once every warp holds its part of
//    the tile in registers, and a buffer that overflows sends the segment to a second pass.
//    Otherwise (no estimate: short segments, the second pass) each step ends in one barrier, and
//    a step that would overflow the buffer is appended in halves, compacting the buffer to its
//    best k first, which raises the gate; the blocks of one row share their compaction bounds
//    through global memory (atomicMax).
// 3. Select: one block per row ends with a range select over its buffer. With several blocks per
//    row (their tiles interleaved: segment s reads tiles s, s + segments, ...), each aims its
//    estimate at its share of the top k, publishes it (the row's highest), compacts its buffer
//    to its best k (publishing that bound) and appends the entries at or above the row's bound
//    to a candidate list; the last block to finish takes that list into its buffer (streaming it
//    through, when it is longer), checks that k of them lie at or above the row's highest
//    estimate (else it streams the whole row again with exact gates) and selects.
// Exact by construction: an entry is dropped only when k entries at least as good are held, or
// when it is below an estimated gate and the row ends with k entries at or above that gate and
// no overflow; any other segment (or split row) is streamed again with no estimate.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <type_traits>

#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/select/candidate_buffer.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kVectorsPerThread = 4;    // 16-byte vectors each thread offers per step (a tile)
constexpr int kSpread = 8;              // tile visiting stride (the sample)
constexpr int kListItemsPerThread = 4;  // composites per thread per step of the merge
constexpr uint32_t kEstimateMargin = 2; // estimated gate: about this many times k candidates
constexpr int64_t kEstimateMinRank = 32; // and this rank in the sample at least (its spread;
                                         // twice that for a split row's segments, whose
                                         // failed estimate costs the whole row),
                                         // unless that expects more than half the buffer
// Wide blocks do not split rows of up to kUnsplitRowBytes once the batch reaches a third of the
// SMs: the merge of split rows costs more than the longer stream (64 x 131072 fp32: 0.034 ms
// unsplit against 0.043 in two segments; 64 x 65536 bf16: 0.024 against 0.057).
constexpr int64_t kUnsplitRowBytes = int64_t{1} << 20;
constexpr int64_t kUnsplitBatchShare = 3;  // batch * this >= SMs

// The two block shapes. Narrow: 256 threads, three tiles in flight, two blocks per SM for
// k <= 2048, so that one block's estimate and select overlap the other's stream; for rows past
// one wave of the device. Wide: 512 threads, two tiles in flight, one block per SM; when every
// block of the call is resident at once, twice the warps hide a block's latencies (a row's
// stream, estimate and select each run about twice as fast).
template <int kThreads_, int kStages_>
struct BlockShape {
  static constexpr int kThreads = kThreads_;
  static constexpr int kStages = kStages_;
  static constexpr int kStageVectors = kThreads * kVectorsPerThread;  // 16-byte vectors per tile
  static constexpr int kHalfStep = kThreads * 16;  // 4-byte elements per step; 16-bit: twice that
  // Room for a step of 4-byte elements (half a step of 16-bit ones) after a compaction.
  using SmallBuffer = CandidateBuffer<kThreads, 2048 + kHalfStep, 2048>;
  using LargeBuffer = CandidateBuffer<kThreads, 8192 + kHalfStep, 8192>;
  static constexpr int blocks_per_sm(bool large_k) { return kThreads == 256 && !large_k ? 2 : 1; }
};
using NarrowShape = BlockShape<256, 3>;
using WideShape = BlockShape<512, 2>;

template <typename Shape, typename Buffer>
struct KernelStorage {
  typename Buffer::Storage buffer;
  alignas(128) uint4 stages[Shape::kStages][Shape::kStageVectors];
  uint64_t stage_full[Shape::kStages];   // the tile has landed
  uint64_t stage_empty[Shape::kStages];  // every warp holds its part of the tile in registers
};

static_assert(sizeof(KernelStorage<WideShape, WideShape::LargeBuffer>) <= 227 * 1024,
              "the largest configuration fits an SM's shared memory");

// What filter_segment did: the estimated gate (0: none) and whether the stream behind it
// overflowed the buffer (then the segment must be read again).
struct SegmentPass {
  uint64_t estimate;
  bool overflowed;
};

struct RowShared {
  uint64_t* bounds;
  uint64_t* cuts;      // [row] the highest estimated gate a segment of the row streamed behind
  uint32_t* counters;  // [row] list length, [batch + row] finished blocks
  uint64_t* lists;
  int64_t list_capacity;
  int segments;
  int64_t batch;
};

// Tiles [0, m) in spread order (0, kSpread, 2 kSpread, ..., then 1, kSpread + 1, ...); -1 after
// the last.
struct SpreadOrder {
  int tile;
  int lane;
  int spread;
  int m;

  __device__ __forceinline__ explicit SpreadOrder(int m_)
      : tile(m_ > 0 ? 0 : -1), lane(0), spread(min(kSpread, m_)), m(m_) {}
  __device__ __forceinline__ void advance() {
    tile += spread;
    if (tile >= m) {
      ++lane;
      tile = lane < spread ? lane : -1;
    }
  }
};

// One thread's elements of a step (16 of fp32, 32 of 16-bit scores: one 32-bit mask): kVectors
// 16-byte vectors, kThreads vectors apart in the tile. Bit b of the step's masks is, for fp32,
// element b % 4 of vector b / 4; for 16-bit scores, 32-bit word p = b % 16 (word p % 4 of vector
// p / 4) and its low (b < 16) or high half, so that one paired comparison of a word fills both of
// its bits.
template <typename Traits, int kThreads>
struct StepElements {
  static constexpr int kPer = Traits::kPerVector;
  static constexpr int kVectors = kVectorsPerThread;
  static constexpr int kCount = kVectors * kPer;
  static_assert(kVectors == 4 && kCount <= 32, "four vectors of fp32 or 16-bit scores");
  // Bits 0-15: four elements of each vector (all of fp32's, the low halves of 16-bit pairs).
  static constexpr uint32_t kLowBits = 0xffffu;
  uint4 raw[kVectors];
  uint32_t first_index;  // row position of element 0 of vector 0

  // The mask bits of vector j.
  static __device__ __forceinline__ constexpr uint32_t vector_bits(int j) {
    return kPer == 4 ? 0xfu << (4 * j) : (0xfu << (4 * j)) | (0xfu << (4 * j + 16));
  }
  // The vector and the element in it of bit b.
  static __device__ __forceinline__ int vector_of(int b) { return (b % 16) / 4; }
  static __device__ __forceinline__ int element_of(int b) {
    return kPer == 4 ? b % 4 : 2 * (b % 4) + b / 16;
  }

  // Bits of element b (a runtime position: picked out of the registers with selects).
  __device__ __forceinline__ uint32_t bits(int b) const {
    const int j = vector_of(b);
    const uint4 low = (j & 1) ? raw[1] : raw[0];
    const uint4 high = (j & 1) ? raw[3] : raw[2];
    const uint4 v = (j & 2) ? high : low;
    const int word = b % 4;
    const uint32_t even = (word & 2) ? v.z : v.x;
    const uint32_t odd = (word & 2) ? v.w : v.y;
    const uint32_t w = (word & 1) ? odd : even;
    if constexpr (kPer == 4) {
      return w;
    } else {
      return b < 16 ? (w & 0xffffu) : (w >> 16);
    }
  }
  __device__ __forceinline__ uint32_t index(int b) const {
    return first_index + static_cast<uint32_t>(vector_of(b) * (kThreads * kPer) + element_of(b));
  }
  __device__ __forceinline__ uint32_t key(int b, bool largest) const {
    return Traits::key(bits(b), largest);
  }
};

// 0xffffffff when a >= b (ordered: false with NaN), else 0.
__device__ __forceinline__ uint32_t set_ge(float a, float b) {
  uint32_t d;
  asm("set.ge.u32.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
  return d;
}

// Per 16-bit half of a and b: 0xffff when a >= b (a <= b with kLess), ordered (false with NaN).
template <typename Traits, bool kLess>
__device__ __forceinline__ uint32_t set_pair(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (std::is_same_v<Traits, BFloat16Scores>) {
    if constexpr (kLess) {
      asm("set.le.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    } else {
      asm("set.ge.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    }
  } else {
    if constexpr (kLess) {
      asm("set.le.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    } else {
      asm("set.ge.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    }
  }
  return d;
}

// The gate as a threshold on the scores' values: every element whose composite passes the gate
// has v >= T (largest-first; v <= T smallest-first), compared at the scores' own width (16-bit
// scores two at a time), so the comparison admits a superset of the passing elements: the extras
// are ties with T's value (-0 against +0, or deterministic ties at the gate's key with larger
// indices), ordinary candidates that the buffer may hold. NaN fails it. A gate below the worst
// value's key admits every non-NaN value; one above the best decodes to NaN and admits nothing.
template <typename Traits>
struct CandidateGate {
  uint64_t gate;
  bool largest;
  float threshold;      // fp32: oriented, T for largest-first, -T otherwise
  uint32_t pair_bits;   // 16-bit scores: T's bits in both halves

  __device__ __forceinline__ void set(uint64_t g, bool largest_first) {
    gate = g;
    largest = largest_first;
    const ValueGate<Traits> value_gate(g, largest_first);
    threshold = value_gate.threshold;
    const auto gate_key = static_cast<uint32_t>(g >> 32);
    const uint32_t worst_bits = largest_first ? Traits::kNegInfBits : Traits::kPosInfBits;
    const uint32_t t = gate_key <= Traits::key(worst_bits, largest_first)
                           ? worst_bits
                           : Traits::bits_of_key(gate_key, largest_first);
    pair_bits = t | (t << 16);
  }

  // Bit b of the result (StepElements' layout): element b is a candidate.
  template <typename Elements>
  __device__ __forceinline__ uint32_t candidates(const Elements& el) const {
    return largest ? oriented_candidates<false>(el) : oriented_candidates<true>(el);
  }

  template <bool kSmallest, typename Elements>
  __device__ __forceinline__ uint32_t oriented_candidates(const Elements& el) const {
    uint32_t mask = 0;
#pragma unroll
    for (int j = 0; j < Elements::kVectors; ++j) {
      const uint32_t words[4] = {el.raw[j].x, el.raw[j].y, el.raw[j].z, el.raw[j].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int p = 4 * j + w;
        if constexpr (Traits::kPerVector == 4) {
          const float v = __uint_as_float(words[w]);
          mask |= set_ge(kSmallest ? -v : v, threshold) & (1u << p);
        } else {
          mask |= set_pair<Traits, kSmallest>(words[w], pair_bits) & ((1u << p) | (1u << (p + 16)));
        }
      }
    }
    return mask;
  }
};

// The elements among `candidates` (bit mask) whose composite passes `gate`.
template <typename Buffer, typename Elements>
__device__ __forceinline__ uint32_t exact_passes(const Elements& el, uint32_t candidates,
                                                 uint64_t gate, bool largest) {
  uint32_t result = 0;
  for (uint32_t c = candidates; c != 0; c &= c - 1) {
    const int b = __ffs(c) - 1;
    if (Buffer::passes(el.key(b, largest), el.index(b), gate)) result |= 1u << b;
  }
  return result;
}

template <typename Elements>
__device__ __forceinline__ void write_elements(uint64_t* entries, const Elements& el,
                                               uint32_t pass, uint32_t at, bool largest) {
  for (; pass != 0; pass &= pass - 1) {
    const int b = __ffs(pass) - 1;
    entries[at++] = keys::make_composite(el.key(b, largest), el.index(b));
  }
}

// Appends the elements among `mask` that pass the gate exactly, at most kHalfStep of them, after
// the last step (s.count current): compacts first when they do not fit, which raises the gate.
// Returns the bound of that compaction, or 0. All threads call it.
template <typename Buffer, typename Elements>
__device__ __forceinline__ uint64_t append_exact(Buffer& buffer, const Elements& el,
                                                 uint32_t mask, bool largest, uint64_t& gate) {
  auto& s = buffer.s;
  uint64_t bound = 0;
  uint32_t pass = exact_passes<Buffer>(el, mask, gate, largest);
  for (;;) {
    if (threadIdx.x == 0) s.hole_counter = 0;
    __syncthreads();
    uint32_t before = 0;
    const uint32_t warp_base = Buffer::reserve(pass, &s.hole_counter, &before);
    __syncthreads();
    const uint32_t count = s.count;
    const uint32_t total = s.hole_counter;
    if (count + total <= Buffer::kCapacity) {
      write_elements(s.entries, el, pass, count + warp_base + before, largest);
      __syncthreads();
      if (threadIdx.x == 0) s.count = count + total;
      __syncthreads();
      return bound;
    }
    // count > kCapacity - kHalfStep >= k: the compaction keeps k, and the rest then fits.
    bound = Buffer::shared_bound(buffer.compact());
    gate = max_u64(gate, s.gate);
    pass = exact_passes<Buffer>(el, pass, gate, largest);
  }
}

// The streaming phase's append: slots from `at` on, as far as the buffer reaches (the count goes
// on, so that an overflow is seen at the end).
template <typename Elements>
__device__ __forceinline__ void write_bounded(uint64_t* entries, uint32_t capacity,
                                              const Elements& el, uint32_t pass, uint32_t at,
                                              bool largest) {
  for (; pass != 0; pass &= pass - 1, ++at) {
    const int b = __ffs(pass) - 1;
    if (at < capacity) entries[at] = keys::make_composite(el.key(b, largest), el.index(b));
  }
}

// CandidateBuffer::offer_step for one step of tile elements (`pass`: the CandidateGate's
// candidates). The same step protocol (triple-buffered counters, one barrier), with the elements
// decoded by position. A step that would overflow the buffer is appended exactly instead, in
// halves of at most kHalfStep elements (append_exact compacts as needed).
template <typename Buffer, typename Elements, typename AfterBarrier>
__device__ __forceinline__ uint64_t offer_elements(Buffer& buffer, uint32_t step,
                                                   const Elements& el, uint32_t pass,
                                                   bool largest, uint64_t& gate,
                                                   AfterBarrier&& after_barrier) {
  constexpr int kHalfBits = Elements::kCount > 16 ? Elements::kCount / 2 : Elements::kCount;
  constexpr uint32_t kLowHalf = kHalfBits >= 32 ? ~0u : (1u << kHalfBits) - 1;
  auto& s = buffer.s;
  const uint32_t slot = step % 3;
  uint32_t before = 0;
  const uint32_t warp_base = Buffer::reserve(pass, &s.step_pending[slot], &before);
  __syncthreads();
  if (threadIdx.x == 0) after_barrier();
  const uint32_t base = s.step_count[slot];
  const uint32_t total = s.step_pending[slot];
  uint64_t bound = 0;
  if (base + total > Buffer::kCapacity) {
    if (threadIdx.x == 0) s.count = base;
    __syncthreads();
    bound = max_u64(bound, append_exact(buffer, el, pass & kLowHalf, largest, gate));
    if (Elements::kCount > kHalfBits) {
      bound = max_u64(bound, append_exact(buffer, el, pass & ~kLowHalf, largest, gate));
    }
    if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = s.count;
  } else if (__all_sync(0xffffffffu, pass == Elements::kLowBits)) {
    // Bits 0-15 of every lane in this warp (a whole fp32 step, as when a short segment fills
    // the buffer): element b of lane l goes to slot 32 b + l of the warp's range (positions
    // known at compile time, conflict-free stores).
    const uint32_t lane = threadIdx.x % 32;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      s.entries[base + warp_base + 32 * b + lane] =
          keys::make_composite(el.key(b, largest), el.index(b));
    }
    if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = base + total;
  } else {
    write_elements(s.entries, el, pass, base + warp_base + before, largest);
    if (threadIdx.x == 0) s.step_count[(slot + 1) % 3] = base + total;
  }
  if (threadIdx.x == 0) s.step_pending[(slot + 2) % 3] = 0;
  return bound;
}

template <typename Storage>
__device__ __forceinline__ Storage& kernel_storage() {
  extern __shared__ __align__(128) unsigned char shared_raw[];
  return *reinterpret_cast<Storage*>(shared_raw);
}

// The row's shared bound folded into the thread's gate (several blocks per row).
__device__ __forceinline__ void adopt_row_bound(const RowShared& shared, int64_t row,
                                                uint64_t& gate) {
  if (shared.segments > 1) {
    uint64_t bound = 0;
    if (threadIdx.x % 32 == 0) bound = *reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]);
    gate = max_u64(gate, __shfl_sync(0xffffffffu, bound, 0));
  }
}

// After a compaction, its bound published to the row's other blocks.
__device__ __forceinline__ void publish_bound(const RowShared& shared, int64_t row,
                                              uint64_t bound) {
  if (bound != 0 && threadIdx.x == 0 && shared.segments > 1) {
    atomicMax(reinterpret_cast<unsigned long long*>(&shared.bounds[row]),
              static_cast<unsigned long long>(bound));
  }
}

// One offer_step of decoded pairs (the merge, the row's head and tail) with the row's bound.
template <typename Buffer, typename Items, typename AfterBarrier>
__device__ __forceinline__ void offer_shared(Buffer& buffer, const RowShared& shared, int64_t row,
                                             uint32_t step, const Items& items, uint64_t& gate,
                                             AfterBarrier&& after_barrier) {
  adopt_row_bound(shared, row, gate);
  publish_bound(shared, row, buffer.offer_step(step, items, gate, after_barrier));
}

// Step 1's estimate, from the first tile's elements (`valid`: those in the segment) in registers:
// 2048 equal-width bins over the [min, max] of their finite values (oriented: negated for
// smallest-first), and the lower edge of the bin that holds the entry of rank
// r = kEstimateMargin * k * seen / length (at least kEstimateMinRank, unless that would expect
// more than half the buffer to fill), so that about kEstimateMargin * k entries of the segment's
// `length` reach it. Returns the gate at that value, or 0 for none (r not below k and the tile's
// non-NaN count, or no spread of finite values). All threads call it and get the result. Only a
// guess: the kernel keeps it only if k entries reach it and the buffer did not overflow.
template <typename Traits, typename Buffer, typename Elements>
__device__ uint64_t estimate_gate(Buffer& buffer, const Elements& el, uint32_t valid,
                                  int64_t seen, int64_t length, uint32_t share, bool largest) {
  auto& s = buffer.s;
  // About kEstimateMargin * share candidates, but no more than halfway from k to the buffer's
  // capacity (at k = 8192 twice k would not fit).
  const int64_t aim = min(int64_t{kEstimateMargin} * share,
                          (int64_t{buffer.k} + Buffer::kCapacity) / 2);
  const int64_t wanted = (aim * seen + length - 1) / length;
  const int64_t half_buffer = int64_t{Buffer::kCapacity} / 2 * seen / length;
  const int64_t floor_rank = share < buffer.k ? 2 * kEstimateMinRank : kEstimateMinRank;
  const int64_t least = half_buffer < floor_rank ? half_buffer : floor_rank;
  const int64_t rank = wanted > least ? wanted : least;
  if (rank < 1 || rank >= buffer.k) return 0;

  // Oriented values; the range of the finite ones as ordered keys (NaN is left out).
  float value[Elements::kCount];
  uint32_t lo = ~0u;
  uint32_t hi = 0;
  uint32_t numbers = 0;
#pragma unroll
  for (int b = 0; b < Elements::kCount; ++b) {
    const float v = Traits::to_float(el.bits(b));
    value[b] = largest ? v : -v;
    if (((valid >> b) & 1u) && isfinite(value[b])) {
      const uint32_t key = keys::key_from_f32_bits(__float_as_uint(value[b]), true);
      lo = min(lo, key);
      hi = max(hi, key);
    }
    if (((valid >> b) & 1u) && !isnan(value[b])) ++numbers;
  }
  if (threadIdx.x == 0) {
    s.range_min = ~uint64_t{0};
    s.range_max = 0;
    s.hole_counter = 0;
  }
  for (int i = static_cast<int>(threadIdx.x); i < kRadixBins; i += Buffer::kThreads) {
    s.histogram[i] = 0;
  }
  __syncthreads();
  lo = __reduce_min_sync(0xffffffffu, lo);
  hi = __reduce_max_sync(0xffffffffu, hi);
  numbers = __reduce_add_sync(0xffffffffu, numbers);
  if (threadIdx.x % 32 == 0) {
    atomicMin(reinterpret_cast<unsigned long long*>(&s.range_min), lo);
    atomicMax(reinterpret_cast<unsigned long long*>(&s.range_max), hi);
    atomicAdd(&s.hole_counter, numbers);
  }
  __syncthreads();
  auto value_of = [](uint64_t key) {
    return __uint_as_float(keys::f32_bits_from_key(static_cast<uint32_t>(key), true));
  };
  const float low = value_of(s.range_min);
  const float high = value_of(s.range_max);
  const float scale = static_cast<float>(kRadixBins) / (high - low);
  const bool spread = s.range_min < s.range_max && isfinite(scale) && scale > 0.0f;
  if (!spread || rank >= static_cast<int64_t>(s.hole_counter)) return 0;  // the same in all threads
#pragma unroll
  for (int b = 0; b < Elements::kCount; ++b) {
    if (((valid >> b) & 1u) && !isnan(value[b])) {
      // inf lands in the top bin, -inf in the bottom one.
      const float at = fminf(fmaxf((value[b] - low) * scale, 0.0f), kRadixBins - 1.0f);
      atomicAdd(&s.histogram[static_cast<int>(at)], 1u);
    }
  }
  __syncthreads();
  uint32_t above = 0;
  const uint32_t bin =
      Buffer::Finder::find(s.finder, s.histogram, static_cast<uint32_t>(rank), &above);
  const float edge = low + static_cast<float>(bin) / scale;
  const uint32_t key = Traits::key(Traits::bits_of_float(largest ? edge : -edge), largest);
  return max_u64(uint64_t{key} << 32, keys::kAdmitAllValid);
}

// Streams this block's share of the row through the buffer (steps 1 and 2), with an estimate from
// its first tile when `estimate`. Behind an estimated gate the warps stream without block barriers:
// each appends its candidates with one shared atomic per tile, and a stage is refilled once every
// warp has taken its part of the tile into registers (stage_empty); the buffer is not compacted
// then, so a stream that overflows it is reported (the segment is read again). `sequence` counts
// the tiles this block has consumed (the stage barriers' phases).
template <typename Shape, typename Traits, typename Buffer>
__device__ SegmentPass filter_segment(KernelStorage<Shape, Buffer>& st, Buffer& buffer,
                                      const SelectArgs& args, const RowShared& shared,
                                      int64_t row, int segment, bool estimate,
                                      uint32_t& sequence) {
  using Elements = StepElements<Traits, Shape::kThreads>;
  constexpr int kPer = Traits::kPerVector;
  constexpr int kThreads = Shape::kThreads;
  constexpr int kStages = Shape::kStages;
  constexpr int kStageVectors = Shape::kStageVectors;
  const RowLayout<Traits> layout(args, row);
  const uint4* body = reinterpret_cast<const uint4*>(layout.base + layout.head);

  // The segment's tiles interleave with the other segments' (tile segment + t * segments), so
  // that a run of high scores spreads over them, and each segment starts its visit at a
  // different part of the row (local tile `rotate`), so that the estimates do not all come from
  // the row's first tiles.
  const int segments = shared.segments;
  const int num_tiles = (layout.num_vectors + kStageVectors - 1) / kStageVectors;
  const int m = segment < num_tiles ? (num_tiles - segment + segments - 1) / segments : 0;
  const int last_tile = num_tiles - 1;
  // One tile past an even spread, so that no segment starts at the row's first tile, nor at its
  // last unless a segment's two tiles are both ends (attention sinks and recent windows make
  // those the least typical).
  int rotate = m > 0 ? static_cast<int>((int64_t{segment} * m / segments + 1) % m) : 0;
  if (m > 1 && segment + rotate * segments == last_tile) rotate = m - 2;
  auto global_tile = [&](int local) {  // local < m and rotate < m: one wrap at most
    const int t = local + rotate;
    return segment + (t >= m ? t - m : t) * segments;
  };
  const int64_t segment_vectors =
      int64_t{m} * kStageVectors -
      (m > 0 && last_tile % segments == segment
           ? int64_t{num_tiles} * kStageVectors - layout.num_vectors
           : 0);
  estimate = estimate && segment_vectors * kPer > Buffer::kCapacity;
  // A split row's segment aims its estimate at its share of the top k (in proportion to the
  // scores it holds: a ranged row may fill only some segments); the last block checks that the
  // row's k best all lie at or above every segment's estimate.
  const uint32_t share =
      layout.num_vectors > 0
          ? static_cast<uint32_t>((int64_t{buffer.k} * segment_vectors + layout.num_vectors - 1) /
                                  layout.num_vectors)
          : static_cast<uint32_t>(buffer.k);

  // Thread 0 issues tiles in visiting order, kStages ahead of the consumers.
  SpreadOrder issue_order(m);
  uint32_t issued = sequence;
  auto issue_next = [&]() {
    if (issue_order.tile < 0) return;
    const int stage = static_cast<int>(issued % kStages);
    const int v0 = global_tile(issue_order.tile) * kStageVectors;
    const auto bytes = static_cast<uint32_t>(min(kStageVectors, layout.num_vectors - v0) * 16);
    sm90::mbarrier_arrive_expect_bytes(&st.stage_full[stage], bytes);
    sm90::bulk_copy_global_to_shared(st.stages[stage], body + v0, bytes, &st.stage_full[stage]);
    issue_order.advance();
    ++issued;
  };
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) issue_next();
  }

  uint64_t gate = buffer.s.gate;
  CandidateGate<Traits> candidate_gate;
  candidate_gate.set(gate, args.largest);
  uint32_t step = 0;
  uint64_t estimated = 0;
  bool streaming = false;  // behind the estimated gate: no block barriers
  for (SpreadOrder order(m); order.tile >= 0; order.advance(), ++sequence) {
    const int stage = static_cast<int>(sequence % kStages);
    const uint32_t phase = (sequence / kStages) & 1u;
    sm90::mbarrier_wait(&st.stage_full[stage], phase);
    const int tile_vector = global_tile(order.tile) * kStageVectors;
    const int tile_vectors = min(kStageVectors, layout.num_vectors - tile_vector);
    // A float comparison per element marks the few candidates; only those become keys.
    adopt_row_bound(shared, row, gate);
    if (gate != candidate_gate.gate) candidate_gate.set(gate, args.largest);
    Elements el;
    const int thread_vector = static_cast<int>(threadIdx.x);
    el.first_index = static_cast<uint32_t>(layout.head + (tile_vector + thread_vector) * kPer);
#pragma unroll
    for (int j = 0; j < Elements::kVectors; ++j) {
      el.raw[j] = st.stages[stage][thread_vector + j * kThreads];
    }
    __syncwarp();
    if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(&st.stage_empty[stage]);
    uint32_t valid = ~0u;
    if (tile_vectors < kStageVectors) {  // the segment's last, partial tile
#pragma unroll
      for (int j = 0; j < Elements::kVectors; ++j) {
        if (thread_vector + j * kThreads >= tile_vectors) valid &= ~Elements::vector_bits(j);
      }
    }
    if (estimate) {  // the first tile sets the estimated gate; it and the rest stream behind it
      estimate = false;
      estimated = estimate_gate<Traits>(buffer, el, valid, int64_t{tile_vectors} * kPer,
                                        segment_vectors * kPer, share, args.largest);
      if (estimated != 0) {
        gate = max_u64(gate, estimated);
        candidate_gate.set(gate, args.largest);
        streaming = true;
      }
    }
    if (streaming && threadIdx.x == 0) {
      sm90::mbarrier_wait(&st.stage_empty[stage], phase);
      issue_next();
    }
    const uint32_t pass = candidate_gate.candidates(el) & valid;
    if (streaming) {
      uint32_t before = 0;
      const uint32_t at = Buffer::reserve(pass, &buffer.s.count, &before) + before;
      write_bounded(buffer.s.entries, Buffer::kCapacity, el, pass, at, args.largest);
      continue;
    }
    // After the step's barrier every thread is done with this stage.
    publish_bound(shared, row,
                  offer_elements(buffer, step++, el, pass, args.largest, gate, issue_next));
  }
  if (streaming) {
    __syncthreads();
    const bool overflowed = buffer.s.count > static_cast<uint32_t>(Buffer::kCapacity);
    __syncthreads();  // every thread has the count before the second pass's reset clears it
    if (overflowed) return {estimated, true};
    buffer.resume_steps();
  }

  // The unaligned head and the tail, one element per thread, by the row's last block.
  if (segment == shared.segments - 1) {
    const int e = static_cast<int>(threadIdx.x);
    ArrayItems<1> items;
    if (e < layout.num_scalar()) {
      const int32_t element = layout.scalar_index(e);
      items.key[0] = layout.scalar_key(element, args.largest);
      items.index[0] = static_cast<uint32_t>(element);
      items.tie = 1;
    }
    offer_shared(buffer, shared, row, step++, items, gate, [] {});
  }
  buffer.finish_steps(step);
  return {estimated, false};
}

// Several blocks per row: append survivors to the row's list; the last block merges (step 3).
// Returns true in the block that must emit the row.
template <typename Buffer>
__device__ bool gather_row(Buffer& buffer, const RowShared& shared, int64_t row) {
  __shared__ uint64_t bound;
  __shared__ bool last;
  // The block's best k only (its k-th is a bound for the whole row): a short merge list.
  if (buffer.s.count > buffer.k) {
    publish_bound(shared, row, Buffer::shared_bound(buffer.compact()));
  }
  if (threadIdx.x == 0) {
    bound = max_u64(*reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]),
                    keys::kAdmitAllValid);
  }
  __syncthreads();
  uint64_t* list = shared.lists + row * shared.list_capacity;
  uint32_t* list_length = &shared.counters[row];
  const uint32_t count = buffer.s.count;
  constexpr int kThreads = Buffer::kThreads;
  for (uint32_t base = 0; base < count; base += kThreads) {
    const uint32_t e = base + threadIdx.x;
    const uint64_t c = e < count ? buffer.s.entries[e] : keys::kEmptyComposite;
    const bool keep = e < count && c >= bound;
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (ballot == 0) continue;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int leader = __ffs(ballot) - 1;
    uint32_t at = 0;
    if (lane == leader) at = atomicAdd(list_length, static_cast<uint32_t>(__popc(ballot)));
    at = __shfl_sync(0xffffffffu, at, leader);
    if (keep) list[at + __popc(ballot & ((1u << lane) - 1))] = c;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(&shared.counters[shared.batch + row], 1u) ==
           static_cast<uint32_t>(shared.segments - 1);
  }
  __syncthreads();
  if (!last) return false;
  __threadfence();

  // Merge: every other block of the row has published. A list that fits is the buffer; a longer
  // one streams through it.
  if (threadIdx.x == 0) {
    buffer.reset(*reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]));
  }
  __syncthreads();
  uint64_t gate = buffer.s.gate;
  const uint32_t length = *reinterpret_cast<volatile uint32_t*>(list_length);
  if (length <= static_cast<uint32_t>(Buffer::kCapacity)) {
    for (uint32_t e = threadIdx.x; e < length; e += kThreads) {
      buffer.s.entries[e] = __ldcg(reinterpret_cast<const unsigned long long*>(list + e));
    }
    if (threadIdx.x == 0) buffer.s.count = length;
    __syncthreads();
    return true;
  }
  constexpr uint32_t kStep = kThreads * kListItemsPerThread;
  uint32_t step = 0;
  for (uint32_t base = 0; base < length; base += kStep, ++step) {
    ArrayItems<kListItemsPerThread> items;
#pragma unroll
    for (int i = 0; i < kListItemsPerThread; ++i) {
      const uint32_t e = base + i * kThreads + threadIdx.x;
      const uint64_t c = e < length ? __ldcg(reinterpret_cast<const unsigned long long*>(list + e))
                                    : keys::kEmptyComposite;
      items.key[i] = keys::composite_key(c);
      items.index[i] = ~static_cast<uint32_t>(c);
      if (e < length) items.tie |= 1u << i;
    }
    offer_shared(buffer, shared, row, step, items, gate, [] {});
  }
  buffer.finish_steps(step);
  return true;
}

template <typename Shape, typename Traits, typename Buffer>
__global__ void __launch_bounds__(Shape::kThreads, Shape::blocks_per_sm(Buffer::kMaxK > 2048))
    sample_filter_kernel(const SelectArgs args, const RowShared shared) {
  auto& st = kernel_storage<KernelStorage<Shape, Buffer>>();
  Buffer buffer(st.buffer, static_cast<uint32_t>(args.k), args.deterministic);
  const int64_t row = blockIdx.x / shared.segments;
  const int segment = static_cast<int>(blockIdx.x % shared.segments);
  if (threadIdx.x == 0) {
    buffer.reset(keys::kAdmitAllValid);
    for (int stage = 0; stage < Shape::kStages; ++stage) {
      sm90::mbarrier_init(&st.stage_full[stage], 1);
      sm90::mbarrier_init(&st.stage_empty[stage], Shape::kThreads / 32);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();
  uint32_t sequence = 0;
  const SegmentPass pass =
      filter_segment<Shape, Traits>(st, buffer, args, shared, row, segment, true, sequence);
  // The float test also admits a few entries below the gate (ties with its value): only those at
  // or above the estimate count. A whole row checks its estimate here; a split row's segments
  // publish theirs, which the row's last block checks.
  const bool whole = shared.segments == 1;
  if (pass.overflowed ||
      (whole && pass.estimate != 0 && buffer.count_at_or_above(pass.estimate) < buffer.k)) {
    // The estimate was too high for this segment: stream it again with the exact gates only.
    if (threadIdx.x == 0) buffer.reset(keys::kAdmitAllValid);
    __syncthreads();
    filter_segment<Shape, Traits>(st, buffer, args, shared, row, segment, false, sequence);
  } else if (!whole && pass.estimate != 0 && threadIdx.x == 0) {
    atomicMax(reinterpret_cast<unsigned long long*>(&shared.cuts[row]),
              static_cast<unsigned long long>(pass.estimate));
  }
  if (!whole) {
    if (!gather_row(buffer, shared, row)) return;
    // Entries a segment dropped lie below its estimate: harmless when the row's k best (of the
    // survivors) all lie at or above the highest estimate; otherwise the row again, exactly.
    __shared__ uint64_t row_cut;
    if (threadIdx.x == 0) row_cut = *reinterpret_cast<volatile uint64_t*>(&shared.cuts[row]);
    __syncthreads();
    const uint64_t cut = row_cut;
    if (cut != 0 && buffer.count_at_or_above(cut) < buffer.k) {
      RowShared one = shared;
      one.segments = 1;
      if (threadIdx.x == 0) buffer.reset(keys::kAdmitAllValid);
      __syncthreads();
      filter_segment<Shape, Traits>(st, buffer, args, one, row, 0, false, sequence);
    }
  }
  buffer.template emit<Traits>(args, row);
}

template <typename Shape, typename Buffer>
Status launch_config(const SelectProblem& problem, const SampleFilterPlan& plan,
                     const SelectArgs& args, const RowShared& shared, cudaStream_t stream) {
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    auto kernel = sample_filter_kernel<Shape, Traits, Buffer>;
    const int smem = static_cast<int>(sizeof(KernelStorage<Shape, Buffer>));
    if (Status s =
            cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
        !s) {
      return s;
    }
    const int64_t blocks = problem.batch * plan.segments;
    kernel<<<static_cast<unsigned>(blocks), Shape::kThreads, smem, stream>>>(args, shared);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace

SampleFilterPlan plan_sample_filter(const SelectProblem& problem, const cuda_common::DeviceShape& device) {
  SampleFilterPlan plan{};
  plan.large_k = problem.k > NarrowShape::SmallBuffer::kMaxK;
  // Wide blocks while every row has an SM of its own (then each gets one block or more).
  const bool wide = problem.batch <= device.sm_count;
  plan.threads = wide ? WideShape::kThreads : NarrowShape::kThreads;
  plan.blocks_per_sm = wide ? 1 : NarrowShape::blocks_per_sm(plan.large_k);
  // Enough blocks to fill the GPU once, but at least two tiles per block.
  const int64_t slots = int64_t{device.sm_count} * plan.blocks_per_sm;
  const int64_t tile_elements =
      int64_t{wide ? WideShape::kStageVectors : NarrowShape::kStageVectors} * 4;
  const int64_t max_segments = std::max<int64_t>(1, problem.n / (2 * tile_elements));
  const int64_t wanted = problem.batch >= slots ? 1 : slots / std::max<int64_t>(problem.batch, 1);
  plan.segments = static_cast<int>(std::clamp<int64_t>(wanted, 1, max_segments));
  const int64_t row_bytes = problem.n * static_cast<int64_t>(dtype_size(problem.dtype));
  if (wide && problem.batch * kUnsplitBatchShare >= device.sm_count &&
      row_bytes <= kUnsplitRowBytes) {
    plan.segments = 1;
  }
  return plan;
}

SampleFilterWorkspace carve_sample_filter(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem,
                                          const SampleFilterPlan& plan) {
  SampleFilterWorkspace ws{};
  // The cuts and counters right after the bounds: launch_sample_filter clears all three with one
  // memset.
  ws.row_bounds = carver.take<uint64_t>(problem.batch);
  ws.row_cuts = carver.take<uint64_t>(problem.batch);
  ws.row_counters = carver.take<uint32_t>(2 * problem.batch);
  if (plan.segments > 1) {  // only wide blocks split rows (narrow ones run past one wave)
    const int64_t capacity = plan.large_k ? WideShape::LargeBuffer::kCapacity
                                          : WideShape::SmallBuffer::kCapacity;
    ws.list_capacity = capacity * plan.segments;
    ws.candidate_lists = carver.take<uint64_t>(problem.batch * ws.list_capacity);
  }
  return ws;
}

Status launch_sample_filter(const SelectProblem& problem, const SampleFilterPlan& plan,
                            const SelectArgs& args, const SampleFilterWorkspace& ws,
                            cudaStream_t stream) {
  // The row state of split rows must start from zero on every call (bounds 0 = none yet): one
  // memset from the bounds to the end of the counters, carved right after them. A block per row
  // does not use it.
  if (plan.segments > 1) {
    const auto* first = reinterpret_cast<const char*>(ws.row_bounds);
    const auto* last = reinterpret_cast<const char*>(ws.row_counters + 2 * problem.batch);
    LITETOPK_CUDA_TRY(
        cudaMemsetAsync(ws.row_bounds, 0, static_cast<std::size_t>(last - first), stream));
  }
  const RowShared shared{ws.row_bounds, ws.row_cuts, ws.row_counters, ws.candidate_lists,
                         ws.list_capacity, plan.segments, problem.batch};
  auto launch = [&](auto shape) -> Status {
    using Shape = decltype(shape);
    if (plan.large_k) {
      return launch_config<Shape, typename Shape::LargeBuffer>(problem, plan, args, shared, stream);
    }
    return launch_config<Shape, typename Shape::SmallBuffer>(problem, plan, args, shared, stream);
  };
  if (plan.threads == WideShape::kThreads) return launch(WideShape{});
  return launch(NarrowShape{});
}

}  // namespace litetopk::cuda_select
