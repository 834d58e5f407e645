// Public GPU entry points of sparse and dense decoding: the cache writers (validate, launch), the
// decodes' plans (shapes checked, split plan and workspace sized) and launches (addresses
// checked), and the one-shot decodes over both; the CUDA backend is api/decode_backend.h.
#include "api/decode_backend.h"
#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "api/workspace.h"
#include "heuristics/decode_heuristics.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

Status check_options(const DecodeOptions& options) {
  if (options.blocks_per_split < 0) {
    return detail::invalid_argument("options.blocks_per_split must be >= 0 (0: the kernel "
                                    "chooses), got ",
                                    options.blocks_per_split);
  }
  return Status::ok();
}

Status check_size_out(const std::size_t* workspace_bytes) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes must not be null");
  return Status::ok();
}

}  // namespace

Status sparse_kv_append(const SparseKvCache& cache, const void* new_keys, const void* new_values,
                        cudaStream_t stream) {
  if (Status s = validate_sparse_kv_cache(cache); !s) return s;
  if (new_keys == nullptr) return detail::invalid_argument("new_keys must not be null");
  if (new_values == nullptr) return detail::invalid_argument("new_values must not be null");
  return detail::cuda_sparse_kv_append(cache, new_keys, new_values, stream);
}

Status sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                            cudaStream_t stream) {
  if (Status s = validate_dense_kv_cache(dense); !s) return s;
  if (Status s = validate_sparse_kv_cache(cache); !s) return s;
  if (Status s = detail::validate_dense_matches_sparse(dense, cache, "dense"); !s) return s;
  if (dense.capacity > cache.max_blocks * cache.block_size) {
    return detail::invalid_argument("dense.capacity must be <= cache.max_blocks * block_size (",
                                    cache.max_blocks * cache.block_size, "), got ",
                                    dense.capacity);
  }
  return detail::cuda_sparse_kv_from_dense(dense, cache, stream);
}

namespace {

// A sparse cache's shapes with this launch's arrays.
SparseKvCache sparse_cache_at(const SparseKvCache& shapes, const SparseDecodeAddresses& a,
                              bool paged) {
  SparseKvCache cache = shapes;
  cache.block_table = paged ? a.block_table : nullptr;
  cache.lengths = a.lengths;
  cache.key_codes = a.key_codes;
  cache.key_scales = a.key_scales;
  cache.key_residuals = a.key_residuals;
  cache.values = a.values;
  cache.tail_keys = a.tail_keys;
  return cache;
}

Status check_optional(bool planned, const void* pointer, const char* name) {
  if (planned && pointer == nullptr) {
    return detail::invalid_argument(name, " must not be null: the plan writes ", name);
  }
  return Status::ok();
}

Status check_plan_workspace(std::size_t needed, const void* workspace) {
  if (needed > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", needed, " bytes needed)");
  }
  return Status::ok();
}

}  // namespace

