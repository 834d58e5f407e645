// The CUDA backend of sparse_attention as seen from src/api. Implemented in src/cuda/attention/
// when the build has CUDA, else by src/api/cuda_unavailable.cpp (kNotCompiled). Callers have
// validated the problem and checked the workspace against the plan.
#pragma once

#include "litetopk/attention.h"

namespace litetopk::detail {

Status cuda_sparse_attention(const SparseAttentionProblem& problem,
                             const SparseAttentionPlan& plan, void* workspace,
                             cudaStream_t stream);

}  // namespace litetopk::detail
