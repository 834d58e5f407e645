// Shared test support for indexer_topk (CPU and GPU suites): input patterns, key-range patterns,
// the adversarial case list, and the two result checks (against the fp64 oracle, and between two
// results computed with the same fp32 arithmetic).
//
// Shapes: a case gives T, H, D, S and k. HostIndexerInputs carries its own T (ks.size()) and S
// (kv_scale.size()); make_indexer_problem and the checks take T and S from the inputs, so that the
// first chunk of make_chunk_pair (which has S - T keys) works with the same case.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "litetopk/indexer.h"

namespace litetopk::testing {

enum class IndexerPattern {
  kRandom,           // q, kv ~ N(0,1) times a random power of two per row (2^-6 .. 2^4, so
                     // subnormal and large fp8 values appear), kv_scale in [0.25, 2), weights
                     // N(0,1)
  kConcentrated,     // a few hot keys (S/128, at least 1) aligned with every query: far above
                     // the rest; positive weights
  kAllEqual,         // every kv row identical and kv_scale 1: all scores of a query are equal
  kNegativeWeights,  // as kRandom with every weight < 0: all scores <= 0
  kZeroKvScales,     // as kRandom with kv_scale == 0 for about a third of the keys and a run of
                     // zeros: many scores exactly 0 (ties, -0 and +0)
  kNanInFp8,         // as kRandom; about 1 key in 40 has a NaN byte (0x7f or 0xff) in kv (that
                     // key's score is NaN), and every 7th query has one in q (the whole row is
                     // NaN: nothing is selectable)
};
const char* indexer_pattern_name(IndexerPattern pattern);

enum class RangePattern {
  kCausalChunk,            // T queries at the end of S keys: ks = 0, ke = S - T + t + 1
                           // (clamped into [0, S] when S < T)
  kContextParallelHalves,  // context-parallel prefill as in DeepGEMM's tests: the keys are cut
                           // into chunks of ceil(T/2); the first half of the queries is chunk a
                           // of the sequence, the second half chunk b = chunks - 1 - a (the
                           // load-balanced pairing), a = chunks / 6; both causal with ks = 0
  kRagged,                 // random [ks, ke) per query; every 8th query sees all keys
  kFewerThanK,             // random ranges of length < k (length 0 when k = 1)
  kEmpty,                  // every 3rd query has ke == ks; the others ragged
};
const char* range_pattern_name(RangePattern ranges);

struct IndexerCase {
  std::string name;  // unique, gtest-safe ([A-Za-z0-9_])
  int64_t T = 1, H = 64, D = 128, S = 1, k = 1;
  IndexerPattern pattern = IndexerPattern::kRandom;
  RangePattern ranges = RangePattern::kCausalChunk;
  uint64_t seed = 1;
};
// So that gtest prints a case by its name.
void PrintTo(const IndexerCase& c, std::ostream* os);

// Host inputs in DeepGEMM's layouts: q [T, H, D] and kv [S, D] fp8 e4m3 bytes, kv_scale [S],
// weights [T, H], ks/ke [T].
struct HostIndexerInputs {
  std::vector<uint8_t> q, kv;
  std::vector<float> kv_scale, weights;
  std::vector<int32_t> ks, ke;
};
// Deterministic in the case (seed included).
HostIndexerInputs make_indexer_inputs(const IndexerCase& c);

// Two consecutive causal prefill chunks of one sequence, for the hot-sample tests. Chunk 2 is the
// case's T queries at the end of its S keys; chunk 1 is the T queries before them, over the first
// S - T keys (the same kv rows and scales). Two hot key sets H1, H2 (disjoint, each
// min(k, (S - 2T) / 4) keys, at least 1, all visible to every query of both chunks) are aligned
// with two orthogonal directions (dims 0..63 and 64..127). Chunk 1's queries point along H1's
// direction, so its top-k is H1 (plus cold keys when |H1| < k). Chunk 2's queries point along H1's
// direction too (its top-k overlaps chunk 1's), or with `disjoint_hot_keys` along H2's (its top-k
// is H2: the hot sample taken from chunk 1 is useless). Weights are positive. Needs S >= 2T + 4.
std::pair<HostIndexerInputs, HostIndexerInputs> make_chunk_pair(const IndexerCase& c,
                                                                bool disjoint_hot_keys);

// Problem over host pointers: T = inputs.ks.size(), S = inputs.kv_scale.size(); H, D, k from the
// case; indices and values supplied by the caller.
IndexerProblem make_indexer_problem(const IndexerCase& c, const HostIndexerInputs& inputs,
                                    int32_t* indices, float* values);

// The adversarial list: every IndexerPattern x RangePattern at two small shapes each (T up to 64,
// S up to 20000, H 32 and 64, k in {1, 7, 64, 2048}, k above the range length included), a few
// larger causal and context-parallel cases, T = 0 and S = 0. Fixed seeds; sized so that
// reference + oracle over the whole list takes seconds on two cores.
std::vector<IndexerCase> indexer_cases();

// A random-pattern causal-chunk case of the given shape (D = 128).
IndexerCase causal_case(std::string name, int64_t T, int64_t S, int64_t H, int64_t k,
                        uint64_t seed);

// Per-query tolerance of the oracle check: a bound on |fp32 score - exact score| for any fp32
// evaluation of the score formula (any summation order):
//
//   tol_t = rel * sum_h |w[t,h]| * |q[t,h]|_2 * max_s (|kv_scale[s]| * |kv[s]|_2) + 1e-30,
//   rel = gamma(D + H + 2) = n u / (1 - n u), n = D + H + 2, u = 2^-24
//
// Derivation: the fp8 products are exact in fp32 (4-bit significands, exponents within fp32's
// normal range), so a D-term fp32 sum of them is off by at most gamma(D - 1) * sum_d |q_d kv_d|
// <= gamma(D - 1) |q|_2 |kv|_2 (Cauchy-Schwarz). relu does not enlarge an error; the product
// with w[t,h] adds one rounding; the sum over H heads adds gamma(H - 1) of sum_h |w_h relu(dot_h)|
// <= sum_h |w_h| |q_h|_2 |kv|_2; the product with kv_scale one more rounding. Altogether at most
// gamma(D + H + 2) * kv_scale * sum_h |w_h| |q_h|_2 |kv|_2 (about 1.2e-5 relative for H = 64,
// 1.0e-5 for H = 32). The oracle's own error (the exact score rounded to fp32: 2^-24 relative)
// is far below that.
// `rel_tol` > 0 overrides rel (for an accumulator with fewer bits than fp32).
double indexer_tolerance_rel(int64_t D, int64_t H);

// rel for the GPU kernels, whose fp8 wgmma accumulator is not fp32: Hopper's tensor cores add
// each k = 32 group of exact fp8 products into the accumulator keeping about 13 fraction bits
// (truncated; measured, and the reason DeepGEMM's fp8 GEMMs promote to fp32 every few k-steps).
// Each of the D / 32 additions is then off by at most 2^-13 of |running sum| + |group sum|, both
// <= sum_d |q_d kv_d|, so a head's dot product is off by at most (D / 32) 2^-13 sum_d |q_d kv_d|;
// the head sum and the scalings are fp32 (gamma(H + 2) as above):
//   rel_gpu = (D / 32) * 2^-13 + gamma(H + 2)   (about 4.9e-4)
double indexer_tolerance_rel_gpu(int64_t D, int64_t H);

// Oracle check of one result (host arrays [T, k]; values may be null): testkit::IndexerChecker
// (testkit/indexer_verify.h) over every query, with the CPU reference's scores (exact, rounded to
// fp32) as the oracle. Per query:
// - valid count == min(k, number of non-NaN scores in [ks, ke)); the valid slots come first,
//   then -1 (and NaN in values) up to k;
// - indices in [0, ke - ks), no duplicates, none with a NaN score;
// - every chosen index's score >= K - 2 tol, K = the k-th best score (count-th when fewer): the
//   chosen set is exact for some scores within tol of the exact ones, and its k-th best is then
//   at least K - tol;
// - values (if given): |values[i] - score| <= tol.
// Fails with a message naming the case, query, slot and the numbers.
::testing::AssertionResult check_indexer_oracle(const IndexerCase& c,
                                                const HostIndexerInputs& inputs,
                                                const int32_t* indices, const float* values,
                                                double rel_tol = 0.0);

// Agreement of two results [c.T, c.k] computed with the same fp32 arithmetic (fused vs unfused):
// per query the same valid count with -1 padding after and no duplicates; where both give values,
// the same value (==) for an index in both, the same k-th (smallest selected) value, and indices
// in one set only must hold exactly that k-th value (ties). Without values (either null) the
// index sets must be equal. Order within a row is ignored.
::testing::AssertionResult check_indexer_agreement(const IndexerCase& c, const int32_t* a_indices,
                                                   const float* a_values,
                                                   const int32_t* b_indices,
                                                   const float* b_values);

}  // namespace litetopk::testing
