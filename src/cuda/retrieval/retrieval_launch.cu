// The CUDA backend of retrieval_topk: the choice of path, and the unfused path (the fused one is
// fused_retrieval_launch.cu): the corpus in chunks of plan.chunk_rows rows, each scored by cuBLAS
// into the workspace, selected, and merged exactly into a running top-k.
//
// 1. Carve the workspace: cuBLAS's, one chunk's [batch, chunk_rows] fp32 scores, an fp8 chunk
//    widened to the queries' dtype (above kRetrievalFp8DirectMaxBatch queries), the corpus norms
//    (l2 without corpus_norms) and the queries' (l2), the chunks' select workspace, and with
//    several chunks three [batch, k] lists (running, chunk, merged) and the merge's.
// 2. l2: the squared norms of the queries and, without corpus_norms, of the corpus
//    (launch_row_norms).
// 3. Per chunk: up to kRetrievalFp8DirectMaxBatch queries over an fp8 corpus, the scores straight
//    from its bytes, scales applied (launch_fp8_row_dots); else an fp8 chunk widened
//    (launch_widen_fp8, exact) and the dot products (chunk_scores); with fp8 scales (widened),
//    l2, ranges or a bitmap: launch_chunk_adjust (scale, -||q - c||^2, NaN for rows the query
//    may not select).
// 4. One chunk: select_topk_launch (plan.chunk_select) straight into the outputs.
// 5. Several: chunk 0 selected into the running list; chunk c > 0 into the chunk list, its
//    indices offset by the chunk's first row, then merge_topk's launcher over {running, chunk}
//    (ties to the smallest corpus row) into the merged list, copied back to the running list;
//    the last merge writes the outputs (sorted when asked).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "api/format.h"
#include "api/merge_backend.h"
#include "api/retrieval_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/retrieval/fused_retrieval.h"
#include "cuda/retrieval/retrieval_kernels.h"
#include "heuristics/retrieval_heuristics.h"

