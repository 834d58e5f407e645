// The fused retrieval path's small kernels around the scan (fused_retrieval.h).
//
// fused_gates_kernel (one warp per query): the gate is the smallest key among the sample's k best
// values (a NaN among them, or no sample: every non-NaN score is kept).
//
// Pipeline of fused_select_kernel (one block of 128 threads per query):
// 1. The query's lane lists are packed into one run at the start of its first list, lane after
//    lane (ListTeam::for_each_kept keeping all: each batch is read before it is written, and a
//    list moves only towards the start).
// 2. More than k candidates: ListTeam::find_boundary (a radix descent over the composites) and
//    for_each_kept write the k best; else all of them. The slots after them are padding (-1 and
//    NaN, or composite 0 for the sort).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/indexer/candidate_list.cuh"
#include "cuda/retrieval/fused_retrieval.h"
#include "formats/score_keys.h"

namespace litetopk::cuda_retrieval {
namespace {

constexpr int kGateThreads = 256;
constexpr int kSelectThreads = 128;
constexpr int kMaxLanes = 1024;

__global__ void __launch_bounds__(kGateThreads)
    fused_gates_kernel(const float* values, int64_t batch, int64_t k, uint64_t* gates) {
  const int64_t query = (int64_t{blockIdx.x} * kGateThreads + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (query >= batch) return;
  uint32_t smallest = values == nullptr ? 0u : 0xffffffffu;
  if (values != nullptr) {
    for (int64_t i = lane; i < k; i += 32) {
      const uint32_t key = keys::key_from_f32_bits(__float_as_uint(values[query * k + i]), true);
      smallest = min(smallest, key);
    }
  }
  smallest = __reduce_min_sync(0xffffffffu, smallest);
  if (lane == 0) gates[query] = (uint64_t{max(smallest, 1u)} << 32) - 1;
}

struct SelectArgs {
  uint64_t* lists;
  const uint32_t* counts;
  int32_t lanes;
  int32_t capacity;
  int32_t k;
  int32_t* indices;
  float* scores;
  uint64_t* composites;
};

__device__ __forceinline__ void write_slot(const SelectArgs& a, int64_t at, uint64_t c) {
  if (a.composites != nullptr) {
    a.composites[at] = c;
    return;
  }
  a.indices[at] = keys::composite_index(c);
  if (a.scores != nullptr) {
    a.scores[at] = c == keys::kEmptyComposite
                       ? NAN
                       : __uint_as_float(keys::f32_bits_from_key(keys::composite_key(c), true));
  }
}

__global__ void __launch_bounds__(kSelectThreads) fused_select_kernel(const SelectArgs a) {
  using Team = cuda_indexer::ListTeam<kSelectThreads / 32>;
  __shared__ cuda_indexer::ListScratch scratch;
  __shared__ uint32_t lane_counts[kMaxLanes];
  const int64_t query = blockIdx.x;
  const int thread = static_cast<int>(threadIdx.x);
  Team team{scratch, 1, thread};
  for (int l = thread; l < a.lanes; l += kSelectThreads) {
    lane_counts[l] = a.counts[query * a.lanes + l];
  }
  team.sync();
  // 1.
  uint64_t* list = a.lists + query * a.lanes * a.capacity;
  const typename Team::Boundary keep_all{0, 0};
  uint32_t total = 0;
  for (int l = 0; l < a.lanes; ++l) {
    const uint32_t count = lane_counts[l];
    if (count == 0) continue;
    if (l == 0) {
      total = count;
      continue;
    }
    total = team.for_each_kept(list + int64_t{l} * a.capacity, count, keep_all, total,
                               [list](uint32_t position, uint64_t c) { list[position] = c; });
  }
  // 2.
  const auto k = static_cast<uint32_t>(a.k);
  const int64_t out = query * a.k;
  auto write = [&a, out](uint32_t position, uint64_t c) { write_slot(a, out + position, c); };
  uint32_t written = 0;
  if (total > k) {
    written = team.for_each_kept(list, total, team.find_boundary(list, total, k), 0, write);
  } else {
    written = team.for_each_kept(list, total, keep_all, 0, write);
  }
  for (uint32_t slot = written + static_cast<uint32_t>(thread); slot < k; slot += kSelectThreads) {
    write_slot(a, out + slot, keys::kEmptyComposite);
  }
}

}  // namespace

Status launch_fused_gates(const float* values, int64_t batch, int64_t k, uint64_t* gates,
                          cudaStream_t stream) {
  const int64_t blocks = (batch * 32 + kGateThreads - 1) / kGateThreads;
  fused_gates_kernel<<<static_cast<unsigned>(blocks), kGateThreads, 0, stream>>>(values, batch, k,
                                                                              gates);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

Status launch_fused_select(const RetrievalPlan& plan, uint64_t* lists, const uint32_t* counts,
                           int32_t* indices, float* scores, uint64_t* composites,
                           cudaStream_t stream) {
  const int64_t lanes = plan.fused_splits * kFusedMathGroups;
  if (lanes > kMaxLanes) {
    return Status(StatusCode::kInternal, "fused retrieval plans at most 1024 lanes");
  }
  const SelectArgs a{lists,
                     counts,
                     static_cast<int32_t>(lanes),
                     static_cast<int32_t>(plan.fused_list_capacity),
                     static_cast<int32_t>(plan.problem.k),
                     indices,
                     scores,
                     composites};
  fused_select_kernel<<<static_cast<unsigned>(plan.problem.batch), kSelectThreads, 0, stream>>>(a);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_retrieval
