// Public GPU entry points of indexer_topk: the plan (sizes and options checked, the algorithm
// resolved, the workspace sized), the launch (addresses checked), the one-shot calls over both.
#include <cstdint>
#include <cstring>

#include "api/format.h"
#include "formats/hot_sample_layout.h"
#include "api/indexer_backend.h"
#include "api/indexer_validation.h"
#include "api/workspace.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {

const char* indexer_algo_name(IndexerAlgo algo) {
  switch (algo) {
    case IndexerAlgo::kAuto: return "auto";
    case IndexerAlgo::kUnfused: return "unfused";
    case IndexerAlgo::kFused: return "fused";
  }
  return "invalid";
}

bool parse_indexer_algo(const char* name, IndexerAlgo* algo) {
  for (IndexerAlgo a : {IndexerAlgo::kAuto, IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    if (std::strcmp(name, indexer_algo_name(a)) == 0) {
      *algo = a;
      return true;
    }
  }
  return false;
}

std::size_t indexer_state_bytes(int64_t k) { return hot_sample::state_bytes(k); }

Status indexer_state_reset(const IndexerState& state, cudaStream_t stream) {
  if (state.data == nullptr && state.bytes > 0) {
    return detail::invalid_argument("state.data is null but state.bytes is ", state.bytes);
  }
  return detail::cuda_memset_async(state.data, state.bytes, stream);
}

IndexerAlgo indexer_topk_dispatch(const IndexerProblem& problem) {
  return heuristics::choose_indexer_algo(problem);
}

namespace {

Status check_options(const IndexerOptions& options) {
  if (options.candidate_capacity < 0) {
    return detail::invalid_argument("options.candidate_capacity must be >= 0, got ",
                                    options.candidate_capacity);
  }
  if (options.cold_sample_tiles < 0 || options.cold_sample_tiles > (1 << 20)) {
    return detail::invalid_argument("options.cold_sample_tiles must be in [0, 2^20] (0: the "
                                    "cost model's count), got ",
                                    options.cold_sample_tiles);
  }
  if (options.state != nullptr && options.state->data == nullptr && options.state->bytes > 0) {
    return detail::invalid_argument("options.state->data is null");
  }
  return Status::ok();
}

// The state, when one is given, must hold this k's hot sample.
Status check_state(const IndexerProblem& problem, const IndexerOptions& options) {
  if (options.state == nullptr || options.state->data == nullptr) return Status::ok();
  const std::size_t needed = indexer_state_bytes(problem.k);
  if (options.state->bytes < needed) {
    return detail::invalid_argument("options.state->bytes must be >= indexer_state_bytes(k = ",
                                    problem.k, ") = ", needed, ", got ", options.state->bytes);
  }
  if (reinterpret_cast<std::uintptr_t>(options.state->data) % alignof(int32_t) != 0) {
    return detail::invalid_argument("options.state->data must be 4-byte aligned");
  }
  return Status::ok();
}

}  // namespace

Status indexer_topk_plan(const IndexerProblem& problem, const IndexerOptions& options,
                         IndexerPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = IndexerPlan{};
  if (Status s = validate_indexer_sizes(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  if (Status s = check_state(problem, options); !s) return s;
  IndexerAlgo algo;
  if (Status s = resolve_indexer_algo(options.algo, [&] { return indexer_topk_dispatch(problem); },
                                      &algo);
      !s) {
    return s;
  }
  IndexerPlan planned{};
  planned.algo = algo;
  planned.candidate_capacity = options.candidate_capacity;
  planned.cold_sample = options.cold_sample;
  planned.cold_sample_tiles = options.cold_sample_tiles;
  planned.has_state = options.state != nullptr && options.state->data != nullptr;
  planned.has_values = problem.values != nullptr;
  // The size depends on whether there is a state (the hot-sample writer's part), not on where.
  if (Status s = detail::cuda_indexer_workspace_size(problem, algo, options,
                                                     &planned.workspace_bytes);
      !s) {
    return s;
  }
  planned.problem = problem;
  planned.problem.q = nullptr;
  planned.problem.kv = nullptr;
  planned.problem.kv_scale = nullptr;
  planned.problem.weights = nullptr;
  planned.problem.ks = nullptr;
  planned.problem.ke = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.values = nullptr;
  *plan = planned;
  return Status::ok();
}

Status indexer_topk_launch(const IndexerPlan& plan, const IndexerAddresses& addresses,
                           void* workspace, cudaStream_t stream) {
  if (plan.algo == IndexerAlgo::kAuto) {
    return detail::invalid_argument("plan was not made by indexer_topk_plan (its algo is auto)");
  }
  IndexerProblem problem = plan.problem;
  problem.q = addresses.q;
  problem.kv = addresses.kv;
  problem.kv_scale = addresses.kv_scale;
  problem.weights = addresses.weights;
  problem.ks = addresses.ks;
  problem.ke = addresses.ke;
  problem.indices = addresses.indices;
  problem.values = plan.has_values ? addresses.values : nullptr;
  if (Status s = validate_indexer_addresses(problem); !s) return s;
  if (plan.has_values && problem.values == nullptr && problem.num_queries > 0) {
    return detail::invalid_argument("values must not be null: the plan writes values");
  }
  IndexerOptions options;
  options.algo = plan.algo;
  options.candidate_capacity = plan.candidate_capacity;
  options.cold_sample = plan.cold_sample;
  options.cold_sample_tiles = plan.cold_sample_tiles;
  options.candidate_counters = addresses.candidate_counters;
  if (plan.has_state) {
    if (addresses.state.data == nullptr) {
      return detail::invalid_argument("state.data must not be null: the plan has a state");
    }
    options.state = &addresses.state;
    if (Status s = check_state(problem, options); !s) return s;
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (problem.num_queries == 0) return Status::ok();
  return detail::cuda_indexer_topk(problem, plan.algo, options, workspace, plan.workspace_bytes,
                                   stream);
}

Status indexer_topk_workspace_size(const IndexerProblem& problem, std::size_t* workspace_bytes,
                                   const IndexerOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_indexer_problem(problem); !s) return s;
  IndexerPlan plan{};
  if (Status s = indexer_topk_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status indexer_topk(const IndexerProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const IndexerOptions& options) {
  if (Status s = validate_indexer_problem(problem); !s) return s;
  IndexerPlan plan{};
  if (Status s = indexer_topk_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  IndexerAddresses addresses;
  addresses.q = problem.q;
  addresses.kv = problem.kv;
  addresses.kv_scale = problem.kv_scale;
  addresses.weights = problem.weights;
  addresses.ks = problem.ks;
  addresses.ke = problem.ke;
  addresses.indices = problem.indices;
  addresses.values = problem.values;
  if (plan.has_state) addresses.state = *options.state;
  addresses.candidate_counters = options.candidate_counters;
  return indexer_topk_launch(plan, addresses, workspace, stream);
}

Status indexer_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                      cudaStream_t stream) {
  if (Status s = validate_indexer_inputs(problem); !s) return s;
  if (Status s = validate_indexer_logits_output(problem, logits, logits_stride); !s) return s;
  return detail::cuda_indexer_logits(problem, logits, logits_stride, stream);
}

}  // namespace litetopk
