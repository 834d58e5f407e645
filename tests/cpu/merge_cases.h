// merge_topk test cases shared by the CPU and GPU suites: random shard lists with the adversarial
// features the contract names (ties across shards, NaN, -1 slots, counts outside [0, k_in], the
// all-gather layout), and a plain reference written apart from the library (a std::sort of
// (value, index) pairs with float comparison).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "litetopk/merge.h"

namespace litetopk::merge_testing {

enum class Layout { kRows, kGathered, kPadded };  // [B, S, k_in], [S, B, k_in], strided rows

struct MergeCase {
  int64_t batch;
  int64_t shards;
  int64_t k_in;
  int64_t k;
  bool largest;
  Layout layout;
  bool with_counts;
  double nan_rate;    // NaN value, valid index
  double empty_rate;  // index -1, finite value
};

inline std::string describe(const MergeCase& c) {
  return "batch " + std::to_string(c.batch) + " shards " + std::to_string(c.shards) + " k_in " +
         std::to_string(c.k_in) + " k " + std::to_string(c.k) +
         (c.largest ? " largest" : " smallest") + " layout " +
         std::to_string(static_cast<int>(c.layout)) + (c.with_counts ? " counts" : "");
}

struct MergeInputs {
  std::vector<float> values;
  std::vector<int32_t> indices;
  std::vector<int32_t> counts;
  MergeProblem problem;  // sizes and strides; values, indices, counts point into the vectors
};

// Values are small integers (ties within and across shards) and the odd +-inf; each row's
// indices are distinct. Slots past a list's count hold +inf or -inf with a valid index, so a
// merge that reads past the count selects them.
inline MergeInputs make_inputs(const MergeCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  MergeInputs in;
  MergeProblem& p = in.problem;
  p.batch = c.batch;
  p.shards = c.shards;
  p.k_in = c.k_in;
  p.k = c.k;
  p.largest = c.largest;
  int64_t elements = 0;
  if (c.layout == Layout::kRows) {
    elements = c.batch * c.shards * c.k_in;
  } else if (c.layout == Layout::kGathered) {
    p.row_stride = c.k_in;
    p.shard_stride = c.batch * c.k_in;
    elements = c.batch * c.shards * c.k_in;
  } else {
    p.shard_stride = c.k_in + 3;
    p.row_stride = c.shards * p.shard_stride + 5;
    elements = std::max<int64_t>(c.batch, 1) * p.row_stride;
  }
  const int64_t row_stride = p.row_stride ? p.row_stride : c.shards * c.k_in;
  const int64_t shard_stride = p.shard_stride ? p.shard_stride : c.k_in;
  in.values.assign(static_cast<std::size_t>(elements), 1e30f);
  in.indices.assign(static_cast<std::size_t>(elements), 12345);
  if (c.with_counts) in.counts.resize(static_cast<std::size_t>(c.batch * c.shards));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> small(-8, 7);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<int32_t> pool(static_cast<std::size_t>(c.shards * c.k_in * 3));
  for (int64_t b = 0; b < c.batch; ++b) {
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::size_t next = 0;
    for (int64_t s = 0; s < c.shards; ++s) {
      int64_t count = c.k_in;
      if (c.with_counts) {
        const int32_t drawn = std::uniform_int_distribution<int32_t>(
            -1, static_cast<int32_t>(c.k_in) + 1)(rng);
        in.counts[static_cast<std::size_t>(b * c.shards + s)] = drawn;
        count = std::clamp<int64_t>(drawn, 0, c.k_in);
      }
      for (int64_t j = 0; j < c.k_in; ++j) {
        const auto at = static_cast<std::size_t>(b * row_stride + s * shard_stride + j);
        const double draw = unit(rng);
        float value = static_cast<float>(small(rng));
        if (draw < 0.03) value = inf;
        if (draw > 0.97) value = -inf;
        int32_t index = pool[next++];
        if (j >= count) {
          value = (draw < 0.5) ? inf : -inf;
        } else if (unit(rng) < c.empty_rate) {
          index = -1;
        } else if (unit(rng) < c.nan_rate) {
          value = std::numeric_limits<float>::quiet_NaN();
        }
        in.values[at] = value;
        in.indices[at] = index;
      }
    }
  }
  p.values = in.values.data();
  p.indices = in.indices.data();
  p.counts = c.with_counts ? in.counts.data() : nullptr;
  return in;
}

// The better of two candidates: by value, then by smaller index.
inline bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b,
                   bool largest) {
  if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
  return a.second < b.second;
}

