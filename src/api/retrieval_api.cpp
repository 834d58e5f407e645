// Public GPU entry points of retrieval_topk: the plan (validate sizes, choose the chunking, plan
// the chunks' selections, size the workspace), the launch (check addresses, launch), the one-shot
// calls over both, and the corpus norms.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "api/format.h"
#include "api/retrieval_backend.h"
#include "api/retrieval_validation.h"
#include "api/workspace.h"
#include "litetopk/retrieval.h"

namespace litetopk {

namespace {

// Corpus rows per chunk: the caller's choice, else as many as keep a chunk's [batch, rows] fp32
// scores within kRetrievalChunkScoreBytes and an fp8 chunk widened to the queries' dtype (above
// kRetrievalFp8DirectMaxBatch queries) within kRetrievalChunkWidenBytes (a multiple of 256 rows,
// at least 256), at most n.
int64_t choose_chunk_rows(const RetrievalProblem& p, const RetrievalOptions& options) {
  if (p.n == 0) return 0;
  if (options.chunk_rows > 0) return std::min(options.chunk_rows, p.n);
  int64_t by_bytes =
      static_cast<int64_t>(kRetrievalChunkScoreBytes / (sizeof(float) * std::max<int64_t>(p.batch, 1)));
  if (p.corpus_format == RetrievalCorpusFormat::kFp8E4M3 &&
      !detail::fp8_corpus_scored_directly(p)) {
    const std::size_t widened_row = static_cast<std::size_t>(p.dim) * dtype_size(p.dtype);
    by_bytes = std::min(by_bytes, static_cast<int64_t>(kRetrievalChunkWidenBytes / widened_row));
  }
  return std::min(std::max<int64_t>(by_bytes / 256 * 256, 256), p.n);
}

// The public select plan of one chunk of `width` rows: unsorted into the running lists when there
// are several chunks (which always keep the scores), else the caller's flags into its outputs.
Status plan_chunk_select(const RetrievalPlan& plan, int64_t width, SelectPlan* select) {
  // select_topk_plan keeps only whether the values pointer is null.
  static float values_marker = 0.0f;
  SelectProblem s;
  s.dtype = DType::kFloat32;
  s.batch = plan.problem.batch;
  s.n = width;
  s.k = plan.problem.k;
  s.sorted = plan.chunks == 1 && plan.problem.sorted;
  s.deterministic = plan.problem.deterministic;
  s.values = plan.chunks > 1 || plan.has_scores ? &values_marker : nullptr;
  return select_topk_plan(s, SelectOptions{}, select);
}

}  // namespace

const char* retrieval_metric_name(RetrievalMetric metric) {
  switch (metric) {
    case RetrievalMetric::kInnerProduct: return "ip";
    case RetrievalMetric::kCosine: return "cosine";
    case RetrievalMetric::kL2: return "l2";
  }
  return "invalid";
}

const char* retrieval_path_name(RetrievalPath path) {
  switch (path) {
    case RetrievalPath::kAuto: return "auto";
    case RetrievalPath::kUnfused: return "unfused";
    case RetrievalPath::kFused: return "fused";
  }
  return "invalid";
}

bool parse_retrieval_path(const char* name, RetrievalPath* path) {
  for (RetrievalPath p : {RetrievalPath::kAuto, RetrievalPath::kUnfused, RetrievalPath::kFused}) {
    if (std::strcmp(name, retrieval_path_name(p)) == 0) {
      *path = p;
      return true;
    }
  }
  return false;
}

bool parse_retrieval_metric(const char* name, RetrievalMetric* metric) {
  if (std::strcmp(name, "ip") == 0 || std::strcmp(name, "inner_product") == 0) {
    *metric = RetrievalMetric::kInnerProduct;
  } else if (std::strcmp(name, "cosine") == 0) {
    *metric = RetrievalMetric::kCosine;
  } else if (std::strcmp(name, "l2") == 0) {
    *metric = RetrievalMetric::kL2;
  } else {
    return false;
  }
  return true;
}

Status retrieval_topk_plan(const RetrievalProblem& problem, const RetrievalOptions& options,
                           RetrievalPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = RetrievalPlan{};
  if (Status status = detail::validate_retrieval_sizes(problem); !status) return status;
  if (std::strcmp(retrieval_path_name(options.path), "invalid") == 0) {
    return detail::invalid_argument("options.path must be auto, unfused or fused, got ",
                                    static_cast<int>(options.path));
  }
  if (options.chunk_rows < 0) {
    return detail::invalid_argument("options.chunk_rows must be >= 0 (0: auto), got ",
                                    options.chunk_rows);
  }
  RetrievalPlan planned{};
  planned.problem = problem;
  planned.problem.queries = nullptr;
  planned.problem.corpus = nullptr;
  planned.problem.corpus_scales = nullptr;
  planned.problem.corpus_norms = nullptr;
  planned.problem.range_starts = nullptr;
  planned.problem.range_ends = nullptr;
  planned.problem.corpus_bitmap = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.scores = nullptr;
  planned.chunk_rows = choose_chunk_rows(problem, options);
  planned.chunks = planned.chunk_rows > 0 ? (problem.n + planned.chunk_rows - 1) / planned.chunk_rows : 0;
  planned.has_norms = problem.corpus_norms != nullptr;
  planned.has_range_starts = problem.range_starts != nullptr;
  planned.has_range_ends = problem.range_ends != nullptr;
  planned.has_bitmap = problem.corpus_bitmap != nullptr;
  planned.has_scores = problem.scores != nullptr;
  if (planned.chunks > 0 && problem.batch > 0) {  // a launch without queries selects nothing
    const int64_t last = problem.n - (planned.chunks - 1) * planned.chunk_rows;
    if (Status s = plan_chunk_select(planned, planned.chunk_rows, &planned.chunk_select); !s) {
      return s;
    }
    if (Status s = plan_chunk_select(planned, last, &planned.last_select); !s) return s;
  }
  if (Status status = detail::cuda_retrieval_plan(options.path, &planned); !status) return status;
  planned.planned = true;
  *plan = planned;
  return Status::ok();
}

Status retrieval_topk_launch(const RetrievalPlan& plan, const RetrievalAddresses& addresses,
                             void* workspace, cudaStream_t stream) {
  if (!plan.planned) return detail::invalid_argument("plan was not made by retrieval_topk_plan");
  RetrievalProblem problem = plan.problem;
  const bool fp8 = plan.problem.corpus_format == RetrievalCorpusFormat::kFp8E4M3;
  problem.queries = addresses.queries;
  problem.corpus = addresses.corpus;
  problem.corpus_scales = fp8 ? addresses.corpus_scales : nullptr;
  problem.corpus_norms = plan.has_norms ? addresses.corpus_norms : nullptr;
  problem.range_starts = plan.has_range_starts ? addresses.range_starts : nullptr;
  problem.range_ends = plan.has_range_ends ? addresses.range_ends : nullptr;
  problem.corpus_bitmap = plan.has_bitmap ? addresses.corpus_bitmap : nullptr;
  problem.indices = addresses.indices;
  problem.scores = plan.has_scores ? addresses.scores : nullptr;
  if (Status status = detail::validate_retrieval_addresses(problem); !status) return status;
  if (plan.has_norms && problem.corpus_norms == nullptr) {
    return detail::invalid_argument("corpus_norms must not be null: the plan reads norms");
  }
  if ((plan.has_range_starts && problem.range_starts == nullptr) ||
      (plan.has_range_ends && problem.range_ends == nullptr)) {
    return detail::invalid_argument("range_starts and range_ends must be set as when planned");
  }
  if (plan.has_bitmap && problem.corpus_bitmap == nullptr) {
    return detail::invalid_argument("corpus_bitmap must not be null: the plan reads a bitmap");
  }
  if (plan.has_scores && problem.scores == nullptr) {
    return detail::invalid_argument("scores must not be null: the plan writes scores");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_retrieval_launch(plan, problem, workspace, stream);
}

Status retrieval_topk_workspace_size(const RetrievalProblem& problem,
                                     std::size_t* workspace_bytes,
                                     const RetrievalOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status status = validate_retrieval_problem(problem); !status) return status;
  RetrievalPlan plan{};
  if (Status status = retrieval_topk_plan(problem, options, &plan); !status) return status;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status retrieval_topk(const RetrievalProblem& problem, void* workspace,
                      std::size_t workspace_bytes, cudaStream_t stream,
                      const RetrievalOptions& options) {
  if (Status status = validate_retrieval_problem(problem); !status) return status;
  RetrievalPlan plan{};
  if (Status status = retrieval_topk_plan(problem, options, &plan); !status) return status;
  if (Status status = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes);
      !status) {
    return status;
  }
  return retrieval_topk_launch(plan, retrieval_addresses(problem), workspace, stream);
}

RetrievalAddresses retrieval_addresses(const RetrievalProblem& p) {
  RetrievalAddresses a;
  a.queries = p.queries;
  a.corpus = p.corpus;
  a.corpus_scales = p.corpus_scales;
  a.corpus_norms = p.corpus_norms;
  a.range_starts = p.range_starts;
  a.range_ends = p.range_ends;
  a.corpus_bitmap = p.corpus_bitmap;
  a.indices = p.indices;
  a.scores = p.scores;
  return a;
}

Status retrieval_corpus_norms(const RetrievalProblem& problem, float* norms, cudaStream_t stream) {
  if (Status status = detail::validate_retrieval_corpus(problem); !status) return status;
  if (problem.n > 0 && norms == nullptr) return detail::invalid_argument("norms must not be null");
  if (reinterpret_cast<std::uintptr_t>(norms) % alignof(float) != 0) {
    return detail::invalid_argument("norms must be 4-byte aligned");
  }
  if (problem.n == 0) return Status::ok();
  return detail::cuda_retrieval_corpus_norms(problem, norms, stream);
}

}  // namespace litetopk
