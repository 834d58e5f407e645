// GPU entry points of sparse decoding. The CUDA kernels are not in this build yet (issue 4): the
// calls validate their arguments like the finished ones will, then say so with kUnsupported.
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

Status not_yet(const char* what) {
  return Status(StatusCode::kUnsupported,
                std::string(what) +
                    ": the sparse-decoding GPU kernels are not in this build yet; the CPU "
                    "reference (the *_cpu functions) is");
}

}  // namespace

Status sparse_kv_append(const SparseKvCache& cache, const void*, const void*, cudaStream_t) {
  if (Status s = validate_sparse_kv_cache(cache); !s) return s;
  return not_yet("sparse_kv_append");
}

Status sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache, cudaStream_t) {
  if (Status s = validate_dense_kv_cache(dense); !s) return s;
  if (Status s = validate_sparse_kv_cache(cache); !s) return s;
  return not_yet("sparse_kv_from_dense");
}

Status sparse_decode_workspace_size(const SparseDecodeProblem& problem, std::size_t*,
                                    const DecodeOptions&) {
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  return not_yet("sparse_decode_workspace_size");
}

Status sparse_decode(const SparseDecodeProblem& problem, void*, std::size_t, cudaStream_t,
                     const DecodeOptions&) {
  if (Status s = validate_sparse_decode_problem(problem); !s) return s;
  return not_yet("sparse_decode");
}

Status dense_decode_workspace_size(const DenseDecodeProblem& problem, std::size_t*,
                                   const DecodeOptions&) {
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  return not_yet("dense_decode_workspace_size");
}

Status dense_decode(const DenseDecodeProblem& problem, void*, std::size_t, cudaStream_t,
                    const DecodeOptions&) {
  if (Status s = validate_dense_decode_problem(problem); !s) return s;
  return not_yet("dense_decode");
}

}  // namespace litetopk
