// Internal argument checks for the paged decode indexer (public entry:
// validate_paged_indexer_problem in litetopk/indexer.h). Never reads context_lens or block_table.
#pragma once

#include <cstdint>

#include "litetopk/indexer.h"

namespace litetopk {

// The score inputs only: shapes, q/kv_cache/weights/context_lens/block_table pointers and
// alignment. k, indices and values are not looked at (indexer_logits_paged selects nothing).
// validate_paged_indexer_problem = this + the checks of k, indices and values.
Status validate_paged_indexer_inputs(const PagedIndexerProblem& problem);

// validate_paged_indexer_problem's two halves: every size (k too), what a plan checks once; every
// pointer (indices and values too), what each launch checks.
Status validate_paged_indexer_sizes(const PagedIndexerProblem& problem);
Status validate_paged_indexer_addresses(const PagedIndexerProblem& problem);

// The logits output of indexer_logits_paged: logits_stride >= max_context, logits non-null and
// 4-byte aligned when a row has a position, and rows * logits_stride within int64.
Status validate_paged_indexer_logits_output(const PagedIndexerProblem& problem,
                                            const float* logits, int64_t logits_stride);

}  // namespace litetopk
