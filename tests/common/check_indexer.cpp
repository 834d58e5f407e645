// check_indexer_oracle and check_indexer_agreement (see indexer_testing.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/indexer_testing.h"
#include "cpu/indexer_scores.h"
#include "cpu/parallel_for.h"

namespace litetopk::testing {

double indexer_tolerance_rel(int64_t D, int64_t H) {
  const double n = static_cast<double>(D + H + 2);
  const double u = std::ldexp(1.0, -24);
  return n * u / (1.0 - n * u);
}

double indexer_tolerance_rel_gpu(int64_t D, int64_t H) {
  const double n = static_cast<double>(H + 2);
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(D / 32) * std::ldexp(1.0, -13) + n * u / (1.0 - n * u);
}

namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// Checks query t; returns an empty string when it passes, else what is wrong.
std::string check_query(const IndexerCase& c, const HostIndexerInputs& in,
                        const cpu::IndexerScorer& scorer, const std::vector<double>& kv_norm,
                        double rel, int64_t t, const int32_t* indices, const float* values) {
  const int64_t S = static_cast<int64_t>(in.kv_scale.size());
  const int64_t H = c.H, D = c.D, k = c.k;
  const int64_t begin = std::clamp<int64_t>(in.ks[size(t)], 0, S);
  const int64_t end = std::clamp<int64_t>(in.ke[size(t)], begin, S);
  const int64_t len = end - begin;
  std::vector<double> scores(size(len));
  scorer.score_row(t, begin, end, scores.data());

  // Tolerance (see indexer_testing.h).
  double kv_max = 0.0;
  for (int64_t s = begin; s < end; ++s) {
    const double v = std::fabs(static_cast<double>(in.kv_scale[size(s)])) * kv_norm[size(s)];
    if (!std::isnan(v)) kv_max = std::max(kv_max, v);
  }
  const double head_sum =
      cpu::weighted_query_norm(&in.weights[size(t * H)], &in.q[size(t * H * D)], H, D);
  const double tol = rel * head_sum * kv_max + 1e-30;

  std::vector<double> valid;
  valid.reserve(size(len));
  for (double s : scores) {
    if (!std::isnan(s)) valid.push_back(s);
  }
  const int64_t count = std::min<int64_t>(k, static_cast<int64_t>(valid.size()));
  double kth = -std::numeric_limits<double>::infinity();
  if (count > 0) {
    std::nth_element(valid.begin(), valid.begin() + (count - 1), valid.end(),
                     [](double a, double b) { return a > b; });
    kth = valid[size(count - 1)];
  }

  std::ostringstream why;
  why.precision(17);
  const int32_t* row = indices + t * k;
  const float* row_values = values ? values + t * k : nullptr;
  std::unordered_set<int32_t> seen;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t index = row[i];
    if (i >= count) {
      if (index != -1) {
        why << "slot " << i << ": expected -1 padding (valid count " << count << " of range ["
            << begin << ", " << end << "), k " << k << "), got " << index;
        return why.str();
      }
      if (row_values && !std::isnan(row_values[i])) {
        why << "slot " << i << ": padded value must be NaN, got " << row_values[i];
        return why.str();
      }
      continue;
    }
    if (index < 0 || index >= len) {
      why << "slot " << i << ": index " << index << " outside [0, " << len
          << ") (expected valid count " << count << ")";
      return why.str();
    }
    if (!seen.insert(index).second) {
      why << "slot " << i << ": duplicate index " << index;
      return why.str();
    }
    const double score = scores[size(index)];
    if (std::isnan(score)) {
      why << "slot " << i << ": index " << index << " has a NaN score";
      return why.str();
    }
    if (!(score >= kth - 2.0 * tol)) {
      why << "slot " << i << ": index " << index << " has fp64 score " << score
          << " below the k-th best " << kth << " - 2 tol (tol " << tol << ")";
      return why.str();
    }
    if (row_values) {
      const double value = row_values[i];
      if (!(std::fabs(value - score) <= tol)) {
        why << "slot " << i << ": index " << index << " value " << value << " differs from fp64 "
            << score << " by more than tol " << tol;
        return why.str();
      }
    }
  }
  return {};
}

}  // namespace

