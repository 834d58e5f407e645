// Checks of a retrieval_topk result against the CPU reference's, for the CLI's --verify: exact
// where the arithmetic is the reference's, within a tolerance where it is the GPU's fp32.
#pragma once

#include <cstdint>
#include <string>

#include "litetopk/retrieval.h"

namespace litetopk::testkit {

// Empty when `indices` [batch, k] (and `scores` [batch, k], optional) are a valid result of the
// host problem `problem` whose reference result is reference_indices / reference_scores (sorted,
// from retrieval_topk_cpu): per query the same number of rows, no repeats, rows in the query's
// range and allowed by the bitmap, and every selected row's reference-arithmetic score (fp64, rounded to fp32) at least the
// reference's k-th score - tolerance (and the reported score within tolerance of it). Otherwise
// the first failure, naming the query and the slot.
std::string compare_retrieval(const RetrievalProblem& problem, const int32_t* indices,
                              const float* scores, const int32_t* reference_indices,
                              const float* reference_scores, float tolerance);

// The tolerance for the GPU's fp32 dot products: 2^-12 of (1 + the largest |reference score|).
float retrieval_tolerance(const RetrievalProblem& problem, const float* reference_scores);

}  // namespace litetopk::testkit
