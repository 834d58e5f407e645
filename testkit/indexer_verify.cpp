#include "testkit/indexer_verify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "cpu/indexer_scores.h"

namespace litetopk::testkit {

std::vector<int64_t> indexer_verify_queries(int64_t T) {
  std::vector<int64_t> queries;
  const int64_t count = std::min(T, kIndexerVerifyQueries);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = count == 1 ? 0 : i * (T - 1) / (count - 1);
    if (queries.empty() || queries.back() != t) queries.push_back(t);
  }
  return queries;
}

IndexerChecker::IndexerChecker(const IndexerWorkload& w, const std::vector<int64_t>& queries,
                               double tol_rel)
    : w_(w), tol_rel_(tol_rel) {
  const int64_t D = w.spec.D, k = w.spec.k, S = w.spec.S;
  slice_indexer_rows(w, queries, &rows_);
  const int64_t n = static_cast<int64_t>(queries.size());
  ref_indices_.assign(static_cast<std::size_t>(n * k), -2);
  ref_values_.assign(static_cast<std::size_t>(n * k), 0.0f);
  IndexerProblem ref = rows_.problem;
  ref.indices = ref_indices_.data();
  ref.values = ref_values_.data();
  if (Status s = indexer_topk_cpu(ref); !s) {
    reference_error_ = "CPU reference failed: " + s.to_string();
    return;
  }
  for (int64_t s = 0; s < S; ++s) {
    kv_bound_ = std::max(kv_bound_, std::fabs(static_cast<double>(w.kv_scale[s])) *
                                        cpu::fp8_l2_norm(&w.kv[s * D], D));
  }
}

// The tolerance. The checked result is the exact top k of the implementation's own fp32 scores,
// which differ from the reference's (fp64, rounded to fp32) by at most some e. If index s was
// chosen while a reference member r was not, then gpu(s) >= gpu(r), so
// cpu(s) >= cpu(r) - 2e >= K - 2e, with K the reference's k-th score. We bound e per query by
//   e_t = rel * sum_h |w[t,h]| * |q[t,h]|_2 * max_s(kv_scale[s] * |kv[s]|_2)
// (each head's dot product is off by at most rel * sum_d |q_d kv_d| <= rel * |q|_2 |kv|_2 by
// Cauchy-Schwarz; relu does not grow an error; the weights and kv_scale scale it). rel = 5e-4
// (kIndexerTolRel, --tol-rel) covers the fp8 wgmma accumulator, which keeps about 13 fraction
// bits per k = 32 group: (128 / 32) * 2^-13 = 4.9e-4 (tests/common/indexer_testing.h derives it).
// It is loose but not vacuous: with these inputs at
// S = 256K, k = 2048, 2e is about 0.9 to 1.9 against a score standard deviation of 6 to 8, and a
// few tens of % more keys than k clear the bar K - 2e (out of 262144), so a key chosen outside the true
// top k's neighbourhood fails. Index-for-index agreement is the GPU tests' job, not this check's.
std::string IndexerChecker::check(const int32_t* indices) const {
  if (!reference_error_.empty()) return reference_error_;
  const int64_t H = w_.spec.H, D = w_.spec.D, k = w_.spec.k;
  const int64_t n = static_cast<int64_t>(rows_.queries.size());
  const cpu::IndexerScorer scorer(rows_.problem);

  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = rows_.queries[r];
    const int64_t begin = rows_.ks[r], length = rows_.ke[r] - rows_.ks[r];
    std::ostringstream where;
    where << "query " << t << " (range [" << begin << ", " << rows_.ke[r] << ")): ";
    const int32_t* ref_row = &ref_indices_[r * k];
    const int32_t* row = &indices[t * k];
    const int64_t ref_count = std::find(ref_row, ref_row + k, -1) - ref_row;
    double kth = std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < ref_count; ++i) kth = std::min<double>(kth, ref_values_[r * k + i]);

    const double weight_bound =  // sum_h |w[t,h]| * |q[t,h]|_2
        cpu::weighted_query_norm(&rows_.weights[r * H], &rows_.q[r * H * D], H, D);
    const double tol = tol_rel_ * weight_bound * kv_bound_;

    int64_t count = 0;
    while (count < k && row[count] != -1) ++count;
    if (count != ref_count) {
      where << count << " valid indices before the -1 padding, the reference has " << ref_count;
      return where.str();
    }
    for (int64_t i = count; i < k; ++i) {
      if (row[i] != -1) {
        where << "slot " << i << " holds " << row[i] << " after the valid prefix, expected -1";
        return where.str();
      }
    }
    std::unordered_set<int32_t> seen;
    for (int64_t i = 0; i < count; ++i) {
      const int32_t index = row[i];
      if (index < 0 || index >= length) {
        where << "slot " << i << " holds " << index << ", outside [0, " << length << ")";
        return where.str();
      }
      if (!seen.insert(index).second) {
        where << "index " << index << " is selected twice";
        return where.str();
      }
      float score = 0.0f;
      scorer.score_row_f32(r, begin + index, begin + index + 1, &score);
      if (!(score >= kth - 2.0 * tol)) {
        where << "slot " << i << " selects key " << begin + index << " with CPU score " << score
              << ", below the reference's k-th score " << kth << " - 2 * tolerance " << tol;
        return where.str();
      }
    }
  }
  return "";
}

}  // namespace litetopk::testkit
