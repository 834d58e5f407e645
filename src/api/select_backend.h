// The CUDA selection backend as seen from src/core. Implemented in src/cuda/select/ when the
// build has CUDA, else by src/api/cuda_unavailable.cpp (every call returns kNotCompiled).
// Callers have validated the problem.
#pragma once

#include <cstddef>

#include "litetopk/select.h"

namespace litetopk::detail {

// Resolves `algo` (kAuto: the dispatch rule) on the current device and fills the plan's algorithm,
// launch shape and workspace size.
Status cuda_select_plan(const SelectProblem& problem, SelectAlgo algo, SelectPlan* plan);
// Launches a plan; `problem` is the plan's problem with the launch's addresses.
Status cuda_select_launch(const SelectPlan& plan, const SelectProblem& problem, void* workspace,
                          cudaStream_t stream);
// Copies the device range arrays to the host (synchronizing `stream`) and checks them.
Status cuda_validate_select_ranges(const SelectProblem& problem, cudaStream_t stream);
// The cost model's choice for this shape on the current device.
SelectAlgo cuda_select_dispatch(const SelectProblem& problem);

}  // namespace litetopk::detail
