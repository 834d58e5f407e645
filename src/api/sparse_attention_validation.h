// Internal argument checks for sparse_attention (public entry: validate_sparse_attention_problem
// in litetopk/attention.h, which runs both). Every failure is kInvalidArgument naming the
// argument, the expected and the actual value.
#pragma once

#include "litetopk/attention.h"

namespace litetopk::detail {

// Shapes, sizes, sm_scale and the algorithm: what a plan checks once.
Status validate_sparse_attention_shapes(const SparseAttentionProblem& problem);

// The pointers of one call of a valid-shaped problem (set when there is work, aligned): what
// each launch checks.
Status validate_sparse_attention_addresses(const SparseAttentionProblem& problem);

}  // namespace litetopk::detail
