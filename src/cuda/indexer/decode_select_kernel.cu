// The gated decode path's selection: the exact top-k of each row's candidates (every visible
// score at or above the row's bound, so the row's top-k is among them), and this step's positions
// into the decode state for the next step's bound.
//
// Pipeline of decode_select_kernel (grid: one block per row; a dependent launch of the gated
// kernel):
// 1. n = the row's candidate count. At most k: every candidate is selected.
// 2. Otherwise a radix select of the k-th key, digits of 11, 11 and 10 bits: per pass a
//    shared-memory histogram of the keys matching the digits found so far, and one warp finds the
//    bin holding the k-th (paged_radix_select.cuh); done early when that bin holds exactly the
//    entries still needed. The keys are read from shared memory when n fits there (a few thousand
//    on coherent steps), from the candidate buffer otherwise.
// 3. Emit: entries above the pivot, then ties up to k, at slots reserved by shared atomics:
//    positions to indices and to the state, scores to values; -1 padding (values NaN, state -1)
//    past the selected.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/decode_state_kernels.h"
#include "cuda/indexer/paged_radix_select.cuh"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kSelectThreads = 512;
constexpr int kCachedKeys = 16384;  // candidates whose keys are staged in shared memory

struct SelectShared {
  uint32_t keys[kCachedKeys];
  uint32_t histogram[radix::kBins];
  radix::RowSelect row;
  uint32_t above_used;
  uint32_t ties_used;
};

struct SelectParams {
  const uint32_t* counts;
  const float* candidate_scores;
  const int32_t* candidate_positions;
  int32_t capacity;
  int32_t k;
  int32_t* indices;
  float* values;
  int32_t* state;
};

__global__ void __launch_bounds__(kSelectThreads)
    decode_select_kernel(const SelectParams p) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<SelectShared*>(shared_raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x;
  sm90::wait_for_prerequisite_grids();
  sm90::allow_dependent_grids();
  // 1.
  const int32_t n = static_cast<int32_t>(
      min(__ldcg(p.counts + r), static_cast<uint32_t>(p.capacity)));
  const float* scores = p.candidate_scores + r * p.capacity;
  const int32_t* positions = p.candidate_positions + r * p.capacity;
  const bool cached = n <= kCachedKeys;
  auto key_at = [&](int32_t i) {
    return cached ? s.keys[i] : radix::score_key(__ldcg(scores + i));
  };
  if (tid == 0) {
    s.row = radix::RowSelect{0u, 0, 0u, static_cast<uint32_t>(n), true};
    if (n > p.k) s.row = radix::RowSelect{0u, 32, static_cast<uint32_t>(p.k), 0u, false};
    s.above_used = 0;
    s.ties_used = 0;
  }
  if (n > p.k && cached) {
    for (int32_t i = tid; i < n; i += kSelectThreads) s.keys[i] = radix::score_key(__ldcg(scores + i));
  }
  __syncthreads();
  // 2.
  for (int pass = 0; pass < radix::kPasses && !s.row.done; ++pass) {
    const radix::RowSelect row = s.row;
    for (int i = tid; i < radix::kBins; i += kSelectThreads) s.histogram[i] = 0;
    __syncthreads();
    const int shift = radix::digit_shift(pass);
    const uint32_t mask = radix::digit_mask(pass);
    for (int32_t i = tid; i < n; i += kSelectThreads) {
      const uint32_t key = key_at(i);
      if (key != 0 && radix::matches(row, key)) atomicAdd(&s.histogram[(key >> shift) & mask], 1u);
    }
    __syncthreads();
    if (tid < 32) {
      uint32_t digit, above, in_bin, total;
      radix::find_digit(s.histogram, radix::digit_bins(pass), row.rank, tid, &digit, &above,
                        &in_bin, &total);
      if (tid == 0) s.row = radix::advance(row, pass, digit, above, in_bin);
    }
    __syncthreads();
  }
  // 3.
  const radix::RowSelect row = s.row;
  const int64_t out = r * p.k;
  for (int32_t i = tid; i < n; i += kSelectThreads) {
    const uint32_t key = key_at(i);
    if (key == 0) continue;
    const uint32_t v = row.shift >= 32 ? 0u : key >> row.shift;
    uint32_t slot;
    if (v > row.prefix) {
      slot = atomicAdd(&s.above_used, 1u);
    } else if (v == row.prefix) {
      const uint32_t t = atomicAdd(&s.ties_used, 1u);
      if (t >= row.rank) continue;
      slot = row.above + t;
    } else {
      continue;
    }
    const int32_t position = __ldcg(positions + i);
    p.indices[out + slot] = position;
    if (p.values != nullptr) p.values[out + slot] = __ldcg(scores + i);
    p.state[out + slot] = position;
  }
  for (int32_t slot = static_cast<int32_t>(row.above + row.rank) + tid; slot < p.k;
       slot += kSelectThreads) {
    p.indices[out + slot] = -1;
    if (p.values != nullptr) p.values[out + slot] = NAN;
    p.state[out + slot] = -1;
  }
}

}  // namespace

Status launch_decode_select(const PagedIndexerProblem& problem, const DecodeBuffers& buffers,
                            cudaStream_t stream) {
  const auto rows = static_cast<unsigned>(problem.batch * problem.next_n);
  if (rows == 0) return Status::ok();
  const void* kernel = reinterpret_cast<const void*>(decode_select_kernel);
  const int smem = static_cast<int>(sizeof(SelectShared));
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  SelectParams params{buffers.counts,  buffers.candidate_scores, buffers.candidate_positions,
                      buffers.capacity, static_cast<int32_t>(problem.k), problem.indices,
                      problem.values,  buffers.next};
  void* kernel_args[] = {&params};
  return launch_decode_kernel(kernel, dim3(rows), kSelectThreads, smem, /*dependent=*/true, stream,
                              kernel_args);
}

}  // namespace litetopk::cuda_indexer
