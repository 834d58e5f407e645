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
// 3. Publish: the survivors as composites at a range of the row's list reserved with one atomic,
//    the cutoff and whether anything was left behind; then one atomic on the row's arrival
//    counter. Every block but the row's last returns.
// 4. Select, in the last block: the row's survivors into shared memory, the pivot of the k-th
//    best (digits of 11, 11, 10 bits over the composites, radix_digits.cuh). Each segment left behind only entries below its
//    cutoff (or ties at it); when every such cutoff lies below the pivot's bin (ties at a
//    key-precision pivot are interchangeable unless deterministic), the survivors hold the row's
//    top k, and the entries above the pivot and the ties still needed are written. Otherwise the
//    block selects over the whole row itself. It resets the row's counters for the next launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/warp_scan.cuh"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

using cuda_common::warp_aggregated_slot;

constexpr int kThreads = 512;
constexpr int kChunkVectors = 8;                             // 16-byte vectors per chunk
constexpr int64_t kMaxSegmentElements = 8192;                // keys a segment holds on chip
constexpr int64_t kMinSegmentElements = 1024;                // shorter segments cost more than they spread
constexpr int kMaxSegments = 1024;
constexpr int64_t kMaxSurvivors = 12288;                     // per row (segments * capacity)
constexpr int kUnroll = 4;

constexpr uint32_t kLeftBehind = 1;   // the segment had valid entries that did not survive
constexpr uint32_t kPartialTies = 2;  // some of its ties at the (full-precision) cutoff did not

struct SegmentInfo {
  uint32_t cutoff;  // every key above it survived (and every key equal, unless kPartialTies)
  uint32_t flags;
};

// A row's counters (zeroed before the launch; the last block zeroes them again).
struct RowCounters {
  uint32_t arrivals;   // blocks done
  uint32_t survivors;  // the row's list's length
};

template <typename Traits>
struct SegmentGeometry {
  static constexpr int kPer = Traits::kPerVector;
  static constexpr int kChunkElements = kChunkVectors * kPer;
  int chunks;      // this segment's chunks of the row
  int vector_slots;  // key slots of those chunks
  int slots;       // plus the scalar elements (last segment only)

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

struct SieveShared {
  uint32_t histogram[kRadixBins];
  typename DigitFinder<kThreads>::Storage finder;
  typename cub::BlockReduce<uint32_t, kThreads>::TempStorage reduce;
  uint32_t sum;
  uint32_t survivors;
  uint32_t base;
  uint32_t ties;
  uint32_t above;
  bool last;
  bool exact;
};

__device__ __forceinline__ uint32_t block_sum(SieveShared& sh, uint32_t value) {
  const uint32_t sum = cub::BlockReduce<uint32_t, kThreads>(sh.reduce).Sum(value);
  if (threadIdx.x == 0) sh.sum = sum;
  __syncthreads();
  const uint32_t result = sh.sum;
  __syncthreads();
  return result;
}

// 2. The segment's cutoff over keys[0, slots): the cutoff key (1 when every valid key survives:
// all but NaN's key 0), whether ties at it are cut, and how many keys survive.
struct Cut {
  uint32_t cutoff;
  bool partial_ties;
  uint32_t room_for_ties;  // ties at the cutoff that fit (partial_ties only)
  uint32_t survivors;
};

__device__ Cut cut_segment(SieveShared& sh, const uint32_t* keys, int slots, uint32_t keep,
                           uint32_t capacity) {
  uint32_t prefix = 0;
  int top = 32;
  uint32_t rank = keep;
  uint32_t kept_above = 0;  // keys in bins above the digits found so far
  for (int pass = 0; pass < 3; ++pass) {
    const int width = pass < 2 ? 11 : 10;
    const int shift = top - width;
    const uint32_t mask = (1u << width) - 1u;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) sh.histogram[i] = 0;
    __syncthreads();
    uint32_t valid = 0;
    for (int s = threadIdx.x; s < slots; s += kThreads) {
      const uint32_t key = keys[s];
      if (key != 0 && (top >= 32 || key >> top == prefix)) {
        atomicAdd(&sh.histogram[(key >> shift) & mask], 1u);
        ++valid;
      }
    }
    if (pass == 0) {
      const uint32_t total = block_sum(sh, valid);
      if (total <= capacity) return Cut{1, false, 0, total};
    }
    __syncthreads();
    uint32_t above = 0;
    const uint32_t digit = DigitFinder<kThreads>::find(sh.finder, sh.histogram, rank, &above);
    const uint32_t in_bin = sh.histogram[digit];
    __syncthreads();
    prefix = (prefix << width) | digit;
    if (kept_above + above + in_bin <= capacity) {
      return Cut{prefix << shift, false, 0, kept_above + above + in_bin};
    }
    rank -= above;
    kept_above += above;
    top = shift;
  }
  // The keep-th key itself, with more ties than fit.
  return Cut{prefix, true, capacity - kept_above, capacity};
}

