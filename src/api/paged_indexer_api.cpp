// Public GPU entry points of indexer_topk_paged: the plan (sizes and the decode state checked,
// the algorithm resolved, the workspace sized by max_context), the launch (addresses checked),
// the one-shot calls.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/paged_indexer_backend.h"
#include "api/indexer_validation.h"
#include "api/paged_indexer_validation.h"
#include "api/workspace.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {

IndexerAlgo indexer_topk_paged_dispatch(const PagedIndexerProblem& problem,
                                        const IndexerOptions& options) {
  const bool has_state = options.state != nullptr && options.state->data != nullptr;
  return heuristics::choose_paged_indexer_algo(problem, has_state);
}

std::size_t paged_indexer_state_bytes(int64_t batch, int64_t next_n, int64_t k) {
  if (batch <= 0 || next_n <= 0 || k <= 0) return 0;
  if (!detail::product_fits(batch, next_n, k) ||
      !detail::product_fits(batch * next_n * k, sizeof(int32_t))) {
    return std::numeric_limits<std::size_t>::max();
  }
  return static_cast<std::size_t>(batch * next_n * k) * sizeof(int32_t);
}

namespace {

// The decode state, when one is given, must hold this batch's rows of k positions.
Status check_paged_state(const PagedIndexerProblem& problem, const IndexerState& state,
                         const char* name) {
  if (state.data == nullptr) {
    return detail::invalid_argument(name, ".data must not be null");
  }
  const std::size_t needed = paged_indexer_state_bytes(problem.batch, problem.next_n, problem.k);
  if (needed == std::numeric_limits<std::size_t>::max()) {
    return detail::invalid_argument(name, ": batch * next_n * k * 4 bytes overflows int64: batch ",
                                    problem.batch, ", next_n ", problem.next_n, ", k ", problem.k);
  }
  if (state.bytes < needed) {
    return detail::invalid_argument(name, ".bytes must be >= paged_indexer_state_bytes(batch = ",
                                    problem.batch, ", next_n = ", problem.next_n, ", k = ",
                                    problem.k, ") = ", needed, ", got ", state.bytes);
  }
  if (reinterpret_cast<std::uintptr_t>(state.data) % alignof(int32_t) != 0) {
    return detail::invalid_argument(name, ".data must be 4-byte aligned");
  }
  return Status::ok();
}

// Whether the gated path (fused with a state) can take the problem: k within the state's limit
// and every cache row addressable as an int32 (66 rows of 128 bytes per block).
Status check_gated_limits(const PagedIndexerProblem& problem) {
  if (problem.k > kPagedDecodeStateMaxK) {
    return Status(StatusCode::kUnsupported,
                  detail::concat("the fused paged indexer with a decode state needs k <= ",
                                 kPagedDecodeStateMaxK, ", got ", problem.k,
                                 ": use algo unfused (or auto), or no state"));
  }
  constexpr int64_t kRowsPerBlock = 66;
  if (problem.num_blocks > detail::kMaxInt32 / kRowsPerBlock) {
    return Status(StatusCode::kUnsupported,
                  detail::concat("the fused paged indexer with a decode state needs num_blocks <= ",
                                 detail::kMaxInt32 / kRowsPerBlock, ", got ", problem.num_blocks,
                                 ": use algo unfused (or auto), or no state"));
  }
  return Status::ok();
}

bool gated(const PagedIndexerPlan& plan) {
  return plan.has_state && plan.algo == IndexerAlgo::kFused;
}

}  // namespace

