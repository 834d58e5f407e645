// The CUDA merge backend as seen from src/api. Implemented in src/cuda/merge/ when the build has
// CUDA, else by src/api/merge_cuda_unavailable.cpp (every call returns kNotCompiled). Callers
// have validated the problem and resolved its default strides.
#pragma once

#include <cstddef>

#include "litetopk/merge.h"

namespace litetopk::detail {

// Bytes of workspace a launch of this problem needs (the sort's, for sorted output).
Status cuda_merge_workspace_size(const MergeProblem& problem, std::size_t* workspace_bytes);
// Launches the merge of `problem` (addresses set) on `stream`.
Status cuda_merge_launch(const MergeProblem& problem, void* workspace, cudaStream_t stream);

}  // namespace litetopk::detail
