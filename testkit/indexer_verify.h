// The indexer's checker, for the tests, `litetopk indexer --verify` and the DSA layer: a result
// of indexer_topk against the CPU reference's scores (indexer_logits_cpu: exact fp64 scores
// rounded to fp32), query by query, within a score tolerance.
//
// The tolerance of query t: the checked result is the exact top k of the implementation's own
// scores, which differ from the exact ones by at most some e_t. If index s was chosen while a
// reference member r was not, then mine(s) >= mine(r), so exact(s) >= exact(r) - 2 e_t >= K - 2 e_t,
// with K the reference's k-th score. e_t is bounded by
//   tol_t = rel * sum_h |w[t,h]| * |q[t,h]|_2 * max_s (|kv_scale[s]| * |kv[s]|_2) + 1e-30
// (s over the query's range): each head's dot product is off by at most rel * sum_d |q_d kv_d|
// <= rel * |q|_2 |kv|_2 (Cauchy-Schwarz); relu does not grow an error; the weights and kv_scale
// scale it. `rel` is the caller's: the fp32 bound for an fp32 evaluation, or kIndexerTolRel for
// the GPU's fp8 wgmma accumulator (tests/common/indexer_testing.h derives both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/indexer.h"
#include "testkit/indexer_workload.h"

namespace litetopk::testkit {

// Queries checked by verification: evenly spaced from the first to the last (the middle included).
constexpr int64_t kIndexerVerifyQueries = 7;
// The default relative score tolerance: the fp8 wgmma accumulator keeps about 13 fraction bits
// per k = 32 group, (128 / 32) * 2^-13 = 4.9e-4. It is loose but not vacuous: at S = 256K,
// k = 2048 with IndexerWorkload's inputs, 2 tol is about 0.9 to 1.9 against a score standard
// deviation of 6 to 8, and a few tens of % more keys than k clear the bar K - 2 tol (out of
// 262144), so a key chosen outside the true top k's neighbourhood fails. Index-for-index
// agreement is the GPU tests' job, not this check's.
constexpr double kIndexerTolRel = 5e-4;

// The first, middle and last among up to kIndexerVerifyQueries evenly spaced queries of T.
std::vector<int64_t> indexer_verify_queries(int64_t T);

// The Cauchy-Schwarz factors of the tolerance: the Euclidean norm of n decoded fp8 values (NaN if
// any byte is NaN), and sum_h |weights[h]| * |q[h, :]|_2 over one query's H heads of D values.
double fp8_l2_norm(const uint8_t* x, int64_t n);
double weighted_query_norm(const float* weights, const uint8_t* q, int64_t H, int64_t D);

// Scores `queries` of `problem` (host arrays; its indices and values are not read) with the CPU
// reference once and keeps their scores; check() then compares any number of results with them.
class IndexerChecker {
 public:
  IndexerChecker(const IndexerProblem& problem, const std::vector<int64_t>& queries,
                 double tol_rel);
  // The queries of a workload.
  IndexerChecker(const IndexerWorkload& w, const std::vector<int64_t>& queries, double tol_rel);
  IndexerChecker(const IndexerChecker&) = delete;
  IndexerChecker& operator=(const IndexerChecker&) = delete;

  // Checks the queries' rows of `indices` ([T, k], host) and, when not null, of `values`
  // ([T, k]). Per query: the reference's valid count (min(k, non-NaN scores in range)), then -1
  // padding (and NaN values); distinct indices inside [0, ke - ks), none with a NaN score, each
  // with a score >= the reference's k-th score - 2 tol; values within tol of the reference's
  // scores. Returns "" when every checked query passes, else the first failure, naming the query.
  std::string check(const int32_t* indices, const float* values = nullptr) const;

 private:
  struct Query {
    int64_t t = 0;
    int64_t begin = 0, end = 0;   // the range, clamped into [0, S]
    std::vector<float> scores;    // [end - begin], the reference's
    double tolerance = 0.0;
  };
  int64_t k_ = 0;
  std::string reference_error_;  // non-empty when the reference failed
  std::vector<Query> queries_;
};

}  // namespace litetopk::testkit