Status indexer_topk_paged_plan(const PagedIndexerProblem& problem, const IndexerOptions& options,
                               PagedIndexerPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = PagedIndexerPlan{};
  if (Status s = validate_paged_indexer_sizes(problem); !s) return s;
  PagedIndexerPlan planned{};
  planned.has_state = options.state != nullptr && options.state->data != nullptr;
  if (options.state != nullptr && options.state->data == nullptr && options.state->bytes > 0) {
    return detail::invalid_argument("options.state->data is null");
  }
  if (planned.has_state) {
    if (Status s = check_paged_state(problem, *options.state, "options.state"); !s) return s;
  }
  if (Status s = resolve_indexer_algo(
          options.algo, [&] { return indexer_topk_paged_dispatch(problem, options); },
          &planned.algo);
      !s) {
    return s;
  }
  if (options.algo == IndexerAlgo::kAuto && planned.algo == IndexerAlgo::kFused) {
    // The fused grid must be resident at once: a device with too few SMs or too little shared
    // memory for the shape runs unfused.
    bool fits = false;
    if (Status s = detail::cuda_paged_fused_fits(problem, &fits); !s) return s;
    if (!fits) planned.algo = IndexerAlgo::kUnfused;
  }
  if (gated(planned)) {
    if (Status s = check_gated_limits(problem); !s) return s;
  }
  const Status sized =
      gated(planned) && problem.max_context > 0
          ? detail::cuda_paged_decode_workspace_size(problem, &planned.workspace_bytes)
          : detail::cuda_paged_indexer_workspace_size(problem, planned.algo,
                                                      &planned.workspace_bytes);
  if (!sized) return sized;
  planned.has_values = problem.values != nullptr;
  planned.problem = problem;
  planned.problem.q = nullptr;
  planned.problem.kv_cache = nullptr;
  planned.problem.weights = nullptr;
  planned.problem.context_lens = nullptr;
  planned.problem.block_table = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.values = nullptr;
  *plan = planned;
  return Status::ok();
}

Status indexer_topk_paged_launch(const PagedIndexerPlan& plan,
                                 const PagedIndexerAddresses& addresses, void* workspace,
                                 cudaStream_t stream) {
  if (plan.algo == IndexerAlgo::kAuto) {
    return detail::invalid_argument(
        "plan was not made by indexer_topk_paged_plan (its algo is auto)");
  }
  PagedIndexerProblem problem = plan.problem;
  problem.q = addresses.q;
  problem.kv_cache = addresses.kv_cache;
  problem.weights = addresses.weights;
  problem.context_lens = addresses.context_lens;
  problem.block_table = addresses.block_table;
  problem.indices = addresses.indices;
  problem.values = plan.has_values ? addresses.values : nullptr;
  if (Status s = validate_paged_indexer_addresses(problem); !s) return s;
  if (plan.has_values && problem.values == nullptr && problem.batch > 0) {
    return detail::invalid_argument("values must not be null: the plan writes values");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (plan.has_state) {
    if (Status s = check_paged_state(problem, addresses.state, "state"); !s) return s;
  }
  if (problem.batch == 0) return Status::ok();
  if (gated(plan) && problem.max_context > 0) {
    return detail::cuda_paged_decode_topk(problem, addresses.state.data, workspace, stream);
  }
  return detail::cuda_paged_indexer_topk(problem, plan.algo, workspace, stream);
}

Status indexer_topk_paged_workspace_size(const PagedIndexerProblem& problem,
                                         std::size_t* workspace_bytes,
                                         const IndexerOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  PagedIndexerPlan plan{};
  if (Status s = indexer_topk_paged_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status indexer_topk_paged(const PagedIndexerProblem& problem, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream,
                          const IndexerOptions& options) {
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  PagedIndexerPlan plan{};
  if (Status s = indexer_topk_paged_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  PagedIndexerAddresses addresses{problem.q,       problem.kv_cache,    problem.weights,
                                  problem.context_lens, problem.block_table,
                                  problem.indices, problem.values};
  if (plan.has_state) addresses.state = *options.state;
  return indexer_topk_paged_launch(plan, addresses, workspace, stream);
}

Status indexer_logits_paged(const PagedIndexerProblem& problem, float* logits,
                            int64_t logits_stride, cudaStream_t stream) {
  if (Status s = validate_paged_indexer_inputs(problem); !s) return s;
  if (Status s = validate_paged_indexer_logits_output(problem, logits, logits_stride); !s) {
    return s;
  }
  if (problem.batch == 0 || problem.max_context == 0) return Status::ok();
  return detail::cuda_paged_indexer_logits(problem, logits, logits_stride, stream);
}

}  // namespace litetopk