// 4. The pivot of the `rank`-th best composite of a source (each(fn) calls fn on every composite,
// all of them non-empty, every thread a share). False when the source holds at most `rank`.
template <typename Each>
__device__ bool find_pivot(SieveShared& sh, Each&& each, uint32_t rank, bool deterministic,
                           Pivot* pivot) {
  uint64_t prefix = 0;
  int top = 64;
  uint32_t greater = 0;
  const int final_bit = final_shift(deterministic);
  while (true) {
    const int width = digit_width(top);
    const int shift = top - width;
    const uint64_t mask = (uint64_t{1} << width) - 1;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) sh.histogram[i] = 0;
    __syncthreads();
    uint32_t seen = 0;
    each([&](uint64_t c) {
      if (matches_prefix(c, prefix, top)) {
        atomicAdd(&sh.histogram[static_cast<uint32_t>((c >> shift) & mask)], 1u);
        ++seen;
      }
    });
    if (top == 64 && block_sum(sh, seen) <= rank) return false;
    __syncthreads();
    uint32_t above = 0;
    const uint32_t digit = DigitFinder<kThreads>::find(sh.finder, sh.histogram, rank, &above);
    const bool done = sh.histogram[digit] == rank - above || shift == final_bit;
    __syncthreads();
    rank -= above;
    greater += above;
    prefix = (prefix << width) | digit;
    top = shift;
    if (done) break;
  }
  *pivot = Pivot{prefix, top, greater};
  return true;
}

// Writes the source's entries that beat the pivot and the first ties still needed.
template <typename Traits, typename Each>
__device__ void emit_selected(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each,
                              const Pivot& pivot) {
  const uint32_t needed_ties = static_cast<uint32_t>(args.k) - pivot.count_greater;
  if (threadIdx.x == 0) {
    sh.above = 0;
    sh.ties = 0;
  }
  __syncthreads();
  each([&](uint64_t c) {
    const int order = compare_to_pivot(c, pivot);
    if (order > 0) {
      write_output<Traits>(args, row, static_cast<int32_t>(warp_aggregated_slot(&sh.above)), c);
    } else if (order == 0) {
      const uint32_t tie = warp_aggregated_slot(&sh.ties);
      if (tie < needed_ties) {
        write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie), c);
      }
    }
  });
}

// Writes every entry of a source holding fewer than k, then the padding.
template <typename Traits, typename Each>
__device__ void emit_all(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each) {
  if (threadIdx.x == 0) sh.above = 0;
  __syncthreads();
  each([&](uint64_t c) {
    write_output<Traits>(args, row, static_cast<int32_t>(warp_aggregated_slot(&sh.above)), c);
  });
  __syncthreads();
  for (uint32_t slot = sh.above + threadIdx.x; slot < static_cast<uint32_t>(args.k);
       slot += kThreads) {
    write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::kEmptyComposite);
  }
}

template <typename Traits, typename Each>
__device__ void select_from(SieveShared& sh, const SelectArgs& args, int64_t row, Each&& each) {
  Pivot pivot{};
  if (find_pivot(sh, each, static_cast<uint32_t>(args.k), args.deterministic, &pivot)) {
    emit_selected<Traits>(sh, args, row, each, pivot);
  } else {
    emit_all<Traits>(sh, args, row, each);
  }
}

