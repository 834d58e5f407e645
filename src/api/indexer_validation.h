// Internal argument checks for the indexer (public entry: validate_indexer_problem in
// litetopk/indexer.h). Every failure is kInvalidArgument naming the argument, the expected and the
// actual value.
#pragma once

#include <cstdint>

#include "api/format.h"

#include "litetopk/indexer.h"

namespace litetopk {

// The score inputs only: shapes (T, H, D, S), q/kv/kv_scale/weights/ks/ke pointers and alignment.
// k, indices and values are not looked at (indexer_logits needs no selection outputs).
// validate_indexer_problem = validate_indexer_inputs + the checks of k, indices and values.
Status validate_indexer_inputs(const IndexerProblem& problem);
// Its two halves: the sizes (T, H, D, S and their products) and the score inputs' pointers.
Status validate_indexer_input_sizes(const IndexerProblem& problem);
Status validate_indexer_input_addresses(const IndexerProblem& problem);

// validate_indexer_problem's two halves: every size (k too), what a plan checks once; every
// pointer (indices and values too), what each launch checks.
Status validate_indexer_sizes(const IndexerProblem& problem);
Status validate_indexer_addresses(const IndexerProblem& problem);

// options.algo of either indexer resolved: kAuto to what `automatic()` picks, kUnfused and kFused
// as they are; kInvalidArgument for any other value.
template <typename Automatic>
Status resolve_indexer_algo(IndexerAlgo requested, Automatic&& automatic, IndexerAlgo* resolved) {
  switch (requested) {
    case IndexerAlgo::kAuto:
      *resolved = automatic();
      return Status::ok();
    case IndexerAlgo::kUnfused:
    case IndexerAlgo::kFused:
      *resolved = requested;
      return Status::ok();
  }
  return detail::invalid_argument("options.algo must be auto, unfused or fused, got ",
                                  static_cast<int>(requested));
}

// Checks 0 <= ks[t] <= ke[t] <= S for host copies of the range arrays (both required when T > 0).
Status validate_indexer_ranges(const IndexerProblem& problem, const int32_t* host_ks,
                               const int32_t* host_ke);

// Checks the logits output of indexer_logits: logits_stride >= S, logits non-null when T > 0 and
// S > 0, 4-byte aligned, and T * logits_stride does not overflow int64.
Status validate_indexer_logits_output(const IndexerProblem& problem, const float* logits,
                                      int64_t logits_stride);

}  // namespace litetopk
