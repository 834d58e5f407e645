// The CPU selection algorithms as seen from select_topk_cpu (select_cpu.cpp), which validates the
// problem first. Both are called only with batch >= 1 and may throw std::bad_alloc or
// std::system_error; select_topk_cpu turns any exception into a Status.
#pragma once

#include "litetopk/select.h"

namespace litetopk::cpu {

// Full sort of each row's composites, one row after another: the test oracle
// (select_reference.cpp).
void select_reference_rows(const SelectProblem& problem);

// Streaming filter with a rising gate, rows spread over `num_threads` >= 1 threads
// (select_fast.cpp).
void select_fast_rows(const SelectProblem& problem, int num_threads);

}  // namespace litetopk::cpu
