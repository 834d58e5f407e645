// check_indexer_oracle (the testkit's IndexerChecker over every query) and
// check_indexer_agreement (see indexer_testing.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/indexer_testing.h"
#include "testkit/indexer_verify.h"

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

::testing::AssertionResult check_indexer_oracle(const IndexerCase& c,
                                                const HostIndexerInputs& inputs,
                                                const int32_t* indices, const float* values,
                                                double rel_tol) {
  const auto T = static_cast<int64_t>(inputs.ks.size());
  if (T == 0) return ::testing::AssertionSuccess();
  if (indices == nullptr) {
    return ::testing::AssertionFailure() << "case " << c.name << ": indices is null";
  }
  std::vector<int64_t> queries(static_cast<std::size_t>(T));
  std::iota(queries.begin(), queries.end(), int64_t{0});
  const testkit::IndexerChecker checker(make_indexer_problem(c, inputs, nullptr, nullptr), queries,
                                        rel_tol > 0.0 ? rel_tol : indexer_tolerance_rel(c.D, c.H));
  const std::string error = checker.check(indices, values);
  if (error.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "case " << c.name << " " << error;
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
