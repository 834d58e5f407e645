// Sample-Filter-Select on materialized rows: one streaming pass over the scores.
//
// Pipeline of sample_filter_kernel (one block per row segment):
// 1. Sample: the segment is cut into 16 KB tiles visited in a spread order (0, 8, 16, ..., then
//    1, 9, ...), so the first buffer fill is a sample of the whole segment; its k-th best entry is
//    a lower bound of the row's k-th score and becomes the gate.
// 2. Filter: thread 0 keeps three tiles in flight with the bulk copy engine (cp.async.bulk into
//    shared memory, completing on mbarriers). Every tile's elements are turned into keys and only
//    those at or above the gate enter the shared-memory candidate buffer. A full buffer is
//    compacted to its best k, which raises the gate; the blocks of one row share their bounds
//    through global memory (atomicMax).
// 3. Select: one block per row ends with a radix select over its buffer. With several blocks per
//    row, each appends its survivors above the row's bound to a candidate list, and the last block
//    to finish streams that list through its buffer and selects from it.
// Exact by construction: an entry is dropped only when k entries at least as good are held.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/select/candidate_buffer.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kThreads = 512;
constexpr int kItemsPerThread = 8;     // elements each thread offers per step
constexpr int kOfferElements = kThreads * kItemsPerThread;
constexpr int kStageVectors = 1024;    // 16-byte vectors per tile (16 KB)
constexpr int kStages = 3;             // tiles in flight per block
constexpr int kSpread = 8;             // tile visiting stride (the sample)
constexpr int kListItemsPerThread = 4; // composites per thread per step of the merge

using SmallBuffer = CandidateBuffer<kThreads, 2048 + kOfferElements, 2048>;
using LargeBuffer = CandidateBuffer<kThreads, 8192 + kOfferElements, 8192>;

template <typename Buffer>
struct KernelStorage {
  typename Buffer::Storage buffer;
  alignas(128) uint4 stages[kStages][kStageVectors];
  uint64_t stage_full[kStages];
};

struct RowShared {
  uint64_t* bounds;
  uint32_t* counters;  // [row] list length, [batch + row] finished blocks
  uint64_t* lists;
  int64_t list_capacity;
  int segments;
  int64_t batch;
};

// Next tile in spread order within [0, m), or -1 after the last.
__device__ __forceinline__ int next_tile(int tile, int m) {
  const int spread = min(kSpread, m);
  if (tile + spread < m) return tile + spread;
  const int lane = tile % spread + 1;
  return lane < spread ? lane : -1;
}

// One step's 16-byte vectors of scores, decoded into (key, index) pairs only on demand.
template <typename Traits, int kVectors>
struct RowVectorItems {
  static constexpr int kCount = kVectors * Traits::kPerVector;
  uint4 raw[kVectors];
  uint32_t first_index[kVectors];  // row position of each vector's first element
  uint32_t definite;               // bit i: pair i passes (ValueGate)
  uint32_t tie;                    // bit i: pair i equals the gate's value (checked exactly)
  bool largest;

  __device__ __forceinline__ void get(int i, uint32_t* key, uint32_t* index) const {
    const int j = i / Traits::kPerVector;
    const int e = i % Traits::kPerVector;
    *key = Traits::key(element_bits<Traits>(raw[j], e), largest);
    *index = first_index[j] + static_cast<uint32_t>(e);
  }
};

template <typename Buffer>
__device__ __forceinline__ KernelStorage<Buffer>& kernel_storage() {
  extern __shared__ __align__(128) unsigned char shared_raw[];
  return *reinterpret_cast<KernelStorage<Buffer>*>(shared_raw);
}

// One offer_step with the row's shared bound folded into the thread's gate (several blocks per
// row) and, after a compaction, the new bound published to the row.
template <typename Buffer, typename Items, typename AfterBarrier>
__device__ __forceinline__ void offer_shared(Buffer& buffer, const RowShared& shared, int64_t row,
                                             uint32_t step, const Items& items, uint64_t& gate,
                                             AfterBarrier&& after_barrier) {
  if (shared.segments > 1) {
    uint64_t bound = 0;
    if (threadIdx.x % 32 == 0) bound = *reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]);
    gate = max_u64(gate, __shfl_sync(0xffffffffu, bound, 0));
  }
  const uint64_t bound = buffer.offer_step(step, items, gate, after_barrier);
  if (bound != 0 && threadIdx.x == 0 && shared.segments > 1) {
    atomicMax(reinterpret_cast<unsigned long long*>(&shared.bounds[row]),
              static_cast<unsigned long long>(bound));
  }
}

