// The CUDA backend of retrieval_topk, the unfused path: the corpus in chunks of plan.chunk_rows
// rows, each scored by cuBLAS into the workspace, selected, and merged exactly into a running
// top-k.
//
// 1. Carve the workspace: cuBLAS's, one chunk's [batch, chunk_rows] fp32 scores, the corpus norms
//    (l2 without corpus_norms), select's workspace, and with several chunks three [batch, k]
//    lists (running, chunk, merged) and the final merge's.
// 2. l2 without corpus_norms: the squared norms of the corpus (launch_corpus_norms).
// 3. Per chunk: the dot products (chunk_scores); l2 or ranges: launch_chunk_adjust.
// 4. One chunk: select_rows straight into the outputs (its indices are corpus rows).
// 5. Several: chunk 0 selected into the running list; chunk c > 0 into the chunk list, its
//    indices offset by the chunk's first row, then merge_topk's launcher over {running, chunk}
//    (ties to the smallest corpus row) into the merged list, copied back to the running list;
//    the last merge writes the outputs (sorted when asked).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "api/format.h"
#include "api/merge_backend.h"
#include "api/retrieval_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/retrieval/retrieval_kernels.h"
#include "cuda/select/select_kernels.h"

namespace litetopk::detail {

namespace {

struct Layout {
  void* blas = nullptr;
  float* scores = nullptr;    // [batch, chunk_rows]
  float* norms = nullptr;     // [n] when computed
  char* select = nullptr;
  float* list_values = nullptr;     // [3, batch, k]: running, chunk, merged
  int32_t* list_indices = nullptr;  // [3, batch, k]
  char* merge = nullptr;
  std::size_t bytes = 0;
};

bool computes_norms(const RetrievalPlan& plan) {
  return plan.problem.metric == RetrievalMetric::kL2 && !plan.has_norms;
}

int64_t chunk_width(const RetrievalPlan& plan, int64_t chunk) {
  return std::min(plan.chunk_rows, plan.problem.n - chunk * plan.chunk_rows);
}

// The selection of one chunk's scores into `indices` / `values`.
SelectProblem chunk_selection(const RetrievalPlan& plan, int64_t width, const float* scores,
                              int32_t* indices, float* values) {
  SelectProblem s;
  s.scores = scores;
  s.dtype = DType::kFloat32;
  s.batch = plan.problem.batch;
  s.n = width;
  s.row_stride = width;
  s.k = plan.problem.k;
  s.sorted = plan.chunks == 1 && plan.problem.sorted;
  s.deterministic = plan.problem.deterministic;
  s.indices = indices;
  s.values = values;
  return s;
}

// The merge of the running list (shard 0) and the chunk list (shard 1) into `out_*`.
MergeProblem chunk_merge(const RetrievalProblem& p, const Layout& layout, bool last,
                         int32_t* out_indices, float* out_values) {
  MergeProblem m;
  m.values = layout.list_values;
  m.indices = layout.list_indices;
  m.batch = p.batch;
  m.shards = 2;
  m.k_in = p.k;
  m.row_stride = p.k;
  m.shard_stride = p.batch * p.k;
  m.k = p.k;
  m.sorted = last && p.sorted;
  m.out_indices = out_indices;
  m.out_values = out_values;
  return m;
}

// Carves the workspace of a launch of `plan` (sizes only when base is null). select's and the
// merge's workspace sizes depend on the shapes and flags, not on the addresses.
Status carve(const RetrievalPlan& plan, void* base, Layout* layout) {
  const RetrievalProblem& p = plan.problem;
  cuda_common::WorkspaceCarver carver(base);
  *layout = Layout{};
  layout->blas = carver.take<char>(cuda_retrieval::kBlasWorkspaceBytes);
  layout->scores = carver.take<float>(static_cast<std::size_t>(p.batch * plan.chunk_rows));
  if (computes_norms(plan)) layout->norms = carver.take<float>(static_cast<std::size_t>(p.n));
  std::size_t select_bytes = 0;
  for (int64_t chunk : {int64_t{0}, plan.chunks - 1}) {
    std::size_t bytes = 0;
    const SelectProblem s =
        chunk_selection(plan, chunk_width(plan, chunk), layout->scores, nullptr, nullptr);
    if (Status status = cuda_select::select_workspace_size(s, &bytes); !status) return status;
    select_bytes = std::max(select_bytes, bytes);
  }
  layout->select = carver.take<char>(select_bytes);
  if (plan.chunks > 1) {
    const std::size_t list = static_cast<std::size_t>(p.batch * p.k);
    layout->list_values = carver.take<float>(3 * list);
    layout->list_indices = carver.take<int32_t>(3 * list);
    std::size_t merge_bytes = 0;
    if (Status status = cuda_merge_workspace_size(
            chunk_merge(p, *layout, true, nullptr, nullptr), &merge_bytes);
        !status) {
      return status;
    }
    layout->merge = carver.take<char>(merge_bytes);
  }
  layout->bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

Status cuda_retrieval_plan(RetrievalPlan* plan) {
  if (Status status = cuda_retrieval::prepare_blas(&plan->device); !status) return status;
  if (plan->chunks == 0) return Status::ok();
  Layout layout;
  if (Status status = carve(*plan, nullptr, &layout); !status) return status;
  plan->workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_retrieval_launch(const RetrievalPlan& plan, const RetrievalProblem& p, void* workspace,
                             cudaStream_t stream) {
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  if (device != plan.device) {
    return invalid_argument("the current device must be the plan's (", plan.device, "), got ",
                            device);
  }
  const std::size_t list = static_cast<std::size_t>(p.batch * p.k);
  if (plan.chunks == 0) {
    // An empty corpus: every slot is padding (the adjust kernel over no corpus rows writes NaN).
    LITETOPK_CUDA_TRY(cudaMemsetAsync(p.indices, 0xff, list * sizeof(int32_t), stream));
    if (p.scores != nullptr) {
      return cuda_retrieval::launch_chunk_adjust(p.scores, p.batch, p.k, 0, 0, nullptr, nullptr,
                                                 nullptr, stream);
    }
    return Status::ok();
  }
  Layout layout;
  if (Status status = carve(plan, workspace, &layout); !status) return status;
  const float* norms = p.corpus_norms;
  if (computes_norms(plan)) {
    if (Status status = cuda_retrieval::launch_corpus_norms(p.corpus, p.dtype, p.n, p.dim,
                                                            layout.norms, stream);
        !status) {
      return status;
    }
    norms = layout.norms;
  }
  const bool adjust = norms != nullptr || p.range_starts != nullptr || p.range_ends != nullptr;
  const std::size_t row_bytes = static_cast<std::size_t>(p.dim) * dtype_size(p.dtype);
  for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const int64_t first = chunk * plan.chunk_rows;
    const int64_t width = chunk_width(plan, chunk);
    const void* rows = static_cast<const char*>(p.corpus) + static_cast<std::size_t>(first) * row_bytes;
    if (Status status = cuda_retrieval::chunk_scores(p.queries, rows, p.dtype, p.batch, width,
                                                     p.dim, layout.scores, layout.blas, stream);
        !status) {
      return status;
    }
    if (adjust) {
      if (Status status = cuda_retrieval::launch_chunk_adjust(layout.scores, p.batch, width, first,
                                                              p.n, norms, p.range_starts,
                                                              p.range_ends, stream);
          !status) {
        return status;
      }
    }
    if (plan.chunks == 1) {
      return cuda_select::select_rows(
          chunk_selection(plan, width, layout.scores, p.indices, p.scores), layout.select, stream);
    }
    const std::size_t slot = chunk == 0 ? 0 : list;  // running list, or chunk list
    if (Status status = cuda_select::select_rows(
            chunk_selection(plan, width, layout.scores, layout.list_indices + slot,
                            layout.list_values + slot),
            layout.select, stream);
        !status) {
      return status;
    }
    if (chunk == 0) continue;
    if (Status status = cuda_retrieval::launch_offset_indices(
            layout.list_indices + list, static_cast<int64_t>(list), static_cast<int32_t>(first),
            stream);
        !status) {
      return status;
    }
    const bool last = chunk == plan.chunks - 1;
    int32_t* out_indices = last ? p.indices : layout.list_indices + 2 * list;
    float* out_values = last ? p.scores : layout.list_values + 2 * list;
    if (Status status = cuda_merge_launch(chunk_merge(p, layout, last, out_indices, out_values),
                                          layout.merge, stream);
        !status) {
      return status;
    }
    if (last) break;
    LITETOPK_CUDA_TRY(cudaMemcpyAsync(layout.list_indices, out_indices, list * sizeof(int32_t),
                                      cudaMemcpyDeviceToDevice, stream));
    LITETOPK_CUDA_TRY(cudaMemcpyAsync(layout.list_values, out_values, list * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
  }
  return Status::ok();
}

}  // namespace litetopk::detail
