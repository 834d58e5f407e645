// The selection checker, for the tests and `litetopk select --verify`: a result of select_topk
// against the CPU reference (select_topk_cpu with kReference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/select.h"

namespace litetopk::testkit {

// The reference's indices for the first `rows` rows of `problem` (host pointers; problem.indices
// and problem.values are ignored).
Status reference_topk(const SelectProblem& problem, int64_t rows, std::vector<int32_t>* indices);

// Compares `candidate` with `reference` ([rows, k] each) for the first `rows` rows of `problem`
// (host pointers): min(k, non-NaN scores in the row) entries selected, as many as the reference,
// then -1 padding; indices inside the row, no duplicate, no NaN; and the selected values, sorted,
// equal to the reference's bit for bit. `deterministic` also needs the same index set and `sorted`
// the contract's order (best first, -0 below +0, ties by ascending index). With
// `candidate_values` ([rows, k] of the problem's dtype) each selected slot's value must be the
// score at its index, bit for bit, and each padding slot's NaN. Returns "" when they agree, else
// the first mismatch.
std::string compare_topk(const SelectProblem& problem, const int32_t* candidate,
                         const int32_t* reference, int64_t rows,
                         const void* candidate_values = nullptr);

}  // namespace litetopk::testkit
