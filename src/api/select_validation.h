// Internal argument checks for select_topk (public entry: validate_select_problem in
// litetopk/select.h, which runs both). Every failure is kInvalidArgument naming the argument, the
// expected and the actual value.
#pragma once

#include "litetopk/select.h"

namespace litetopk::detail {

// Sizes and flags only (dtype, batch, n, row_stride, k): what a plan checks once.
Status validate_select_sizes(const SelectProblem& problem);

// The pointers of one call of a valid-sized problem: scores and indices set when there is work,
// every array aligned to its element. What each launch checks.
Status validate_select_addresses(const SelectProblem& problem);

}  // namespace litetopk::detail
