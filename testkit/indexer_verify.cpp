#include "testkit/indexer_verify.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "litetopk/fp8_e4m3.h"

namespace litetopk::testkit {

namespace {

// Logits per indexer_logits_cpu call: the checked queries are scored in chunks of about this
// many floats.
constexpr int64_t kLogitsPerChunk = int64_t{1} << 24;

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// "" when one query's row passes (see IndexerChecker::check), else what is wrong.
std::string check_row(const std::vector<float>& scores, int64_t k, double tol,
                      const int32_t* row, const float* row_values) {
  const auto length = static_cast<int64_t>(scores.size());
  std::vector<float> valid;
  for (float s : scores) {
    if (!std::isnan(s)) valid.push_back(s);
  }
  const int64_t want_count = std::min<int64_t>(k, static_cast<int64_t>(valid.size()));
  double kth = std::numeric_limits<double>::infinity();
  if (want_count > 0) {
    std::nth_element(valid.begin(), valid.begin() + (want_count - 1), valid.end(),
                     std::greater<>());
    kth = valid[size(want_count - 1)];
  }

  std::ostringstream why;
  why.precision(9);
  int64_t count = 0;
  while (count < k && row[count] != -1) ++count;
  if (count != want_count) {
    why << count << " valid indices before the -1 padding, the reference has " << want_count;
    return why.str();
  }
  for (int64_t i = count; i < k; ++i) {
    if (row[i] != -1) {
      why << "slot " << i << " holds " << row[i] << " after the valid prefix, expected -1";
      return why.str();
    }
    if (row_values != nullptr && !std::isnan(row_values[i])) {
      why << "slot " << i << " is padding, its value must be NaN, got " << row_values[i];
      return why.str();
    }
  }
  std::unordered_set<int32_t> seen;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t index = row[i];
    if (index < 0 || index >= length) {
      why << "slot " << i << " holds " << index << ", outside [0, " << length << ")";
      return why.str();
    }
    if (!seen.insert(index).second) {
      why << "index " << index << " is selected twice";
      return why.str();
    }
    const double score = scores[size(index)];
    if (std::isnan(score)) {
      why << "slot " << i << " selects index " << index << ", whose score is NaN";
      return why.str();
    }
    if (!(score >= kth - 2.0 * tol)) {
      why << "slot " << i << " selects index " << index << " with CPU score " << score
          << ", below the reference's k-th score " << kth << " - 2 * tolerance " << tol;
      return why.str();
    }
    if (row_values != nullptr && !(std::fabs(static_cast<double>(row_values[i]) - score) <= tol)) {
      why << "slot " << i << " (index " << index << ") holds value " << row_values[i]
          << ", the CPU score is " << score << " (tolerance " << tol << ")";
      return why.str();
    }
  }
  return "";
}

}  // namespace

std::vector<int64_t> indexer_verify_queries(int64_t T) {
  std::vector<int64_t> queries;
  const int64_t count = std::min(T, kIndexerVerifyQueries);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = count == 1 ? 0 : i * (T - 1) / (count - 1);
    if (queries.empty() || queries.back() != t) queries.push_back(t);
  }
  return queries;
}

double fp8_l2_norm(const uint8_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = fp8::e4m3_to_float(x[i]);
    sum += v * v;
  }
  return std::sqrt(sum);
}

double weighted_query_norm(const float* weights, const uint8_t* q, int64_t H, int64_t D) {
  double sum = 0.0;
  for (int64_t h = 0; h < H; ++h) {
    sum += std::fabs(static_cast<double>(weights[h])) * fp8_l2_norm(q + h * D, D);
  }
  return sum;
}

IndexerChecker::IndexerChecker(const IndexerWorkload& w, const std::vector<int64_t>& queries,
                               double tol_rel)
    : IndexerChecker(w.host_problem(), queries, tol_rel) {}

IndexerChecker::IndexerChecker(const IndexerProblem& problem,
                               const std::vector<int64_t>& queries, double tol_rel)
    : k_(problem.k) {
  const int64_t H = problem.num_heads, D = problem.head_dim, S = problem.num_keys;
  const auto* q = static_cast<const uint8_t*>(problem.q);
  const auto* kv = static_cast<const uint8_t*>(problem.kv);
  std::vector<double> key_bound(size(S));  // |kv_scale[s]| * |kv[s]|_2
  for (int64_t s = 0; s < S; ++s) {
    key_bound[size(s)] =
        std::fabs(static_cast<double>(problem.kv_scale[s])) * fp8_l2_norm(kv + s * D, D);
  }

  const int64_t chunk = std::max<int64_t>(1, kLogitsPerChunk / std::max<int64_t>(1, S));
  std::vector<float> logits;
  for (std::size_t first = 0; first < queries.size(); first += size(chunk)) {
    const std::size_t last = std::min(queries.size(), first + size(chunk));
    // The chunk's queries as a problem of their own.
    std::vector<uint8_t> chunk_q;
    std::vector<float> chunk_weights;
    std::vector<int32_t> chunk_ks, chunk_ke;
    for (std::size_t i = first; i < last; ++i) {
      const int64_t t = queries[i];
      chunk_q.insert(chunk_q.end(), q + t * H * D, q + (t + 1) * H * D);
      chunk_weights.insert(chunk_weights.end(), problem.weights + t * H,
                           problem.weights + (t + 1) * H);
      chunk_ks.push_back(problem.ks[t]);
      chunk_ke.push_back(problem.ke[t]);
    }
    IndexerProblem rows = problem;
    rows.q = chunk_q.data();
    rows.weights = chunk_weights.data();
    rows.ks = chunk_ks.data();
    rows.ke = chunk_ke.data();
    rows.num_queries = static_cast<int64_t>(last - first);
    logits.assign(size(rows.num_queries * S), 0.0f);
    if (Status status = indexer_logits_cpu(rows, logits.data(), S); !status) {
      reference_error_ = "CPU reference failed: " + status.to_string();
      return;
    }
    for (std::size_t i = first; i < last; ++i) {
      Query query;
      query.t = queries[i];
      query.begin = std::clamp<int64_t>(problem.ks[query.t], 0, S);
      query.end = std::clamp<int64_t>(problem.ke[query.t], query.begin, S);
      const float* row = logits.data() + (i - first) * size(S);
      query.scores.assign(row + query.begin, row + query.end);
      double kv_max = 0.0;
      for (int64_t s = query.begin; s < query.end; ++s) {
        if (!std::isnan(key_bound[size(s)])) kv_max = std::max(kv_max, key_bound[size(s)]);
      }
      query.tolerance =
          tol_rel * weighted_query_norm(problem.weights + query.t * H, q + query.t * H * D, H, D) *
              kv_max +
          1e-30;
      queries_.push_back(std::move(query));
    }
  }
}

std::string IndexerChecker::check(const int32_t* indices, const float* values) const {
  if (!reference_error_.empty()) return reference_error_;
  for (const Query& query : queries_) {
    const std::string error = check_row(query.scores, k_, query.tolerance, indices + query.t * k_,
                                        values != nullptr ? values + query.t * k_ : nullptr);
    if (!error.empty()) {
      return "query " + std::to_string(query.t) + " (range [" + std::to_string(query.begin) +
             ", " + std::to_string(query.end) + ")): " + error;
    }
  }
  return "";
}

}  // namespace litetopk::testkit