// May segment `info` have left behind an entry the pivot would select? Its lost entries are below
// its cutoff, or (partial ties) equal to it.
__device__ __forceinline__ bool may_miss(const SegmentInfo& info, const Pivot& pivot,
                                         bool deterministic) {
  if (!(info.flags & kLeftBehind)) return false;
  const uint64_t bin_floor = pivot.prefix << pivot.shift;
  const uint64_t cutoff = uint64_t{info.cutoff} << 32;
  if (!(info.flags & kPartialTies)) return cutoff > bin_floor;
  // Ties at a pivot resolved to the key are interchangeable when the order is not deterministic.
  if (!deterministic && pivot.shift == 32 && cutoff == bin_floor) return false;
  return (cutoff | 0xffffffffull) >= bin_floor;
}

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    sieve_kernel(const SelectArgs args, int segments, uint32_t keep, uint32_t capacity,
                 RowCounters* counters, SegmentInfo* infos, uint64_t* survivors) {
  extern __shared__ uint4 shared_raw[];
  uint32_t* keys = reinterpret_cast<uint32_t*>(shared_raw);
  __shared__ SieveShared sh;
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  const RowLayout<Traits> layout(args, row);
  const SegmentGeometry<Traits> geometry(layout, segment, segments);
  constexpr int kPer = Traits::kPerVector;
  RowCounters& row_counters = counters[row];
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
  if (threadIdx.x == 0) {
    sh.survivors = 0;
    sh.ties = 0;
  }
  __syncthreads();

  // 2. Cut.
  const Cut cut = cut_segment(sh, keys, geometry.slots, keep, capacity);

  // 3. Publish.
  if (threadIdx.x == 0) sh.base = cut.survivors ? atomicAdd(&row_counters.survivors, cut.survivors) : 0;
  __syncthreads();
  uint32_t lost = 0;
  for (int s = threadIdx.x; s < geometry.slots; s += kThreads) {
    const uint32_t key = keys[s];
    if (key == 0) continue;
    bool survives = key >= cut.cutoff;
    if (survives && cut.partial_ties && key == cut.cutoff) {
      survives = warp_aggregated_slot(&sh.ties) < cut.room_for_ties;
    }
    if (survives) {
      row_survivors[sh.base + warp_aggregated_slot(&sh.survivors)] =
          keys::make_composite(key, geometry.element(layout, segment, segments, s));
    } else {
      ++lost;
    }
  }
  lost = block_sum(sh, lost);
  if (threadIdx.x == 0) {
    const uint32_t flags = (lost != 0 ? kLeftBehind : 0u) | (cut.partial_ties ? kPartialTies : 0u);
    row_infos[segment] = SegmentInfo{cut.cutoff, flags};
    __threadfence();
    sh.last = atomicAdd(&row_counters.arrivals, 1u) == static_cast<uint32_t>(segments - 1);
  }
  __syncthreads();
  if (!sh.last) return;

  // 4. Select.
  __threadfence();
  uint64_t* list = reinterpret_cast<uint64_t*>(shared_raw);
  const uint32_t count = __ldcg(&row_counters.survivors);
  for (uint32_t base = 0; base < count; base += kThreads * kUnroll) {
    uint64_t held[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * kThreads + threadIdx.x;
      held[u] = i < count ? __ldcg(&row_survivors[i]) : 0;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * kThreads + threadIdx.x;
      if (i < count) list[i] = held[u];
    }
  }
  if (threadIdx.x == 0) sh.exact = true;
  __syncthreads();
  const auto each_survivor = [&](auto&& fn) {
    for (uint32_t i = threadIdx.x; i < count; i += kThreads) fn(list[i]);
  };
  Pivot pivot{};
  const bool more_than_k =
      find_pivot(sh, each_survivor, static_cast<uint32_t>(args.k), args.deterministic, &pivot);
  for (int s = threadIdx.x; s < segments; s += kThreads) {
    const SegmentInfo info{__ldcg(&row_infos[s].cutoff), __ldcg(&row_infos[s].flags)};
    // Fewer than k survivors are the whole row only when nothing was left behind.
    if (more_than_k ? may_miss(info, pivot, args.deterministic) : (info.flags & kLeftBehind) != 0) {
      sh.exact = false;
    }
  }
  __syncthreads();
  if (sh.exact) {
    if (more_than_k) {
      emit_selected<Traits>(sh, args, row, each_survivor, pivot);
    } else {
      emit_all<Traits>(sh, args, row, each_survivor);
    }
  } else {
    const auto each_in_row = [&](auto&& fn) {
      for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, 0, 1,
                                              [&](uint32_t key, uint32_t index) {
        if (key != 0) fn(keys::make_composite(key, index));
      });
    };
    select_from<Traits>(sh, args, row, each_in_row);
  }
  if (threadIdx.x == 0) row_counters = RowCounters{0, 0};
}

template <typename Traits>
const void* kernel_of() {
  return reinterpret_cast<const void*>(sieve_kernel<Traits>);
}

}  // namespace

SievePlan plan_sieve(const SelectProblem& problem, const cuda_common::DeviceShape& device) {
  SievePlan plan{};
  if (problem.batch == 0) return plan;
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
  ws.counters = carver.take<unsigned char>(batch * sizeof(RowCounters));
  ws.counter_bytes = batch * sizeof(RowCounters);
  ws.infos = carver.take<unsigned char>(batch * segments * sizeof(SegmentInfo));
  ws.survivors = carver.take<uint64_t>(batch * segments * static_cast<std::size_t>(plan.capacity));
  return ws;
}

Status launch_sieve(const SelectProblem& problem, const SievePlan& plan, const SelectArgs& args,
                    const SieveWorkspace& ws, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemsetAsync(ws.counters, 0, ws.counter_bytes, stream));
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    const void* kernel = kernel_of<Traits>();
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, plan.shared_bytes); !s) {
      return s;
    }
    const dim3 grid(static_cast<unsigned>(problem.batch * plan.segments));
    sieve_kernel<Traits><<<grid, kThreads, plan.shared_bytes, stream>>>(
        args, plan.segments, static_cast<uint32_t>(plan.keep),
        static_cast<uint32_t>(plan.capacity), static_cast<RowCounters*>(ws.counters),
        static_cast<SegmentInfo*>(ws.infos), ws.survivors);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace litetopk::cuda_select