// Streams this block's share of the row through the buffer (steps 1 and 2).
template <typename Traits, typename Buffer>
__device__ void filter_segment(KernelStorage<Buffer>& st, Buffer& buffer, const SelectArgs& args,
                               const RowShared& shared, int64_t row, int segment) {
  constexpr int kPer = Traits::kPerVector;
  constexpr int kVectorsPerStep = kOfferElements / kPer;
  constexpr int kStepVectorsPerThread = kVectorsPerStep / kThreads;
  constexpr int kStepsPerTile = kStageVectors / kVectorsPerStep;
  const RowLayout<Traits> layout(args, row);
  const uint4* body = reinterpret_cast<const uint4*>(layout.base + layout.head);

  const int num_tiles = (layout.num_vectors + kStageVectors - 1) / kStageVectors;
  const int first = static_cast<int>(int64_t{num_tiles} * segment / shared.segments);
  const int m = static_cast<int>(int64_t{num_tiles} * (segment + 1) / shared.segments) - first;

  // Thread 0 issues tiles in visiting order, kStages ahead of the consumers.
  int issue_tile = m > 0 ? 0 : -1;
  auto issue_next = [&](int stage) {
    if (issue_tile < 0) return;
    const int v0 = (first + issue_tile) * kStageVectors;
    const auto bytes = static_cast<uint32_t>(min(kStageVectors, layout.num_vectors - v0) * 16);
    sm90::mbarrier_arrive_expect_bytes(&st.stage_full[stage], bytes);
    sm90::bulk_copy_global_to_shared(st.stages[stage], body + v0, bytes, &st.stage_full[stage]);
    issue_tile = next_tile(issue_tile, m);
  };
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) issue_next(stage);
  }

  uint64_t gate = buffer.s.gate;
  uint32_t step = 0;
  int i = 0;
  for (int tile = m > 0 ? 0 : -1; tile >= 0; tile = next_tile(tile, m), ++i) {
    const int stage = i % kStages;
    sm90::mbarrier_wait(&st.stage_full[stage], static_cast<uint32_t>(i / kStages) & 1u);
    const int tile_vector = (first + tile) * kStageVectors;
#pragma unroll
    for (int part = 0; part < kStepsPerTile; ++part, ++step) {
      // A float comparison per element marks the few that pass; only those become keys.
      RowVectorItems<Traits, kStepVectorsPerThread> items;
      items.largest = args.largest;
      items.definite = 0;
      items.tie = 0;
      const ValueGate<Traits> value_gate(gate, args.largest);
#pragma unroll
      for (int j = 0; j < kStepVectorsPerThread; ++j) {
        const int in_tile = part * kVectorsPerStep + j * kThreads + static_cast<int>(threadIdx.x);
        const int v = tile_vector + in_tile;
        items.raw[j] = st.stages[stage][in_tile];
        items.first_index[j] = static_cast<uint32_t>(layout.head + v * kPer);
        if (v < layout.num_vectors) {
          uint32_t above, equal;
          value_gate.classify(items.raw[j], &above, &equal);
          items.definite |= above << (j * kPer);
          items.tie |= equal << (j * kPer);
        }
      }
      // After the barrier of the tile's last step every thread is done with this stage.
      offer_shared(buffer, shared, row, step, items, gate, [&] {
        if (part == kStepsPerTile - 1) issue_next(stage);
      });
    }
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
}

// Several blocks per row: append survivors to the row's list; the last block merges (step 3).
// Returns true in the block that must emit the row.
template <typename Buffer>
__device__ bool gather_row(Buffer& buffer, const RowShared& shared, int64_t row) {
  __shared__ uint64_t bound;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    bound = max_u64(*reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]),
                    keys::kAdmitAllValid);
  }
  __syncthreads();
  uint64_t* list = shared.lists + row * shared.list_capacity;
  uint32_t* list_length = &shared.counters[row];
  const uint32_t count = buffer.s.count;
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

  // Merge: every other block of the row has published; stream the list through the buffer.
  if (threadIdx.x == 0) {
    buffer.reset(*reinterpret_cast<volatile uint64_t*>(&shared.bounds[row]));
  }
  __syncthreads();
  uint64_t gate = buffer.s.gate;
  const uint32_t length = *reinterpret_cast<volatile uint32_t*>(list_length);
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

