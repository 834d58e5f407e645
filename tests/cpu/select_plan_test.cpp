// select_topk_plan and select_topk_launch without a GPU: the plan checks the problem's sizes
// before it asks anything of a device (so its errors name the argument on any machine), keeps no
// address, and a launch of a plan that was never made is refused.
#include <gtest/gtest.h>

#include <string>

#include "litetopk/select.h"

namespace litetopk {
namespace {

SelectProblem sized_problem() {
  SelectProblem p;  // no addresses: a plan needs only the sizes
  p.batch = 4;
  p.n = 1000;
  p.k = 16;
  return p;
}

void expect_rejected(const SelectProblem& p, const SelectOptions& options, const char* mention) {
  SelectPlan plan;
  plan.workspace_bytes = 123;
  const Status status = select_topk_plan(p, options, &plan);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find(mention), std::string::npos)
      << "message \"" << status.message() << "\" does not name " << mention;
  EXPECT_EQ(plan.algo, SelectAlgo::kAuto) << "a failed plan must not look planned";
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(SelectPlan, RejectsBadSizesBeforeAnyDevice) {
  SelectProblem p = sized_problem();
  p.k = 0;
  expect_rejected(p, {}, "k must be >= 1");
  p = sized_problem();
  p.n = -1;
  expect_rejected(p, {}, "n must be >= 0");
  p = sized_problem();
  p.row_stride = 10;
  expect_rejected(p, {}, "row_stride");
  p = sized_problem();
  p.dtype = static_cast<DType>(7);
  expect_rejected(p, {}, "dtype");
  p = sized_problem();
  p.k = kSampleFilterMaxK + 1;
  SelectOptions sample_filter;
  sample_filter.algo = SelectAlgo::kSampleFilter;
  expect_rejected(p, sample_filter, "sample-filter");
  SelectOptions bad_algo;
  bad_algo.algo = static_cast<SelectAlgo>(9);
  expect_rejected(sized_problem(), bad_algo, "options.algo");
}

TEST(SelectPlan, EveryAlgoNameParsesBack) {
  for (SelectAlgo algo : {SelectAlgo::kAuto, SelectAlgo::kRadix, SelectAlgo::kSampleFilter,
                          SelectAlgo::kGridRadix, SelectAlgo::kSieve, SelectAlgo::kCluster,
                          SelectAlgo::kRegister}) {
    SelectAlgo parsed = SelectAlgo::kAuto;
    ASSERT_TRUE(parse_select_algo(select_algo_name(algo), &parsed)) << select_algo_name(algo);
    EXPECT_EQ(parsed, algo);
  }
  EXPECT_STREQ(select_algo_name(SelectAlgo::kSieve), "sieve");
  EXPECT_STREQ(select_algo_name(SelectAlgo::kCluster), "cluster");
  EXPECT_STREQ(select_algo_name(SelectAlgo::kRegister), "register");
  SelectAlgo untouched = SelectAlgo::kRadix;
  EXPECT_FALSE(parse_select_algo("invalid", &untouched));
  EXPECT_FALSE(parse_select_algo("Sieve", &untouched));
  EXPECT_EQ(untouched, SelectAlgo::kRadix);
}

TEST(SelectPlan, NullPlanIsNamed) {
  const Status status = select_topk_plan(sized_problem(), {}, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("plan"), std::string::npos) << status.message();
}

TEST(SelectPlan, LaunchOfAnUnmadePlanIsRefused) {
  const SelectPlan never_planned;
  int32_t indices[16];
  float scores[4] = {1, 2, 3, 4};
  SelectAddresses addresses;
  addresses.scores = scores;
  addresses.indices = indices;
  const Status status = select_topk_launch(never_planned, addresses, nullptr, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("select_topk_plan"), std::string::npos) << status.message();
}

TEST(SelectPlan, WithoutAGpuThePlanSaysWhy) {
  // Valid sizes reach the device query: without a GPU (or without CUDA) that is not an
  // argument error.
  SelectPlan plan;
  const Status status = select_topk_plan(sized_problem(), {}, &plan);
  if (status.is_ok()) GTEST_SKIP() << "a GPU is present";
  EXPECT_TRUE(status.code() == StatusCode::kCudaError || status.code() == StatusCode::kNotCompiled)
      << status.to_string();
}

}  // namespace
}  // namespace litetopk
