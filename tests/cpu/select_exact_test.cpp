// Small hand-checked selections with one correct answer each. They check the reference (the
// oracle of every other test) against answers worked out by hand, and kFast the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/select_testing.h"
#include "litetopk/select.h"

namespace litetopk::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint32_t kF32NaN = 0x7fc00000u;

class SelectExact : public ::testing::TestWithParam<CpuSelectAlgo> {
 protected:
  // Runs the parameter's algorithm (with 2 threads for kFast) after filling the outputs with a
  // sentinel; sorted and deterministic so the answer is unique.
  Status run(SelectProblem p) {
    p.sorted = true;
    p.deterministic = true;
    indices.assign(static_cast<std::size_t>(p.batch * p.k), 0x5a5a5a5a);
    p.indices = indices.data();
    if (with_values) {
      values.assign(static_cast<std::size_t>(p.batch * p.k) * dtype_size(p.dtype), 0x5a);
      p.values = values.data();
    }
    return select_topk_cpu(p, GetParam(), 2);
  }
  uint32_t value_bits(DType dtype, int64_t slot) const {
    return load_score(values.data(), dtype, slot);
  }

  bool with_values = true;
  std::vector<int32_t> indices;
  std::vector<uint8_t> values;
};

SelectProblem f32_problem(const std::vector<float>& scores, int64_t batch, int64_t n, int64_t k) {
  SelectProblem p;
  p.scores = scores.data();
  p.dtype = DType::kFloat32;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

const std::vector<float> kRow = {1.0f, 5.0f, kNaN, 5.0f, -kInf, 2.0f};

TEST_P(SelectExact, LargestSkipsNanAndBreaksTiesByIndex) {
  ASSERT_TRUE(run(f32_problem(kRow, 1, 6, 3)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ(value_bits(DType::kFloat32, 0), f32_bits(5.0f));
  EXPECT_EQ(value_bits(DType::kFloat32, 1), f32_bits(5.0f));
  EXPECT_EQ(value_bits(DType::kFloat32, 2), f32_bits(2.0f));
}

TEST_P(SelectExact, SmallestTakesNegInfFirst) {
  SelectProblem p = f32_problem(kRow, 1, 6, 3);
  p.largest = false;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{4, 0, 5}));
  EXPECT_EQ(value_bits(DType::kFloat32, 0), f32_bits(-kInf));
  EXPECT_EQ(value_bits(DType::kFloat32, 1), f32_bits(1.0f));
  EXPECT_EQ(value_bits(DType::kFloat32, 2), f32_bits(2.0f));
}

TEST_P(SelectExact, PadsWhenFewerValidThanK) {
  ASSERT_TRUE(run(f32_problem(kRow, 1, 6, 8)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 3, 5, 0, 4, -1, -1, -1}));
  EXPECT_EQ(value_bits(DType::kFloat32, 4), f32_bits(-kInf));
  for (int64_t s = 5; s < 8; ++s) EXPECT_EQ(value_bits(DType::kFloat32, s), kF32NaN) << s;
}

TEST_P(SelectExact, KEqualsOneAndKEqualsN) {
  ASSERT_TRUE(run(f32_problem(kRow, 1, 6, 1)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1}));
  ASSERT_TRUE(run(f32_problem(kRow, 1, 6, 6)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 3, 5, 0, 4, -1}));
}

TEST_P(SelectExact, RangesAreRelativeToStart) {
  // Two rows of kRow; row 0 uses [2, 5) = {NaN, 5, -inf}, row 1 the empty range [3, 3).
  std::vector<float> scores = kRow;
  scores.insert(scores.end(), kRow.begin(), kRow.end());
  const std::vector<int32_t> starts = {2, 3}, ends = {5, 3};
  SelectProblem p = f32_problem(scores, 2, 6, 3);
  p.row_starts = starts.data();
  p.row_ends = ends.data();
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 2, -1, -1, -1, -1}));
  EXPECT_EQ(value_bits(DType::kFloat32, 0), f32_bits(5.0f));
  EXPECT_EQ(value_bits(DType::kFloat32, 1), f32_bits(-kInf));
  for (int64_t s = 2; s < 6; ++s) EXPECT_EQ(value_bits(DType::kFloat32, s), kF32NaN) << s;
}

TEST_P(SelectExact, OnlyStartsOrOnlyEnds) {
  const std::vector<int32_t> starts = {3};
  SelectProblem p = f32_problem(kRow, 1, 6, 2);
  p.row_starts = starts.data();  // [3, 6) = {5, -inf, 2}
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 2}));
  const std::vector<int32_t> ends = {3};
  p.row_starts = nullptr;
  p.row_ends = ends.data();  // [0, 3) = {1, 5, NaN}
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 0}));
}

TEST_P(SelectExact, RowStrideSkipsPadding) {
  // Two rows of n = 3 with stride 5; the two padding elements are +inf and must not be read.
  const std::vector<float> scores = {1, 2, 3, kInf, kInf, 6, 5, 4, kInf, kInf};
  SelectProblem p = f32_problem(scores, 2, 3, 2);
  p.row_stride = 5;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{2, 1, 0, 1}));
  EXPECT_EQ(value_bits(DType::kFloat32, 2), f32_bits(6.0f));
}

TEST_P(SelectExact, TiesPickSmallestIndices) {
  const std::vector<float> scores = {3, 3, 7, 3, 3, 3};
  ASSERT_TRUE(run(f32_problem(scores, 1, 6, 3)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{2, 0, 1}));
  SelectProblem p = f32_problem(scores, 1, 6, 2);
  p.largest = false;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1}));
}

