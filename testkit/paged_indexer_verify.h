// Checks indexer_topk_paged results on a few requests against the CPU reference: each checked
// request is gathered into a prefill problem (gather_paged_request) and checked by an
// IndexerChecker (indexer_verify.h), so the paged results meet the same rules and tolerance as
// `litetopk indexer --verify`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testkit/indexer_verify.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testkit {

// The requests checked by verification: the first, the middle and the last of `batch` (fewer
// when batch < 3), each with all its next_n queries.
std::vector<int64_t> paged_indexer_verify_requests(int64_t batch);

// Runs the CPU reference on `requests` of `w` once; check() then compares any number of results
// with it. `w` need not outlive the checker (the checked requests are copied).
class PagedIndexerChecker {
 public:
  PagedIndexerChecker(const PagedIndexerWorkload& w, const std::vector<int64_t>& requests,
                      double tol_rel);
  ~PagedIndexerChecker();
  PagedIndexerChecker(const PagedIndexerChecker&) = delete;
  PagedIndexerChecker& operator=(const PagedIndexerChecker&) = delete;

  // Checks the requests' rows of `indices` ([B * next_n, k], host, row b * next_n + j for query
  // j of request b): per query the reference's valid count, then -1 padding, distinct positions
  // inside the query's visible count, each with a CPU score >= the reference's k-th score minus
  // the tolerance (indexer_verify.cpp derives it). Returns "" when every checked query passes,
  // else the first failure, naming the request and the query.
  std::string check(const int32_t* indices) const;

  const std::vector<int64_t>& requests() const { return requests_; }

 private:
  struct Request;
  int64_t rows_per_request_ = 0;  // next_n
  int64_t k_ = 0;
  std::vector<int64_t> requests_;
  std::vector<std::unique_ptr<Request>> checked_;
};

}  // namespace litetopk::testkit
