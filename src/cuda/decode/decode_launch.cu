// Host entry points of the decode attention kernels (dense and sparse flash-decoding).
// Placeholder until the kernels land: each says kUnsupported.
#include "core/decode_backend.h"

namespace litetopk::detail {

std::size_t cuda_sparse_decode_workspace_size(const SparseDecodeProblem&, const DecodeOptions&) {
  return 0;
}
Status cuda_sparse_decode(const SparseDecodeProblem&, void*, cudaStream_t, const DecodeOptions&) {
  return Status(StatusCode::kUnsupported, "sparse_decode: not implemented yet");
}
std::size_t cuda_dense_decode_workspace_size(const DenseDecodeProblem&, const DecodeOptions&) {
  return 0;
}
Status cuda_dense_decode(const DenseDecodeProblem&, void*, cudaStream_t, const DecodeOptions&) {
  return Status(StatusCode::kUnsupported, "dense_decode: not implemented yet");
}

}  // namespace litetopk::detail
