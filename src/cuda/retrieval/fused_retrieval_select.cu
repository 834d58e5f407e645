// The fused retrieval path's small kernels around the scan (fused_retrieval.h).
//
// fused_gates_kernel (one warp per query): the gate is the smallest key among the sample's k best
// values (a NaN among them, or no sample: every non-NaN score is kept); the pool is emptied.
//
// Pipeline of fused_select_kernel (one block of 1024 threads per query: each radix pass over a
// pool of 16 k candidates is two rounds of loads):
// 1. A pool that took every list holds all the query's candidates. A full one (rare: ties, a
//    gate far below the k-th score) takes the lists that did not fit, lane after lane, keeping
//    its k best (ListTeam::keep_best) whenever it fills up.
// 2. More than k candidates: ListTeam::find_boundary (a radix descent over the composites, from
//    the pass boundary at or above the bits they all share) and for_each_kept write the k best;
//    else all of them. The slots after them are padding (-1 and NaN, or composite 0 for the
//    sort).
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
constexpr int kSelectThreads = 1024;

__global__ void __launch_bounds__(kGateThreads)
    fused_gates_kernel(const float* values, int64_t batch, int64_t k, uint64_t* gates,
                       uint32_t* pool_counts) {
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
  if (lane == 0) {
    gates[query] = (uint64_t{max(smallest, 1u)} << 32) - 1;
    pool_counts[query] = 0;
  }
}

struct SelectArgs {
  const uint64_t* lists;
  const uint32_t* counts;
  uint64_t* pool;
  const uint32_t* pool_counts;
  int32_t lanes;
  int32_t capacity;
  int32_t pool_capacity;
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
  __shared__ cuda_indexer::ListScratch<kSelectThreads / 32> scratch;
  const int64_t query = blockIdx.x;
  const int thread = static_cast<int>(threadIdx.x);
  Team team{scratch, 1, thread};
  const auto k = static_cast<uint32_t>(a.k);
  const auto pool_capacity = static_cast<uint32_t>(a.pool_capacity);
  uint64_t* pool = a.pool + query * a.pool_capacity;
  const typename Team::Boundary keep_all{0, 0};
  // 1.
  uint32_t total = a.pool_counts[query];
  if (total > pool_capacity) {
    total = pool_capacity;
    for (int l = 0; l < a.lanes; ++l) {
      const uint32_t count = a.counts[query * a.lanes + l];
      const uint64_t* list = a.lists + (query * a.lanes + l) * a.capacity;
      for (uint32_t done = 0; done < count;) {
        if (total == pool_capacity) {
          team.keep_best(pool, total, k);
          total = k;
        }
        const uint32_t take = min(count - done, pool_capacity - total);
        total = team.for_each_kept(list + done, take, keep_all, total,
                                   [pool](uint32_t position, uint64_t c) { pool[position] = c; });
        done += take;
      }
    }
  }
  // 2.
  const int64_t out = query * a.k;
  auto write = [&a, out](uint32_t position, uint64_t c) { write_slot(a, out + position, c); };
  const typename Team::Boundary boundary =
      total > k ? team.find_boundary(pool, total, k, team.shared_prefix(pool, total)) : keep_all;
  const uint32_t written = team.for_each_kept(pool, total, boundary, 0, write);
  for (uint32_t slot = written + static_cast<uint32_t>(thread); slot < k; slot += kSelectThreads) {
    write_slot(a, out + slot, keys::kEmptyComposite);
  }
}

}  // namespace

Status launch_fused_gates(const float* values, int64_t batch, int64_t k, uint64_t* gates,
                          uint32_t* pool_counts, cudaStream_t stream) {
  const int64_t blocks = (batch * 32 + kGateThreads - 1) / kGateThreads;
  fused_gates_kernel<<<static_cast<unsigned>(blocks), kGateThreads, 0, stream>>>(
      values, batch, k, gates, pool_counts);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

Status launch_fused_select(const RetrievalPlan& plan, const FusedScan& scan, int32_t* indices,
                           float* scores, uint64_t* composites, cudaStream_t stream) {
  const SelectArgs a{scan.lists,
                     scan.counts,
                     scan.pool,
                     scan.pool_counts,
                     static_cast<int32_t>(plan.fused_splits * kFusedMathGroups),
                     static_cast<int32_t>(plan.fused_list_capacity),
                     static_cast<int32_t>(plan.fused_pool_capacity),
                     static_cast<int32_t>(plan.problem.k),
                     indices,
                     scores,
                     composites};
  fused_select_kernel<<<static_cast<unsigned>(plan.problem.batch), kSelectThreads, 0, stream>>>(a);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_retrieval