::testing::AssertionResult check_indexer_oracle(const IndexerCase& c,
                                                const HostIndexerInputs& inputs,
                                                const int32_t* indices, const float* values,
                                                double rel_tol) {
  const int64_t T = static_cast<int64_t>(inputs.ks.size());
  const int64_t S = static_cast<int64_t>(inputs.kv_scale.size());
  if (T == 0) return ::testing::AssertionSuccess();
  if (indices == nullptr) {
    return ::testing::AssertionFailure() << "case " << c.name << ": indices is null";
  }
  const IndexerProblem problem = make_indexer_problem(c, inputs, nullptr, nullptr);
  const cpu::IndexerScorer scorer(problem);
  const double rel = rel_tol > 0.0 ? rel_tol : indexer_tolerance_rel(c.D, c.H);
  std::vector<double> kv_norm(size(S));
  for (int64_t s = 0; s < S; ++s) kv_norm[size(s)] = cpu::fp8_l2_norm(&inputs.kv[size(s * c.D)], c.D);

  std::vector<std::string> failures(size(T));
  cpu::parallel_for(T, cpu::hardware_threads(), [&](int64_t t) {
    failures[size(t)] = check_query(c, inputs, scorer, kv_norm, rel, t, indices, values);
  });
  for (int64_t t = 0; t < T; ++t) {
    if (!failures[size(t)].empty()) {
      return ::testing::AssertionFailure()
             << "case " << c.name << " query " << t << " (range [" << inputs.ks[size(t)] << ", "
             << inputs.ke[size(t)] << ")): " << failures[size(t)];
    }
  }
  return ::testing::AssertionSuccess();
}

namespace {

struct Row {
  int64_t count = 0;
  std::unordered_map<int32_t, float> entries;  // index -> value (0 without values)
};

// Reads one result row: the valid prefix, then -1 padding; empty string when well formed.
std::string read_row(const int32_t* indices, const float* values, int64_t k, Row* row) {
  std::ostringstream why;
  row->count = 0;
  while (row->count < k && indices[row->count] != -1) ++row->count;
  for (int64_t i = row->count; i < k; ++i) {
    if (indices[i] != -1) {
      why << "slot " << i << " holds " << indices[i] << " after -1 padding began at slot "
          << row->count;
      return why.str();
    }
  }
  for (int64_t i = 0; i < row->count; ++i) {
    if (indices[i] < 0) {
      why << "slot " << i << " holds negative index " << indices[i];
      return why.str();
    }
    if (!row->entries.emplace(indices[i], values ? values[i] : 0.0f).second) {
      why << "slot " << i << " holds duplicate index " << indices[i];
      return why.str();
    }
  }
  return {};
}

std::string compare_rows(const Row& a, const Row& b, bool with_values, int64_t k) {
  std::ostringstream why;
  why.precision(9);
  if (a.count != b.count) {
    why << "valid counts differ: " << a.count << " vs " << b.count;
    return why.str();
  }
  if (a.count == 0) return {};
  if (!with_values || a.count < k) {
    // Every selectable entry is in both (count < k), or there are no values to judge ties by.
    for (const auto& [index, value] : a.entries) {
      const auto it = b.entries.find(index);
      if (it == b.entries.end()) {
        why << "index " << index << " is in the first result only";
        return why.str();
      }
      if (with_values && !(it->second == value)) {
        why << "index " << index << " has values " << value << " vs " << it->second;
        return why.str();
      }
    }
    return {};
  }
  float kth_a = std::numeric_limits<float>::infinity(), kth_b = kth_a;
  for (const auto& entry : a.entries) kth_a = std::min(kth_a, entry.second);
  for (const auto& entry : b.entries) kth_b = std::min(kth_b, entry.second);
  if (!(kth_a == kth_b)) {
    why << "k-th values differ: " << kth_a << " vs " << kth_b;
    return why.str();
  }
  for (const auto& [index, value] : a.entries) {
    const auto it = b.entries.find(index);
    if (it == b.entries.end()) {
      if (!(value == kth_a)) {
        why << "index " << index << " (value " << value
            << ") is in the first result only and not tied at the k-th value " << kth_a;
        return why.str();
      }
    } else if (!(it->second == value)) {
      why << "index " << index << " has values " << value << " vs " << it->second;
      return why.str();
    }
  }
  for (const auto& [index, value] : b.entries) {
    if (a.entries.count(index) == 0 && !(value == kth_b)) {
      why << "index " << index << " (value " << value
          << ") is in the second result only and not tied at the k-th value " << kth_b;
      return why.str();
    }
  }
  return {};
}

}  // namespace

::testing::AssertionResult check_indexer_agreement(const IndexerCase& c, const int32_t* a_indices,
                                                   const float* a_values,
                                                   const int32_t* b_indices,
                                                   const float* b_values) {
  const bool with_values = a_values != nullptr && b_values != nullptr;
  for (int64_t t = 0; t < c.T; ++t) {
    Row a, b;
    std::string why = read_row(a_indices + t * c.k, a_values ? a_values + t * c.k : nullptr,
                               c.k, &a);
    if (why.empty()) {
      why = read_row(b_indices + t * c.k, b_values ? b_values + t * c.k : nullptr, c.k, &b);
      if (!why.empty()) why = "second result: " + why;
    } else {
      why = "first result: " + why;
    }
    if (why.empty()) why = compare_rows(a, b, with_values, c.k);
    if (!why.empty()) {
      return ::testing::AssertionFailure() << "case " << c.name << " query " << t << ": " << why;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace litetopk::testing
