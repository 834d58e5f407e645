// The retrieval_topk suites' plain sort-based oracle of one problem and the exact comparison
// against it (a GPU result is compared with the CPU reference by testkit/retrieval_verify.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "litetopk/retrieval.h"

namespace litetopk::testing {

// The fp32 score of every (query, corpus row) pair of a host problem: fp64 dot products (fp8: of
// the scaled rows; l2: 2 q . c - ||c||^2 - ||q||^2, with the problem's corpus_norms when set)
// rounded to fp32, NaN outside the query's range and where the bitmap's bit is clear. [batch, n].
std::vector<float> retrieval_scores(const RetrievalProblem& problem);

// The expected result for `scores`: per query, the non-NaN entries sorted by (score descending,
// index ascending), the first k, then -1 / NaN padding. [batch, k] each.
struct ExpectedTopk {
  std::vector<int32_t> indices;
  std::vector<float> scores;
};
ExpectedTopk sorted_topk(const std::vector<float>& scores, int64_t batch, int64_t n, int64_t k);

// An exact result: the indices and scores equal the expectation slot for slot.
::testing::AssertionResult same_topk(const ExpectedTopk& expected, const int32_t* indices,
                                     const float* scores, int64_t batch, int64_t k);

}  // namespace litetopk::testing
