// Bad input to select_topk_cpu: kInvalidArgument naming the argument, and nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "litetopk/select.h"

namespace litetopk {
namespace {

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this: "<argument> must"
  void (*break_it)(SelectProblem&);
};

const int32_t kGoodStarts[2] = {0, 1};
const int32_t kGoodEnds[2] = {4, 4};
const int32_t kNegativeStart[2] = {-1, 0};
const int32_t kStartPastN[2] = {0, 5};
const int32_t kEndPastN[2] = {0, 5};
const int32_t kNegativeEnd[2] = {4, -2};
const int32_t kInvertedStarts[2] = {3, 0};
const int32_t kInvertedEnds[2] = {2, 4};

const BadInput kBadInputs[] = {
    {"NullScores", "scores must", [](SelectProblem& p) { p.scores = nullptr; }},
    {"NullIndices", "indices must", [](SelectProblem& p) { p.indices = nullptr; }},
    {"KZero", "k must", [](SelectProblem& p) { p.k = 0; }},
    {"KNegative", "k must", [](SelectProblem& p) { p.k = -5; }},
    {"KTooLarge", "k must", [](SelectProblem& p) { p.k = int64_t{1} << 31; }},
    {"NNegative", "n must", [](SelectProblem& p) { p.n = -1; }},
    {"NTooLarge", "n must",
     [](SelectProblem& p) {
       p.n = int64_t{1} << 31;
       p.row_stride = 0;
     }},
    {"BatchNegative", "batch must", [](SelectProblem& p) { p.batch = -1; }},
    {"RowStrideBelowN", "row_stride must", [](SelectProblem& p) { p.row_stride = 3; }},
    {"RowStrideNegative", "row_stride must", [](SelectProblem& p) { p.row_stride = -4; }},
    // Fits in elements (2^62 + 4) but not in bytes: row 1 would wrap onto row 0.
    {"RowsExtentOverflowsBytes", "the rows' extent in bytes overflows int64",
     [](SelectProblem& p) { p.row_stride = int64_t{1} << 62; }},
    {"DTypeInvalid", "dtype must", [](SelectProblem& p) { p.dtype = static_cast<DType>(7); }},
    {"StartNegative", "row_starts[0] must",
     [](SelectProblem& p) { p.row_starts = kNegativeStart; }},
    {"StartPastN", "row_starts[1] must", [](SelectProblem& p) { p.row_starts = kStartPastN; }},
    {"EndPastN", "row_ends[1] must", [](SelectProblem& p) { p.row_ends = kEndPastN; }},
    {"EndNegative", "row_ends[1] must", [](SelectProblem& p) { p.row_ends = kNegativeEnd; }},
    {"StartAfterEnd", "row_starts[0] must",
     [](SelectProblem& p) {
       p.row_starts = kInvertedStarts;
       p.row_ends = kInvertedEnds;
     }},
};

struct Param {
  BadInput input;
  CpuSelectAlgo algo;
};

void PrintTo(const Param& param, std::ostream* os) {
  *os << param.input.name << (param.algo == CpuSelectAlgo::kReference ? "/reference" : "/fast");
}

class SelectValidation : public ::testing::TestWithParam<Param> {};

TEST_P(SelectValidation, RejectsWithArgumentName) {
  const std::vector<float> scores(2 * 4, 1.0f);
  std::vector<int32_t> indices(2 * 2, 77);
  std::vector<float> values(2 * 2, 9.0f);
  SelectProblem p;
  p.scores = scores.data();
  p.batch = 2;
  p.n = 4;
  p.k = 2;
  p.row_starts = kGoodStarts;
  p.row_ends = kGoodEnds;
  p.indices = indices.data();
  p.values = values.data();
  ASSERT_TRUE(select_topk_cpu(p, GetParam().algo, 2).is_ok());  // the unbroken problem is fine
  std::fill(indices.begin(), indices.end(), 77);
  std::fill(values.begin(), values.end(), 9.0f);

  GetParam().input.break_it(p);
  const Status status = select_topk_cpu(p, GetParam().algo, 2);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find(GetParam().input.mention), std::string::npos)
      << "message \"" << status.message() << "\" does not name " << GetParam().input.mention;
  EXPECT_EQ(indices, std::vector<int32_t>(4, 77)) << "indices written on failure";
  EXPECT_EQ(values, std::vector<float>(4, 9.0f)) << "values written on failure";
}

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (const BadInput& input : kBadInputs) {
    params.push_back({input, CpuSelectAlgo::kReference});
    params.push_back({input, CpuSelectAlgo::kFast});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Bad, SelectValidation, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& param_info) {
                           return std::string(param_info.param.input.name) +
                                  (param_info.param.algo == CpuSelectAlgo::kReference ? "_Reference"
                                                                                      : "_Fast");
                         });

SelectProblem small_problem(const float* scores, int32_t* indices) {
  SelectProblem p;
  p.scores = scores;
  p.batch = 1;
  p.n = 4;
  p.k = 2;
  p.indices = indices;
  return p;
}

TEST(SelectValidationOptions, NegativeThreadsRejected) {
  const float scores[4] = {1, 2, 3, 4};
  int32_t indices[2] = {77, 77};
  const Status status = select_topk_cpu(small_problem(scores, indices), CpuSelectAlgo::kFast, -1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("num_threads"), std::string::npos) << status.message();
  EXPECT_EQ(indices[0], 77);
}

TEST(SelectValidationOptions, InvalidAlgoRejected) {
  const float scores[4] = {1, 2, 3, 4};
  int32_t indices[2] = {77, 77};
  const Status status =
      select_topk_cpu(small_problem(scores, indices), static_cast<CpuSelectAlgo>(9), 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("algo"), std::string::npos) << status.message();
  EXPECT_EQ(indices[0], 77);
}

TEST(SelectValidationOptions, MoreThreadsThanRowsIsFine) {
  const float scores[4] = {1, 2, 3, 4};
  int32_t indices[2] = {77, 77};
  ASSERT_TRUE(select_topk_cpu(small_problem(scores, indices), CpuSelectAlgo::kFast, 64).is_ok());
  EXPECT_EQ(indices[0], 3);
  EXPECT_EQ(indices[1], 2);
}

}  // namespace
}  // namespace litetopk
