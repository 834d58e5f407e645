// merge_topk_cpu against a plain reference on random and adversarial shard lists, and the
// property the distributed ops rest on: merging each shard's local top-k equals the top-k of the
// whole row (select_topk_cpu), index for index.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/merge_cases.h"
#include "litetopk/merge.h"
#include "litetopk/select.h"

namespace litetopk {
namespace {

using merge_testing::Layout;
using merge_testing::MergeCase;

struct Output {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

Output run_cpu(MergeProblem p) {
  Output out;
  out.indices.assign(static_cast<std::size_t>(p.batch * p.k), 777);
  out.values.assign(static_cast<std::size_t>(p.batch * p.k), 5.0f);
  p.out_indices = out.indices.data();
  p.out_values = out.values.data();
  const Status status = merge_topk_cpu(p);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return out;
}

// The problem of row-major lists [batch, shards, k_in] in host vectors.
MergeProblem lists(const std::vector<float>& values, const std::vector<int32_t>& indices,
                   int64_t batch, int64_t shards, int64_t k_in, int64_t k) {
  MergeProblem p;
  p.values = values.data();
  p.indices = indices.data();
  p.batch = batch;
  p.shards = shards;
  p.k_in = k_in;
  p.k = k;
  return p;
}

TEST(MergeReference, RandomListsMatchPlainReference) {
  uint32_t seed = 1;
  for (const MergeCase& c : merge_testing::standard_cases()) {
    const merge_testing::MergeInputs in = merge_testing::make_inputs(c, seed++);
    const Output out = run_cpu(in.problem);
    EXPECT_TRUE(merge_testing::matches_plain(in.problem, out.indices, out.values, true))
        << describe(c);
  }
}

TEST(MergeReference, TiesAcrossShardsTakeTheSmallestIndices) {
  // Every candidate of every shard has the same value: the k smallest global indices win.
  const int64_t shards = 4;
  const int64_t k_in = 5;
  std::vector<float> values(shards * k_in, 2.5f);
  std::vector<int32_t> indices(shards * k_in);
  for (int64_t s = 0; s < shards; ++s) {
    for (int64_t j = 0; j < k_in; ++j) {
      indices[s * k_in + j] = static_cast<int32_t>(j * shards + (shards - 1 - s));
    }
  }
  MergeProblem p = lists(values, indices, 1, shards, k_in, 6);
  for (const bool largest : {true, false}) {
    p.largest = largest;
    const Output out = run_cpu(p);
    EXPECT_EQ(out.indices, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(out.values, std::vector<float>(6, 2.5f));
  }
}

TEST(MergeReference, NanAndEmptySlotsAreNeverSelected) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Shard 0: NaN with a valid index, +inf with index -1 (empty), then 1.
  // Shard 1: all -1 (an empty shard). Shard 2: -inf and 0.
  std::vector<float> values = {nan, inf, 1.0f, 9.0f, 9.0f, 9.0f, -inf, 0.0f, nan};
  std::vector<int32_t> indices = {10, -1, 11, -1, -1, -1, 30, 31, 32};
  MergeProblem p = lists(values, indices, 1, 3, 3, 5);
  const Output out = run_cpu(p);
  EXPECT_EQ(out.indices, (std::vector<int32_t>{11, 31, 30, -1, -1}));
  EXPECT_EQ(out.values[0], 1.0f);
  EXPECT_EQ(out.values[1], 0.0f);
  EXPECT_EQ(out.values[2], -inf);
  EXPECT_TRUE(std::isnan(out.values[3]) && std::isnan(out.values[4]));
}

TEST(MergeReference, AllEmptyRowsArePadding) {
  std::vector<float> values(2 * 3 * 4, 1.0f);
  std::vector<int32_t> indices(values.size(), -1);
  MergeProblem p = lists(values, indices, 2, 3, 4, 7);
  const Output out = run_cpu(p);
  EXPECT_EQ(out.indices, std::vector<int32_t>(14, -1));
  for (const float v : out.values) EXPECT_TRUE(std::isnan(v));
}

TEST(MergeReference, CountsAreClampedIntoTheList) {
  std::vector<float> values = {5, 4, 3, 9, 8, 7};
  std::vector<int32_t> indices = {0, 1, 2, 3, 4, 5};
  const std::vector<int32_t> counts = {-3, 9};  // shard 0 empty, shard 1 whole
  MergeProblem p = lists(values, indices, 1, 2, 3, 4);
  p.counts = counts.data();
  const Output out = run_cpu(p);
  EXPECT_EQ(out.indices, (std::vector<int32_t>{3, 4, 5, -1}));
}

// A row of `n` scores with ties, NaN, -0.0, +0.0 and +-inf.
std::vector<float> adversarial_row(int64_t n, std::mt19937& rng) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.0f, 0.0f};
  std::uniform_int_distribution<int> pick(0, 24);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (float& v : row) {
    const int draw = pick(rng);
    v = draw < 5 ? specials[draw] : static_cast<float>(draw % 7) - 3.0f;
  }
  return row;
}

// Shards [bounds[s], bounds[s + 1]) of every row: local top-k_in with select_topk_cpu, indices
// shifted to global ones, then merged; equal to the whole row's select_topk_cpu.
TEST(MergeReference, MergedShardTopkEqualsWholeRowTopk) {
  std::mt19937 rng(7);
  const int64_t batch = 3;
  const int64_t n = 400;
  const std::vector<std::vector<int64_t>> splits = {
      {0, 400}, {0, 200, 400}, {0, 0, 150, 151, 400}, {0, 57, 100, 250, 399, 400}};
  std::vector<float> scores(static_cast<std::size_t>(batch * n));
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<float> row = adversarial_row(n, rng);
    std::copy(row.begin(), row.end(), scores.begin() + b * n);
  }
  for (const auto& bounds : splits) {
    for (const int64_t k : {1, 16, 150, 500}) {
      for (const bool largest : {true, false}) {
        const auto shards = static_cast<int64_t>(bounds.size()) - 1;
        const int64_t k_in = k;
        // All-gather layout [shards, batch, k_in].
        std::vector<float> values(static_cast<std::size_t>(shards * batch * k_in));
        std::vector<int32_t> indices(values.size());
        for (int64_t s = 0; s < shards; ++s) {
          SelectProblem local;
          local.scores = scores.data() + bounds[s];
          local.batch = batch;
          local.n = bounds[s + 1] - bounds[s];
          local.row_stride = n;
          local.k = k_in;
          local.largest = largest;
          local.deterministic = true;
          local.indices = indices.data() + s * batch * k_in;
          local.values = values.data() + s * batch * k_in;
          ASSERT_TRUE(select_topk_cpu(local, CpuSelectAlgo::kReference).is_ok());
          for (int64_t i = 0; i < batch * k_in; ++i) {
            int32_t& index = indices[static_cast<std::size_t>(s * batch * k_in + i)];
            if (index >= 0) index += static_cast<int32_t>(bounds[s]);
          }
        }
        MergeProblem p;
        p.values = values.data();
        p.indices = indices.data();
        p.batch = batch;
        p.shards = shards;
        p.k_in = k_in;
        p.row_stride = k_in;
        p.shard_stride = batch * k_in;
        p.k = k;
        p.largest = largest;
        p.sorted = true;
        const Output merged = run_cpu(p);

        std::vector<int32_t> want_indices(static_cast<std::size_t>(batch * k));
        std::vector<float> want_values(want_indices.size());
        SelectProblem whole;
        whole.scores = scores.data();
        whole.batch = batch;
        whole.n = n;
        whole.k = k;
        whole.largest = largest;
        whole.sorted = true;
        whole.deterministic = true;
        whole.indices = want_indices.data();
        whole.values = want_values.data();
        ASSERT_TRUE(select_topk_cpu(whole, CpuSelectAlgo::kReference).is_ok());
        EXPECT_EQ(merged.indices, want_indices) << shards << " shards, k " << k;
        for (std::size_t i = 0; i < want_values.size(); ++i) {
          ASSERT_EQ(merge_testing::bits_of(merged.values[i]),
                    merge_testing::bits_of(want_values[i]))
              << "slot " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace litetopk
