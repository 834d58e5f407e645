// The CUDA selection backend as seen from src/core. Implemented in src/cuda/select/ when the
// build has CUDA, else by src/api/cuda_unavailable.cpp (every call returns kNotCompiled).
// Callers have validated the problem and resolved kAuto to a concrete algorithm.
#pragma once

#include <cstddef>

#include "litetopk/select.h"

namespace litetopk::detail {

Status cuda_select_workspace_size(const SelectProblem& problem, SelectAlgo algo,
                                  std::size_t* workspace_bytes);
Status cuda_select_topk(const SelectProblem& problem, SelectAlgo algo, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream);
// Copies the device range arrays to the host (synchronizing `stream`) and checks them.
Status cuda_validate_select_ranges(const SelectProblem& problem, cudaStream_t stream);
// The cost model's choice for this shape on the current device.
SelectAlgo cuda_select_dispatch(const SelectProblem& problem);

}  // namespace litetopk::detail