template <typename Traits, typename Buffer>
__global__ void __launch_bounds__(kThreads, 2)
    sample_filter_kernel(const SelectArgs args, const RowShared shared) {
  auto& st = kernel_storage<Buffer>();
  Buffer buffer(st.buffer, static_cast<uint32_t>(args.k), args.deterministic);
  const int64_t row = blockIdx.x / shared.segments;
  const int segment = static_cast<int>(blockIdx.x % shared.segments);
  if (threadIdx.x == 0) {
    buffer.reset(keys::kAdmitAllValid);
    for (int stage = 0; stage < kStages; ++stage) sm90::mbarrier_init(&st.stage_full[stage], 1);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  filter_segment<Traits>(st, buffer, args, shared, row, segment);
  if (shared.segments > 1 && !gather_row(buffer, shared, row)) return;
  buffer.template emit<Traits>(args, row);
}

template <typename Buffer>
Status launch_config(const SelectProblem& problem, const SampleFilterPlan& plan,
                     const SelectArgs& args, const RowShared& shared, cudaStream_t stream) {
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    auto kernel = sample_filter_kernel<Traits, Buffer>;
    const int smem = static_cast<int>(sizeof(KernelStorage<Buffer>));
    if (Status s =
            cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
        !s) {
      return s;
    }
    const int64_t blocks = problem.batch * plan.segments;
    kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(args, shared);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace

SampleFilterPlan plan_sample_filter(const SelectProblem& problem, const cuda_common::DeviceShape& device) {
  SampleFilterPlan plan{};
  plan.large_k = problem.k > SmallBuffer::kMaxK;
  plan.blocks_per_sm = plan.large_k ? 1 : 2;
  // Enough blocks to fill the GPU once, but at least two tiles per block.
  const int64_t slots = int64_t{device.sm_count} * plan.blocks_per_sm;
  const int64_t tile_elements = int64_t{kStageVectors} * 4;
  const int64_t max_segments = std::max<int64_t>(1, problem.n / (2 * tile_elements));
  const int64_t wanted = problem.batch >= slots ? 1 : slots / std::max<int64_t>(problem.batch, 1);
  plan.segments = static_cast<int>(std::clamp<int64_t>(wanted, 1, max_segments));
  return plan;
}

SampleFilterWorkspace carve_sample_filter(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem,
                                          const SampleFilterPlan& plan) {
  SampleFilterWorkspace ws{};
  // The counters right after the bounds: launch_sample_filter clears both with one memset.
  ws.row_bounds = carver.take<uint64_t>(problem.batch);
  ws.row_counters = carver.take<uint32_t>(2 * problem.batch);
  if (plan.segments > 1) {
    const int64_t capacity = plan.large_k ? LargeBuffer::kCapacity : SmallBuffer::kCapacity;
    ws.list_capacity = capacity * plan.segments;
    ws.candidate_lists = carver.take<uint64_t>(problem.batch * ws.list_capacity);
  }
  return ws;
}

Status launch_sample_filter(const SelectProblem& problem, const SampleFilterPlan& plan,
                            const SelectArgs& args, const SampleFilterWorkspace& ws,
                            cudaStream_t stream) {
  // The row state must start from zero on every call (bounds 0 = none yet): one memset from the
  // bounds to the end of the counters, carved right after them.
  const auto* first = reinterpret_cast<const char*>(ws.row_bounds);
  const auto* last = reinterpret_cast<const char*>(ws.row_counters + 2 * problem.batch);
  LITETOPK_CUDA_TRY(
      cudaMemsetAsync(ws.row_bounds, 0, static_cast<std::size_t>(last - first), stream));
  const RowShared shared{ws.row_bounds, ws.row_counters, ws.candidate_lists, ws.list_capacity,
                         plan.segments, problem.batch};
  if (plan.large_k) return launch_config<LargeBuffer>(problem, plan, args, shared, stream);
  return launch_config<SmallBuffer>(problem, plan, args, shared, stream);
}

}  // namespace litetopk::cuda_select
