// Host entry points of the sparse KV cache writers (api/decode_backend.h): the checks that
// validation leaves to the backend (alignment of the new token's rows), the empty batch, then the
// kernels of sparse_kv_append.cu and sparse_kv_from_dense.cu.
#include <cstdint>

#include "api/decode_backend.h"
#include "api/format.h"
#include "cuda/decode/sparse_kv_writers.h"

namespace litetopk::detail {
namespace {

// The kernels move rows as 16-byte vectors.
Status check_vector_aligned(const void* pointer, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(pointer) % 16 != 0) {
    return invalid_argument(name, " must be 16-byte aligned, got address ", pointer);
  }
  return Status::ok();
}

}  // namespace

Status cuda_sparse_kv_append(const SparseKvCache& cache, const void* new_keys,
                             const void* new_values, cudaStream_t stream) {
  if (Status s = check_vector_aligned(new_keys, "new_keys"); !s) return s;
  if (Status s = check_vector_aligned(new_values, "new_values"); !s) return s;
  if (cache.batch == 0) return Status::ok();
  return cuda_kv::launch_sparse_kv_append(cache, new_keys, new_values, stream);
}

Status cuda_sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                                 cudaStream_t stream) {
  if (cache.batch == 0) return Status::ok();
  return cuda_kv::launch_sparse_kv_from_dense(dense, cache, stream);
}

}  // namespace litetopk::detail
