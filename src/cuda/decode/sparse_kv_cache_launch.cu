// Host entry points of the sparse KV cache writers (append, conversion from a dense cache).
// Placeholder until the kernels land: each says kUnsupported.
#include "core/decode_backend.h"

namespace litetopk::detail {

Status cuda_sparse_kv_append(const SparseKvCache&, const void*, const void*, cudaStream_t) {
  return Status(StatusCode::kUnsupported, "sparse_kv_append: not implemented yet");
}
Status cuda_sparse_kv_from_dense(const DenseKvCache&, const SparseKvCache&, cudaStream_t) {
  return Status(StatusCode::kUnsupported, "sparse_kv_from_dense: not implemented yet");
}

}  // namespace litetopk::detail
