// Writes the hot sample of IndexerState (formats/hot_sample_layout.h) after a chunk's selection:
// the positions its queries chose most often.
// 1. count_choices: every chosen index (relative to the query's clamped ks) adds 1 to its key's
//    fp32 counter (exact below 2^24 choices per key).
// 2. select_topk over the counters (one row of S): the kPositionsPerK * k most chosen keys, written
//    straight into the state's positions (distinct, as any selection's indices are).
// 3. finish_header: count, capacity and the magic word that makes the reader trust the sample.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "formats/hot_sample_layout.h"
#include "cuda/common/cuda_check.h"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/select/select_kernels.h"
#include "litetopk/select.h"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kCountThreads = 256;

__global__ void count_choices(const int32_t* indices, const int32_t* ks, int64_t queries,
                              int32_t k, int32_t num_keys, float* counts) {
  const int64_t total = queries * k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t index = indices[i];
    if (index < 0) continue;
    const int32_t begin = min(max(ks[i / k], 0), num_keys);
    const int64_t key = int64_t{begin} + index;
    if (key < num_keys) atomicAdd(&counts[key], 1.0f);
  }
}

__global__ void finish_header(int32_t* header, int32_t count, int32_t capacity) {
  header[hot_sample::kCountWord] = count;
  header[hot_sample::kCapacityWord] = capacity;
  header[hot_sample::kMagicWord] = hot_sample::kMagic;
}

int64_t sample_size(const IndexerProblem& problem) {
  return std::min(hot_sample::capacity(problem.k), problem.num_keys);
}

SelectProblem most_chosen(const IndexerProblem& problem, const float* counts, int32_t* positions) {
  SelectProblem select;
  select.scores = counts;
  select.dtype = DType::kFloat32;
  select.batch = 1;
  select.n = problem.num_keys;
  select.k = sample_size(problem);
  select.indices = positions;
  return select;
}

// The writer's workspace: the counters, then the selection's (only sized when base is null).
struct WriterLayout {
  float* counts = nullptr;
  void* selection = nullptr;
  std::size_t selection_bytes = 0;
  std::size_t bytes = 0;
};

Status carve_writer(const IndexerProblem& problem, void* base, WriterLayout* layout) {
  cuda_common::WorkspaceCarver carver(base);
  layout->counts = carver.take<float>(static_cast<std::size_t>(problem.num_keys));
  // Sizing reads nothing; aligned host addresses stand in for the device arrays.
  alignas(16) static float counts_placeholder[4];
  alignas(16) static int32_t positions_placeholder[4];
  if (Status s = cuda_select::select_workspace_size(
          most_chosen(problem, counts_placeholder, positions_placeholder),
          &layout->selection_bytes);
      !s) {
    return s;
  }
  layout->selection = carver.take<char>(layout->selection_bytes);
  layout->bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

Status hot_sample_workspace_size(const IndexerProblem& problem, std::size_t* bytes) {
  *bytes = 0;
  if (problem.num_keys == 0 || problem.num_queries == 0) return Status::ok();
  WriterLayout layout;
  if (Status s = carve_writer(problem, nullptr, &layout); !s) return s;
  *bytes = layout.bytes;
  return Status::ok();
}

Status write_hot_sample(const IndexerProblem& problem, void* state, void* workspace,
                        cudaStream_t stream) {
  if (problem.num_keys == 0 || problem.num_queries == 0) return Status::ok();
  WriterLayout layout;
  if (Status s = carve_writer(problem, workspace, &layout); !s) return s;
  auto* header = static_cast<int32_t*>(state);
  LITETOPK_CUDA_TRY(cudaMemsetAsync(
      layout.counts, 0, static_cast<std::size_t>(problem.num_keys) * sizeof(float), stream));
  const int64_t total = problem.num_queries * problem.k;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((total + kCountThreads - 1) / kCountThreads, 4096));
  count_choices<<<blocks, kCountThreads, 0, stream>>>(
      problem.indices, problem.ks, problem.num_queries, static_cast<int32_t>(problem.k),
      static_cast<int32_t>(problem.num_keys), layout.counts);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  if (Status s = cuda_select::select_rows(
          most_chosen(problem, layout.counts, header + hot_sample::kHeaderWords), layout.selection,
          stream);
      !s) {
    return s;
  }
  finish_header<<<1, 1, 0, stream>>>(header, static_cast<int32_t>(sample_size(problem)),
                                     static_cast<int32_t>(hot_sample::capacity(problem.k)));
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
