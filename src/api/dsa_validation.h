// Internal argument checks for dsa_prefill (public entry: validate_dsa_prefill_problem in
// litetopk/dsa.h, which runs both). Each half's own checks, every failure kInvalidArgument naming
// the DSA problem's field, the expected and the actual value.
#pragma once

#include "litetopk/dsa.h"

namespace litetopk::detail {

// The sizes of both halves and the attention's kernel `algo`: what a plan checks once.
Status validate_dsa_prefill_sizes(const DsaPrefillProblem& problem, SparseAttentionAlgo algo);

// The pointers of one call of a valid-sized problem (set when there is work, aligned): the
// indexer's inputs, the attention's inputs and outputs, and indices when given. What each launch
// checks.
Status validate_dsa_prefill_addresses(const DsaPrefillProblem& problem);

}  // namespace litetopk::detail
