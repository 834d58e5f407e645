// Public GPU entry points of sparse and dense decoding: validation and workspace checks, then the
// CUDA backend (api/decode_backend.h).
#include "api/decode_backend.h"
#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "api/workspace.h"
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

Status sparse_decode_workspace_size(const SparseDecodeProblem& problem,
                                    std::size_t* workspace_bytes, const DecodeOptions& options) {
  if (Status s = check_size_out(workspace_bytes); !s) return s;
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  *workspace_bytes = detail::cuda_sparse_decode_workspace_size(problem, options);
  return Status::ok();
}

Status sparse_decode(const SparseDecodeProblem& problem, void* workspace,
                     std::size_t workspace_bytes, cudaStream_t stream,
                     const DecodeOptions& options) {
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  const std::size_t needed = detail::cuda_sparse_decode_workspace_size(problem, options);
  if (Status s = detail::check_workspace(needed, workspace, workspace_bytes); !s) return s;
  return detail::cuda_sparse_decode(problem, workspace, stream, options);
}

Status dense_decode_workspace_size(const DenseDecodeProblem& problem, std::size_t* workspace_bytes,
                                   const DecodeOptions& options) {
  if (Status s = check_size_out(workspace_bytes); !s) return s;
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  *workspace_bytes = detail::cuda_dense_decode_workspace_size(problem, options);
  return Status::ok();
}

Status dense_decode(const DenseDecodeProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const DecodeOptions& options) {
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  const std::size_t needed = detail::cuda_dense_decode_workspace_size(problem, options);
  if (Status s = detail::check_workspace(needed, workspace, workspace_bytes); !s) return s;
  return detail::cuda_dense_decode(problem, workspace, stream, options);
}

}  // namespace litetopk
