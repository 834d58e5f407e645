// The CUDA backend of dsa_prefill as seen from src/api: the kernel between the indexer and the
// attention. Implemented in src/cuda/dsa/ when the build has CUDA, else by
// src/api/dsa_cuda_unavailable.cpp (kNotCompiled). The indexer and the attention run through
// their own public launches.
#pragma once

#include <cstdint>

#include "litetopk/dsa.h"

namespace litetopk::detail {

// rows[t * k + j] = dsa::kv_row(rows[t * k + j], ks[t], num_keys) for every t < num_queries,
// j < k, in place on `stream` (device pointers; num_queries > 0).
Status cuda_dsa_kv_rows(const int32_t* ks, int32_t* rows, int64_t num_queries, int64_t k,
                        int64_t num_keys, cudaStream_t stream);

}  // namespace litetopk::detail
