// Launchers of the sparse KV cache writers (one .cu file each); the host entry points in
// sparse_kv_cache_launch.cu check what validation leaves to the backend and call them. Arguments
// are validated; the batch is not empty.
#pragma once

#include "litetopk/sparse_decode.h"

namespace litetopk::cuda_kv {

// sparse_kv_append.cu: new_keys, new_values 16-byte aligned.
Status launch_sparse_kv_append(const SparseKvCache& cache, const void* new_keys,
                               const void* new_values, cudaStream_t stream);
// sparse_kv_from_dense.cu.
Status launch_sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                                   cudaStream_t stream);

}  // namespace litetopk::cuda_kv
