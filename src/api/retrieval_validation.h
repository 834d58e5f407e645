// Internal argument checks for retrieval_topk (public entry: validate_retrieval_problem in
// litetopk/retrieval.h, which runs both). Every failure is kInvalidArgument naming the argument,
// the expected and the actual value.
#pragma once

#include "litetopk/retrieval.h"

namespace litetopk::detail {

// Sizes, dtype, metric and flags only: what a plan checks once.
Status validate_retrieval_sizes(const RetrievalProblem& problem);

// The pointers of one call of a valid-sized problem: queries, corpus and indices set when there is
// work, queries and corpus 16-byte aligned, the fp32 and int32 arrays 4-byte aligned. What each
// launch checks.
Status validate_retrieval_addresses(const RetrievalProblem& problem);

// What retrieval_corpus_norms reads: corpus, dtype, corpus_format, corpus_scales, n, dim.
Status validate_retrieval_corpus(const RetrievalProblem& problem);

// Host range arrays (either may be null): 0 <= start <= end <= n for every query.
Status validate_retrieval_ranges(const RetrievalProblem& problem);

}  // namespace litetopk::detail
