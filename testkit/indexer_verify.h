// Checks indexer_topk results on a few queries against the CPU reference (indexer_topk_cpu).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testkit/indexer_workload.h"

namespace litetopk::testkit {

// Queries checked by verification: evenly spaced from the first to the last (the middle included).
constexpr int64_t kIndexerVerifyQueries = 7;
// The default relative score tolerance (see indexer_verify.cpp).
constexpr double kIndexerTolRel = 5e-4;

// The first, middle and last among up to kIndexerVerifyQueries evenly spaced queries of T.
std::vector<int64_t> indexer_verify_queries(int64_t T);

// Runs the CPU reference on `queries` of `w` once; check() then compares any number of results
// with it. `w` must outlive the checker.
class IndexerChecker {
 public:
  IndexerChecker(const IndexerWorkload& w, const std::vector<int64_t>& queries, double tol_rel);
  IndexerChecker(const IndexerChecker&) = delete;
  IndexerChecker& operator=(const IndexerChecker&) = delete;

  // Checks the queries of `indices` ([T, k], host). Returns "" when every checked query passes,
  // else the first failure.
  std::string check(const int32_t* indices) const;

 private:
  const IndexerWorkload& w_;
  double tol_rel_;
  IndexerRows rows_;
  std::string reference_error_;  // non-empty when the reference failed
  std::vector<int32_t> ref_indices_;
  std::vector<float> ref_values_;
  double kv_bound_ = 0.0;  // max_s kv_scale[s] * |kv[s]|_2
};

}  // namespace litetopk::testkit