// Each row's selected (value, index) pairs best first (fewer than k when the row has fewer).
inline std::vector<std::vector<std::pair<float, int32_t>>> plain_merge(const MergeProblem& p) {
  const int64_t row_stride = p.row_stride ? p.row_stride : p.shards * p.k_in;
  const int64_t shard_stride = p.shard_stride ? p.shard_stride : p.k_in;
  std::vector<std::vector<std::pair<float, int32_t>>> rows(static_cast<std::size_t>(p.batch));
  for (int64_t b = 0; b < p.batch; ++b) {
    auto& row = rows[static_cast<std::size_t>(b)];
    for (int64_t s = 0; s < p.shards; ++s) {
      int64_t count = p.k_in;
      if (p.counts) count = std::clamp<int64_t>(p.counts[b * p.shards + s], 0, p.k_in);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t at = b * row_stride + s * shard_stride + j;
        if (p.indices[at] < 0 || std::isnan(p.values[at])) continue;
        row.emplace_back(p.values[at], p.indices[at]);
      }
    }
    std::sort(row.begin(), row.end(),
              [&](const auto& x, const auto& y) { return better(x, y, p.largest); });
    if (static_cast<int64_t>(row.size()) > p.k) row.resize(static_cast<std::size_t>(p.k));
  }
  return rows;
}

inline uint32_t bits_of(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// Checks a merge's output against the plain reference: with `sorted`, slot by slot; otherwise
// the row's pairs in any order. Padded slots: index -1 and (with values) NaN.
inline ::testing::AssertionResult matches_plain(const MergeProblem& p,
                                                const std::vector<int32_t>& indices,
                                                const std::vector<float>& values, bool sorted) {
  const auto expected = plain_merge(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    const auto& want = expected[static_cast<std::size_t>(b)];
    std::vector<std::pair<float, int32_t>> got;
    for (int64_t i = 0; i < p.k; ++i) {
      const auto at = static_cast<std::size_t>(b * p.k + i);
      const bool padded = i >= static_cast<int64_t>(want.size());
      if (padded) {
        if (indices[at] != -1 || (!values.empty() && !std::isnan(values[at]))) {
          return ::testing::AssertionFailure()
                 << "row " << b << " slot " << i << ": expected padding (-1, NaN), got ("
                 << indices[at] << ", " << (values.empty() ? 0.0f : values[at]) << ")";
        }
        continue;
      }
      got.emplace_back(values.empty() ? want[static_cast<std::size_t>(i)].first : values[at],
                       indices[at]);
    }
    if (!sorted) {
      std::sort(got.begin(), got.end(),
                [&](const auto& x, const auto& y) { return better(x, y, p.largest); });
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (got[i].second != want[i].second || bits_of(got[i].first) != bits_of(want[i].first)) {
        return ::testing::AssertionFailure()
               << "row " << b << " rank " << i << ": expected (" << want[i].first << ", "
               << want[i].second << "), got (" << got[i].first << ", " << got[i].second << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The cases both suites run: one shard and many, k_in below and above k, k above every row's
// candidates, each layout, counts, NaN and -1 slots.
inline std::vector<MergeCase> standard_cases() {
  std::vector<MergeCase> cases;
  for (const int64_t shards : {1, 2, 3, 8, 33}) {
    for (const int64_t k_in : {1, 7, 64, 300}) {
      for (const int64_t k : {1, 5, 64, 2048}) {
        for (const Layout layout : {Layout::kRows, Layout::kGathered, Layout::kPadded}) {
          const bool odd = ((shards + k_in + k) % 2) == 1;
          cases.push_back({3, shards, k_in, k, odd, layout, !odd, 0.1, 0.1});
        }
      }
    }
  }
  return cases;
}

}  // namespace litetopk::merge_testing