TEST_P(SelectExact, AllNanAndAllNegInfRows) {
  const std::vector<float> scores = {kNaN, -kNaN, kNaN, -kInf, -kInf, -kInf};
  ASSERT_TRUE(run(f32_problem(scores, 2, 3, 2)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{-1, -1, 0, 1}));
  EXPECT_EQ(value_bits(DType::kFloat32, 0), kF32NaN);
  EXPECT_EQ(value_bits(DType::kFloat32, 1), kF32NaN);
  EXPECT_EQ(value_bits(DType::kFloat32, 2), f32_bits(-kInf));
}

TEST_P(SelectExact, PositiveZeroBeatsNegativeZero) {
  // -0.0 and +0.0 get different keys, -0.0 < +0.0 (see score_keys_test.cpp).
  const std::vector<float> scores = {-0.0f, 0.0f, -0.0f};
  ASSERT_TRUE(run(f32_problem(scores, 1, 3, 2)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(value_bits(DType::kFloat32, 0), f32_bits(0.0f));
  EXPECT_EQ(value_bits(DType::kFloat32, 1), f32_bits(-0.0f));
}

TEST_P(SelectExact, BFloat16ValuesAreBitExact) {
  // 1.0, NaN, -3.0, 2.0, +inf, 2.0 (two ties), denormal 0x0001
  const std::vector<uint16_t> scores = {0x3f80, 0x7fc1, 0xc040, 0x4000, 0x7f80, 0x4000, 0x0001};
  SelectProblem p;
  p.scores = scores.data();
  p.dtype = DType::kBFloat16;
  p.batch = 1;
  p.n = 7;
  p.k = 7;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{4, 3, 5, 0, 6, 2, -1}));
  const std::vector<uint32_t> want = {0x7f80, 0x4000, 0x4000, 0x3f80, 0x0001, 0xc040, 0x7fc0};
  for (int64_t s = 0; s < 7; ++s) EXPECT_EQ(value_bits(DType::kBFloat16, s), want[s]) << s;
}

TEST_P(SelectExact, Float16SmallestValuesAreBitExact) {
  // 1.0, -2.0, 0.5, +inf, NaN, -inf, -0.0, 0x8001 (the smallest negative subnormal)
  const std::vector<uint16_t> scores = {0x3c00, 0xc000, 0x3800, 0x7c00,
                                        0x7e01, 0xfc00, 0x8000, 0x8001};
  SelectProblem p;
  p.scores = scores.data();
  p.dtype = DType::kFloat16;
  p.batch = 1;
  p.n = 8;
  p.k = 9;
  p.largest = false;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{5, 1, 7, 6, 2, 0, 3, -1, -1}));
  const std::vector<uint32_t> want = {0xfc00, 0xc000, 0x8001, 0x8000, 0x3800,
                                      0x3c00, 0x7c00, 0x7e00, 0x7e00};
  for (int64_t s = 0; s < 9; ++s) EXPECT_EQ(value_bits(DType::kFloat16, s), want[s]) << s;
}

TEST_P(SelectExact, ValuesAreOptional) {
  with_values = false;
  ASSERT_TRUE(run(f32_problem(kRow, 1, 6, 2)).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 3}));
}

TEST_P(SelectExact, BatchZeroIsANoOp) {
  SelectProblem p = f32_problem(kRow, 0, 6, 3);
  int32_t sentinel = 42;
  p.indices = &sentinel;
  EXPECT_TRUE(select_topk_cpu(p, GetParam(), 2).is_ok());
  EXPECT_EQ(sentinel, 42);
  p.scores = nullptr;
  p.indices = nullptr;  // nothing is read or written, so null pointers are fine too
  EXPECT_TRUE(select_topk_cpu(p, GetParam(), 2).is_ok());
}

TEST_P(SelectExact, EmptyRowsArePadded) {
  SelectProblem p;
  p.scores = nullptr;  // n = 0: nothing to read
  p.batch = 2;
  p.n = 0;
  p.k = 2;
  ASSERT_TRUE(run(p).is_ok());
  EXPECT_EQ(indices, (std::vector<int32_t>{-1, -1, -1, -1}));
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(value_bits(DType::kFloat32, s), kF32NaN) << s;
}

TEST_P(SelectExact, UnsortedModeReturnsTheSameSet) {
  std::vector<float> scores(1000);
  for (int i = 0; i < 1000; ++i) scores[i] = static_cast<float>((i * 7919) % 1000);
  SelectProblem p = f32_problem(scores, 1, 1000, 10);
  std::vector<int32_t> out(10, 0);
  p.indices = out.data();
  ASSERT_TRUE(select_topk_cpu(p, GetParam(), 1).is_ok());
  std::vector<float> got;
  for (int32_t i : out) got.push_back(scores[static_cast<std::size_t>(i)]);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<float>{990, 991, 992, 993, 994, 995, 996, 997, 998, 999}));
}

INSTANTIATE_TEST_SUITE_P(Algo, SelectExact,
                         ::testing::Values(CpuSelectAlgo::kReference, CpuSelectAlgo::kFast),
                         [](const ::testing::TestParamInfo<CpuSelectAlgo>& param_info) {
                           return param_info.param == CpuSelectAlgo::kReference ? "Reference"
                                                                                : "Fast";
                         });

}  // namespace
}  // namespace litetopk::testing
