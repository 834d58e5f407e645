// Public GPU entry points of retrieval_topk: the plan (validate sizes, choose the chunking, size
// the workspace), the launch (check addresses, launch), and the one-shot calls over both.
#include <algorithm>
#include <cstring>

#include "api/format.h"
#include "api/retrieval_backend.h"
#include "api/retrieval_validation.h"
#include "api/workspace.h"
#include "litetopk/retrieval.h"

namespace litetopk {

namespace {

// Corpus rows per chunk: the caller's choice, else as many as keep a chunk's [batch, rows] fp32
// scores within kRetrievalChunkScoreBytes (a multiple of 256 rows, at least 256), at most n.
int64_t choose_chunk_rows(const RetrievalProblem& p, const RetrievalOptions& options) {
  if (p.n == 0) return 0;
  if (options.chunk_rows > 0) return std::min(options.chunk_rows, p.n);
  const int64_t by_bytes =
      static_cast<int64_t>(kRetrievalChunkScoreBytes / (sizeof(float) * std::max<int64_t>(p.batch, 1)));
  return std::min(std::max<int64_t>(by_bytes / 256 * 256, 256), p.n);
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
  if (options.chunk_rows < 0) {
    return detail::invalid_argument("options.chunk_rows must be >= 0 (0: auto), got ",
                                    options.chunk_rows);
  }
  RetrievalPlan planned{};
  planned.problem = problem;
  planned.problem.queries = nullptr;
  planned.problem.corpus = nullptr;
  planned.problem.corpus_norms = nullptr;
  planned.problem.range_starts = nullptr;
  planned.problem.range_ends = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.scores = nullptr;
  planned.chunk_rows = choose_chunk_rows(problem, options);
  planned.chunks = planned.chunk_rows > 0 ? (problem.n + planned.chunk_rows - 1) / planned.chunk_rows : 0;
  planned.has_norms = problem.corpus_norms != nullptr;
  planned.has_range_starts = problem.range_starts != nullptr;
  planned.has_range_ends = problem.range_ends != nullptr;
  planned.has_scores = problem.scores != nullptr;
  if (Status status = detail::cuda_retrieval_plan(&planned); !status) return status;
  planned.planned = true;
  *plan = planned;
  return Status::ok();
}

Status retrieval_topk_launch(const RetrievalPlan& plan, const RetrievalAddresses& addresses,
                             void* workspace, cudaStream_t stream) {
  if (!plan.planned) return detail::invalid_argument("plan was not made by retrieval_topk_plan");
  RetrievalProblem problem = plan.problem;
  problem.queries = addresses.queries;
  problem.corpus = addresses.corpus;
  problem.corpus_norms = plan.has_norms ? addresses.corpus_norms : nullptr;
  problem.range_starts = plan.has_range_starts ? addresses.range_starts : nullptr;
  problem.range_ends = plan.has_range_ends ? addresses.range_ends : nullptr;
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
  const RetrievalAddresses addresses{problem.queries,      problem.corpus,     problem.corpus_norms,
                                     problem.range_starts, problem.range_ends, problem.indices,
                                     problem.scores};
  return retrieval_topk_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