Status sparse_decode_plan(const SparseDecodeProblem& problem, const DecodeOptions& options,
                          SparseDecodePlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = SparseDecodePlan{};
  if (Status s = detail::validate_sparse_decode_shapes(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  SparseDecodePlan planned{};
  planned.workspace_bytes = detail::cuda_sparse_decode_workspace_size(problem, options);
  planned.options = options;
  planned.paged = problem.cache.block_table != nullptr;
  planned.has_lse = problem.lse != nullptr;
  planned.has_kept_mask = problem.kept_mask != nullptr;
  planned.reads_all = heuristics::sparse_decode_plan_reads_all(problem, options);
  planned.problem = problem;
  planned.problem.cache = sparse_cache_at(problem.cache, SparseDecodeAddresses{}, false);
  planned.problem.q = nullptr;
  planned.problem.out = nullptr;
  planned.problem.lse = nullptr;
  planned.problem.kept_mask = nullptr;
  planned.planned = true;
  *plan = planned;
  return Status::ok();
}

Status sparse_decode_launch(const SparseDecodePlan& plan, const SparseDecodeAddresses& addresses,
                            void* workspace, cudaStream_t stream) {
  if (!plan.planned) return detail::invalid_argument("plan was not made by sparse_decode_plan");
  SparseDecodeProblem problem = plan.problem;
  problem.cache = sparse_cache_at(plan.problem.cache, addresses, plan.paged);
  problem.q = addresses.q;
  problem.out = addresses.out;
  problem.lse = plan.has_lse ? addresses.lse : nullptr;
  problem.kept_mask = plan.has_kept_mask ? addresses.kept_mask : nullptr;
  if (Status s = detail::validate_sparse_decode_addresses(problem); !s) return s;
  if (problem.cache.batch == 0) return Status::ok();
  if (Status s = check_optional(plan.paged, problem.cache.block_table, "block_table"); !s) return s;
  if (Status s = check_optional(plan.has_lse, problem.lse, "lse"); !s) return s;
  if (Status s = check_optional(plan.has_kept_mask, problem.kept_mask, "kept_mask"); !s) return s;
  if (Status s = check_plan_workspace(plan.workspace_bytes, workspace); !s) return s;
  return detail::cuda_sparse_decode(problem, workspace, stream, plan.options);
}

Status dense_decode_plan(const DenseDecodeProblem& problem, const DecodeOptions& options,
                         DenseDecodePlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = DenseDecodePlan{};
  if (Status s = detail::validate_dense_decode_shapes(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  DenseDecodePlan planned{};
  planned.workspace_bytes = detail::cuda_dense_decode_workspace_size(problem, options);
  planned.options = options;
  planned.has_lse = problem.lse != nullptr;
  planned.problem = problem;
  planned.problem.cache.keys = nullptr;
  planned.problem.cache.values = nullptr;
  planned.problem.cache.lengths = nullptr;
  planned.problem.q = nullptr;
  planned.problem.out = nullptr;
  planned.problem.lse = nullptr;
  planned.planned = true;
  *plan = planned;
  return Status::ok();
}

Status dense_decode_launch(const DenseDecodePlan& plan, const DenseDecodeAddresses& addresses,
                           void* workspace, cudaStream_t stream) {
  if (!plan.planned) return detail::invalid_argument("plan was not made by dense_decode_plan");
  DenseDecodeProblem problem = plan.problem;
  problem.cache.keys = addresses.keys;
  problem.cache.values = addresses.values;
  problem.cache.lengths = addresses.lengths;
  problem.q = addresses.q;
  problem.out = addresses.out;
  problem.lse = plan.has_lse ? addresses.lse : nullptr;
  if (Status s = detail::validate_dense_decode_addresses(problem); !s) return s;
  if (problem.cache.batch == 0) return Status::ok();
  if (Status s = check_optional(plan.has_lse, problem.lse, "lse"); !s) return s;
  if (Status s = check_plan_workspace(plan.workspace_bytes, workspace); !s) return s;
  return detail::cuda_dense_decode(problem, workspace, stream, plan.options);
}

Status sparse_decode_workspace_size(const SparseDecodeProblem& problem,
                                    std::size_t* workspace_bytes, const DecodeOptions& options) {
  if (Status s = check_size_out(workspace_bytes); !s) return s;
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  SparseDecodePlan plan{};
  if (Status s = sparse_decode_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status sparse_decode(const SparseDecodeProblem& problem, void* workspace,
                     std::size_t workspace_bytes, cudaStream_t stream,
                     const DecodeOptions& options) {
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  SparseDecodePlan plan{};
  if (Status s = sparse_decode_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  const SparseKvCache& c = problem.cache;
  const SparseDecodeAddresses addresses{problem.q,      problem.out,      problem.lse,
                                        problem.kept_mask, c.block_table, c.lengths,
                                        c.key_codes,    c.key_scales,     c.key_residuals,
                                        c.values,       c.tail_keys};
  return sparse_decode_launch(plan, addresses, workspace, stream);
}

Status dense_decode_workspace_size(const DenseDecodeProblem& problem, std::size_t* workspace_bytes,
                                   const DecodeOptions& options) {
  if (Status s = check_size_out(workspace_bytes); !s) return s;
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  DenseDecodePlan plan{};
  if (Status s = dense_decode_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status dense_decode(const DenseDecodeProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const DecodeOptions& options) {
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  DenseDecodePlan plan{};
  if (Status s = dense_decode_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  const DenseDecodeAddresses addresses{problem.q,          problem.out,          problem.lse,
                                       problem.cache.keys, problem.cache.values,
                                       problem.cache.lengths};
  return dense_decode_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
