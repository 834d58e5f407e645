// Checks a selection against the CPU reference (select_topk_cpu with kReference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/select.h"

namespace litetopk::testkit {

// The reference's indices for the first `rows` rows of `problem` (host pointers; problem.indices
// and problem.values are ignored).
Status reference_topk(const SelectProblem& problem, int64_t rows, std::vector<int32_t>* indices);

// Compares `candidate` with `reference` ([rows, k] each) for the first `rows` rows of `problem`:
// the same count, -1 padding after the selected entries, indices inside the row, no duplicate, no
// NaN, and equal selected values once sorted. `deterministic` also needs the same index set and
// `sorted` the contract's order. Returns "" when they agree, else the first mismatch.
std::string compare_topk(const SelectProblem& problem, const int32_t* candidate,
                         const int32_t* reference, int64_t rows);

}  // namespace litetopk::testkit
