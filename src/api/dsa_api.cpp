// Public GPU entry points of dsa_prefill: the plan (both halves planned, one workspace laid out),
// the launch (the indexer, the kv-row kernel, the attention on one stream) and the one-shot calls
// over both.
#include <cstdint>

#include "api/dsa_backend.h"
#include "api/dsa_halves.h"
#include "api/dsa_validation.h"
#include "api/format.h"
#include "api/workspace.h"
#include "cuda/common/workspace_carver.h"
#include "litetopk/dsa.h"

namespace litetopk {

namespace {

// The parts of one launch's workspace: [the indexer's][the indices][the attention's].
struct DsaWorkspace {
  void* indexer = nullptr;
  int32_t* indices = nullptr;  // null when the plan writes the caller's
  void* attention = nullptr;
  std::size_t bytes = 0;
};

// Carves `base` for `plan`'s halves (only counts bytes when base is null).
DsaWorkspace lay_out(const DsaPrefillPlan& plan, void* base) {
  cuda_common::WorkspaceCarver carver(base);
  DsaWorkspace parts;
  parts.indexer = carver.take<unsigned char>(plan.indexer.workspace_bytes);
  if (!plan.has_indices) {
    parts.indices = carver.take<int32_t>(
        static_cast<std::size_t>(plan.problem.num_queries * plan.problem.k));
  }
  parts.attention = carver.take<unsigned char>(plan.attention.workspace_bytes);
  parts.bytes = carver.bytes();
  return parts;
}

// The problem's pointers, all null (a plan keeps only the sizes).
DsaPrefillProblem sizes_of(DsaPrefillProblem p) {
  p.index_q = p.index_kv = nullptr;
  p.index_kv_scale = p.index_weights = nullptr;
  p.ks = p.ke = nullptr;
  p.q = p.kv = nullptr;
  p.out = nullptr;
  p.max_logits = p.lse = nullptr;
  p.indices = nullptr;
  return p;
}

}  // namespace

Status dsa_prefill_plan(const DsaPrefillProblem& problem, const DsaPrefillOptions& options,
                        DsaPrefillPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = DsaPrefillPlan{};
  if (Status s = detail::validate_dsa_prefill_sizes(problem, options.attention_algo); !s) {
    return s;
  }
  DsaPrefillPlan planned{};
  if (Status s = detail::dsa_indexer_status(indexer_topk_plan(
          detail::dsa_indexer_half(problem, nullptr), options.indexer, &planned.indexer));
      !s) {
    return s;
  }
  if (Status s = detail::dsa_attention_status(sparse_attention_plan(
          detail::dsa_attention_half(problem, nullptr, options.attention_algo),
          &planned.attention));
      !s) {
    return s;
  }
  planned.problem = sizes_of(problem);
  planned.has_indices = problem.indices != nullptr;
  planned.workspace_bytes = lay_out(planned, nullptr).bytes;
  *plan = planned;
  return Status::ok();
}

Status dsa_prefill_launch(const DsaPrefillPlan& plan, const DsaPrefillAddresses& addresses,
                          void* workspace, cudaStream_t stream) {
  if (plan.indexer.algo == IndexerAlgo::kAuto ||
      plan.attention.algo == SparseAttentionAlgo::kAuto) {
    return detail::invalid_argument("plan was not made by dsa_prefill_plan (its algo is auto)");
  }
  DsaPrefillProblem p = plan.problem;
  p.index_q = addresses.index_q;
  p.index_kv = addresses.index_kv;
  p.index_kv_scale = addresses.index_kv_scale;
  p.index_weights = addresses.index_weights;
  p.ks = addresses.ks;
  p.ke = addresses.ke;
  p.q = addresses.q;
  p.kv = addresses.kv;
  p.out = addresses.out;
  p.max_logits = addresses.max_logits;
  p.lse = addresses.lse;
  p.indices = plan.has_indices ? addresses.indices : nullptr;
  if (Status s = detail::validate_dsa_prefill_addresses(p); !s) return s;
  if (p.num_queries == 0) return Status::ok();
  if (plan.has_indices && p.indices == nullptr) {
    return detail::invalid_argument("indices must not be null: the plan writes indices");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  const DsaWorkspace parts = lay_out(plan, workspace);
  int32_t* rows = plan.has_indices ? p.indices : parts.indices;

  IndexerAddresses indexer;
  indexer.q = p.index_q;
  indexer.kv = p.index_kv;
  indexer.kv_scale = p.index_kv_scale;
  indexer.weights = p.index_weights;
  indexer.ks = p.ks;
  indexer.ke = p.ke;
  indexer.indices = rows;
  indexer.state = addresses.state;
  indexer.candidate_counters = addresses.candidate_counters;
  if (Status s = detail::dsa_indexer_status(
          indexer_topk_launch(plan.indexer, indexer, parts.indexer, stream));
      !s) {
    return s;
  }
  if (Status s = detail::cuda_dsa_kv_rows(p.ks, rows, p.num_queries, p.k, p.num_keys, stream);
      !s) {
    return s;
  }
  const SparseAttentionAddresses attention{p.q, p.kv, rows, p.out, p.max_logits, p.lse};
  return detail::dsa_attention_status(
      sparse_attention_launch(plan.attention, attention, parts.attention, stream));
}

Status dsa_prefill_workspace_size(const DsaPrefillProblem& problem, std::size_t* workspace_bytes,
                                  const DsaPrefillOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_dsa_prefill_problem(problem); !s) return s;
  DsaPrefillPlan plan{};
  if (Status s = dsa_prefill_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status dsa_prefill(const DsaPrefillProblem& problem, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream, const DsaPrefillOptions& options) {
  if (Status s = validate_dsa_prefill_problem(problem); !s) return s;
  DsaPrefillPlan plan{};
  if (Status s = dsa_prefill_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  DsaPrefillAddresses addresses;
  addresses.index_q = problem.index_q;
  addresses.index_kv = problem.index_kv;
  addresses.index_kv_scale = problem.index_kv_scale;
  addresses.index_weights = problem.index_weights;
  addresses.ks = problem.ks;
  addresses.ke = problem.ke;
  addresses.q = problem.q;
  addresses.kv = problem.kv;
  addresses.out = problem.out;
  addresses.max_logits = problem.max_logits;
  addresses.lse = problem.lse;
  addresses.indices = problem.indices;
  if (options.indexer.state != nullptr) addresses.state = *options.indexer.state;
  addresses.candidate_counters = options.indexer.candidate_counters;
  return dsa_prefill_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
