#include "testkit/paged_indexer_verify.h"

#include <string>

namespace litetopk::testkit {

std::vector<int64_t> paged_indexer_verify_requests(int64_t batch) {
  std::vector<int64_t> requests;
  if (batch < 1) return requests;
  for (const int64_t b : {int64_t{0}, (batch - 1) / 2, batch - 1}) {
    if (b >= 0 && (requests.empty() || requests.back() != b)) requests.push_back(b);
  }
  return requests;
}

// One checked request: the checker over all the queries of its gathered prefill problem.
struct PagedIndexerChecker::Request {
  Request(const PagedIndexerWorkload& w, int64_t b, double tol_rel)
      : index(b),
        context(w.context_lens[b]),
        checker(gather_paged_request(w, b), all_queries(w.spec.next_n), tol_rel) {}

  static std::vector<int64_t> all_queries(int64_t next_n) {
    std::vector<int64_t> queries;
    for (int64_t j = 0; j < next_n; ++j) queries.push_back(j);
    return queries;
  }

  int64_t index;
  int32_t context;
  IndexerChecker checker;
};

PagedIndexerChecker::PagedIndexerChecker(const PagedIndexerWorkload& w,
                                         const std::vector<int64_t>& requests, double tol_rel)
    : rows_per_request_(w.spec.next_n), k_(w.spec.k), requests_(requests) {
  for (const int64_t b : requests) checked_.push_back(std::make_unique<Request>(w, b, tol_rel));
}

PagedIndexerChecker::~PagedIndexerChecker() = default;

std::string PagedIndexerChecker::check(const int32_t* indices) const {
  for (const auto& request : checked_) {
    const int32_t* rows = indices + request->index * rows_per_request_ * k_;
    if (std::string error = request->checker.check(rows); !error.empty()) {
      return "request " + std::to_string(request->index) + " (context " +
             std::to_string(request->context) + "), " + error;
    }
  }
  return "";
}

}  // namespace litetopk::testkit