namespace litetopk::detail {

namespace {

struct Layout {
  void* blas = nullptr;
  float* scores = nullptr;       // [batch, chunk_rows]
  void* widened = nullptr;       // [chunk_rows, dim] of the queries' dtype, fp8 corpus only
  float* norms = nullptr;        // [n] when computed
  float* query_norms = nullptr;  // [batch], l2 only
  char* select = nullptr;
  float* list_values = nullptr;     // [3, batch, k]: running, chunk, merged
  int32_t* list_indices = nullptr;  // [3, batch, k]
  char* merge = nullptr;
  std::size_t bytes = 0;
};

bool is_l2(const RetrievalPlan& plan) { return plan.problem.metric == RetrievalMetric::kL2; }
bool is_fp8(const RetrievalPlan& plan) {
  return plan.problem.corpus_format == RetrievalCorpusFormat::kFp8E4M3;
}

int64_t chunk_width(const RetrievalPlan& plan, int64_t chunk) {
  return std::min(plan.chunk_rows, plan.problem.n - chunk * plan.chunk_rows);
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

// Carves the workspace of a launch of `plan` (sizes only when base is null).
Status carve(const RetrievalPlan& plan, void* base, Layout* layout) {
  const RetrievalProblem& p = plan.problem;
  cuda_common::WorkspaceCarver carver(base);
  *layout = Layout{};
  layout->blas = carver.take<char>(cuda_retrieval::kBlasWorkspaceBytes);
  layout->scores = carver.take<float>(static_cast<std::size_t>(p.batch * plan.chunk_rows));
  if (is_fp8(plan) && !fp8_corpus_scored_directly(p)) {
    layout->widened =
        carver.take<char>(static_cast<std::size_t>(plan.chunk_rows * p.dim) * dtype_size(p.dtype));
  }
  if (is_l2(plan)) {
    if (!plan.has_norms) layout->norms = carver.take<float>(static_cast<std::size_t>(p.n));
    layout->query_norms = carver.take<float>(static_cast<std::size_t>(p.batch));
  }
  layout->select = carver.take<char>(
      std::max(plan.chunk_select.workspace_bytes, plan.last_select.workspace_bytes));
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

// Selects a chunk's scores into `indices` / `values` with the chunk's select plan.
Status select_chunk(const RetrievalPlan& plan, int64_t chunk, const Layout& layout,
                    int32_t* indices, float* values, cudaStream_t stream) {
  const SelectPlan& select = chunk == plan.chunks - 1 ? plan.last_select : plan.chunk_select;
  SelectAddresses addresses;
  addresses.scores = layout.scores;
  addresses.indices = indices;
  addresses.values = values;
  return select_topk_launch(select, addresses, layout.select, stream);
}

}  // namespace

Status cuda_retrieval_plan(RetrievalPath requested, RetrievalPlan* plan) {
  if (Status status = cuda_retrieval::prepare_blas(&plan->device); !status) return status;
  const RetrievalProblem& p = plan->problem;
  plan->path = RetrievalPath::kUnfused;
  if (requested != RetrievalPath::kUnfused) {
    std::string why;
    if (Status status = cuda_retrieval::fused_retrieval_unsupported(p, &why); !status) {
      return status;
    }
    if (requested == RetrievalPath::kFused && !why.empty()) {
      return Status(StatusCode::kUnsupported, "options.path is fused, but " + why);
    }
    if (why.empty() && (requested == RetrievalPath::kFused ||
                        heuristics::retrieval_prefers_fused(p.batch, p.n, p.dim, p.k))) {
      plan->path = RetrievalPath::kFused;
    }
  }
  if (plan->chunks == 0) return Status::ok();
  if (plan->path == RetrievalPath::kFused) return cuda_retrieval::plan_fused_retrieval(plan);
  Layout layout;
  if (Status status = carve(*plan, nullptr, &layout); !status) return status;
  plan->workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_retrieval_corpus_norms(const RetrievalProblem& p, float* norms, cudaStream_t stream) {
  return cuda_retrieval::launch_row_norms(p.corpus, p.dtype, p.corpus_format, p.corpus_scales,
                                          p.n, p.dim, norms, stream);
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
    // An empty corpus: every slot is padding (no row is in any query's clamped range: NaN).
    LITETOPK_CUDA_TRY(cudaMemsetAsync(p.indices, 0xff, list * sizeof(int32_t), stream));
    if (p.scores == nullptr) return Status::ok();
    cuda_retrieval::ChunkAdjust padding;
    padding.batch = p.batch;
    padding.rows = p.k;
    return cuda_retrieval::launch_chunk_adjust(p.scores, padding, stream);
  }
  if (plan.path == RetrievalPath::kFused) {
    return cuda_retrieval::launch_fused_retrieval(plan, p, workspace, stream);
  }
  Layout layout;
  if (Status status = carve(plan, workspace, &layout); !status) return status;
  cuda_retrieval::ChunkAdjust adjust;
  adjust.batch = p.batch;
  adjust.n = p.n;
  const bool direct = fp8_corpus_scored_directly(p);
  adjust.scales = direct ? nullptr : p.corpus_scales;  // else the scores have them
  adjust.bitmap = p.corpus_bitmap;
  adjust.starts = p.range_starts;
  adjust.ends = p.range_ends;
  if (is_l2(plan)) {
    if (Status status = cuda_retrieval::launch_l2_norms(p, layout.norms, layout.query_norms,
                                                        &adjust.norms, stream);
        !status) {
      return status;
    }
    adjust.query_norms = layout.query_norms;
  }
  const bool adjusts = adjust.scales || adjust.norms || adjust.bitmap || adjust.starts ||
                       adjust.ends;
  const std::size_t row_bytes =
      static_cast<std::size_t>(p.dim) * (is_fp8(plan) ? 1 : dtype_size(p.dtype));
  for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const int64_t first = chunk * plan.chunk_rows;
    const int64_t width = chunk_width(plan, chunk);
    const void* rows = static_cast<const char*>(p.corpus) + static_cast<std::size_t>(first) * row_bytes;
    if (direct) {
      if (Status status = cuda_retrieval::launch_fp8_row_dots(
              p.queries, p.dtype, p.batch, static_cast<const uint8_t*>(rows),
              p.corpus_scales != nullptr ? p.corpus_scales + first : nullptr, width, p.dim,
              layout.scores, stream);
          !status) {
        return status;
      }
    } else {
      if (is_fp8(plan)) {
        if (Status status = cuda_retrieval::launch_widen_fp8(static_cast<const uint8_t*>(rows),
                                                             width * p.dim, p.dtype,
                                                             layout.widened, stream);
            !status) {
          return status;
        }
        rows = layout.widened;
      }
      if (Status status = cuda_retrieval::chunk_scores(p.queries, rows, p.dtype, p.batch, width,
                                                       p.dim, layout.scores, layout.blas,
                                                       stream);
          !status) {
        return status;
      }
    }
    if (adjusts) {
      adjust.rows = width;
      adjust.first_row = first;
      if (Status status = cuda_retrieval::launch_chunk_adjust(layout.scores, adjust, stream);
          !status) {
        return status;
      }
    }
    if (plan.chunks == 1) return select_chunk(plan, chunk, layout, p.indices, p.scores, stream);
    const std::size_t slot = chunk == 0 ? 0 : list;  // running list, or chunk list
    if (Status status = select_chunk(plan, chunk, layout, layout.list_indices + slot,
                                     layout.list_values + slot, stream);
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
