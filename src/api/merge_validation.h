// Internal argument checks for merge_topk (public entry: validate_merge_problem in
// litetopk/merge.h, which runs both). Every failure is kInvalidArgument naming the argument, the
// expected and the actual value.
#pragma once

#include "litetopk/merge.h"

namespace litetopk::detail {

// Sizes, strides and flags only: what a plan checks once.
Status validate_merge_sizes(const MergeProblem& problem);

// The pointers of one call of a valid-sized problem: values, indices and out_indices set when
// there is work, every array 4-byte aligned. What each launch checks.
Status validate_merge_addresses(const MergeProblem& problem);

// The problem with its default strides (0) resolved.
MergeProblem with_merge_strides(const MergeProblem& problem);

}  // namespace litetopk::detail
