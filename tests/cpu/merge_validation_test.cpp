// Bad input to merge_topk: kInvalidArgument naming the argument, from the CPU reference, the
// plan and the C ABI, with nothing written.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "common/validation_testing.h"
#include "litetopk/c_api.h"
#include "litetopk/merge.h"

namespace litetopk {
namespace {

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this: "<argument> must"
  void (*break_it)(MergeProblem&);
};

const BadInput kBadInputs[] = {
    {"NullValues", "values must", [](MergeProblem& p) { p.values = nullptr; }},
    {"NullIndices", "indices must", [](MergeProblem& p) { p.indices = nullptr; }},
    {"NullOutIndices", "out_indices must", [](MergeProblem& p) { p.out_indices = nullptr; }},
    {"MisalignedValues", "values must be 4-byte aligned",
     [](MergeProblem& p) { p.values = testing::offset(p.values, 2); }},
    {"MisalignedCounts", "counts must be 4-byte aligned",
     [](MergeProblem& p) { p.counts = testing::offset(p.counts, 1); }},
    {"MisalignedOutValues", "out_values must be 4-byte aligned",
     [](MergeProblem& p) { p.out_values = testing::offset(p.out_values, 2); }},
    {"BatchNegative", "batch must", [](MergeProblem& p) { p.batch = -1; }},
    {"ShardsZero", "shards must", [](MergeProblem& p) { p.shards = 0; }},
    {"KInZero", "k_in must", [](MergeProblem& p) { p.k_in = 0; }},
    {"CandidatesTooMany", "shards * k_in must",
     [](MergeProblem& p) {
       p.shards = int64_t{1} << 20;
       p.k_in = int64_t{1} << 12;
     }},
    {"KZero", "k must", [](MergeProblem& p) { p.k = 0; }},
    {"KTooLarge", "k must", [](MergeProblem& p) { p.k = int64_t{1} << 31; }},
    {"RowStrideNegative", "row_stride must", [](MergeProblem& p) { p.row_stride = -1; }},
    {"RowStrideBelowKIn", "row_stride must", [](MergeProblem& p) { p.row_stride = 2; }},
    {"ShardStrideNegative", "shard_stride must", [](MergeProblem& p) { p.shard_stride = -2; }},
    {"ShardStrideBelowKIn", "shard_stride must", [](MergeProblem& p) { p.shard_stride = 3; }},
    {"ExtentOverflows", "overflows int64",
     [](MergeProblem& p) { p.row_stride = std::numeric_limits<int64_t>::max(); }},
    // Fits in elements but not in bytes of the 4-byte values.
    {"ExtentOverflowsBytes", "the candidates' extent in bytes overflows int64",
     [](MergeProblem& p) { p.row_stride = int64_t{1} << 62; }},
};

void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

class MergeValidation : public ::testing::TestWithParam<BadInput> {};

// Two rows, two shards of four candidates; k 3.
struct Buffers {
  std::vector<float> values = std::vector<float>(16, 1.0f);
  std::vector<int32_t> indices = std::vector<int32_t>(16, 0);
  std::vector<int32_t> counts = std::vector<int32_t>(4, 4);
  std::vector<int32_t> out_indices = std::vector<int32_t>(6, 77);
  std::vector<float> out_values = std::vector<float>(6, 9.0f);

  MergeProblem problem() {
    MergeProblem p;
    p.values = values.data();
    p.indices = indices.data();
    p.counts = counts.data();
    p.batch = 2;
    p.shards = 2;
    p.k_in = 4;
    p.k = 3;
    p.out_indices = out_indices.data();
    p.out_values = out_values.data();
    return p;
  }
  bool untouched() const {
    return out_indices == std::vector<int32_t>(6, 77) && out_values == std::vector<float>(6, 9.0f);
  }
};

TEST_P(MergeValidation, CpuRejectsWithArgumentName) {
  Buffers buffers;
  MergeProblem p = buffers.problem();
  ASSERT_TRUE(validate_merge_problem(p).is_ok());
  GetParam().break_it(p);
  EXPECT_TRUE(testing::rejects_naming(validate_merge_problem(p), GetParam().mention));
  EXPECT_TRUE(testing::rejects_naming(merge_topk_cpu(p), GetParam().mention));
  EXPECT_TRUE(buffers.untouched());
}

TEST_P(MergeValidation, GpuEntryPointsRejectBeforeTheDevice) {
  Buffers buffers;
  MergeProblem p = buffers.problem();
  GetParam().break_it(p);
  std::size_t bytes = 99;
  EXPECT_TRUE(testing::rejects_naming(merge_topk_workspace_size(p, &bytes), GetParam().mention));
  EXPECT_EQ(bytes, 0u);
  EXPECT_TRUE(
      testing::rejects_naming(merge_topk(p, nullptr, 0, nullptr), GetParam().mention));
  EXPECT_TRUE(buffers.untouched());
}

INSTANTIATE_TEST_SUITE_P(BadInputs, MergeValidation, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(MergeValidation, LaunchNeedsAPlanAndItsAddresses) {
  Buffers buffers;
  MergePlan unplanned;
  MergeAddresses addresses{buffers.values.data(), buffers.indices.data(), nullptr,
                           buffers.out_indices.data(), nullptr};
  EXPECT_TRUE(testing::rejects_naming(merge_topk_launch(unplanned, addresses, nullptr, nullptr),
                                      "plan was not made"));
  EXPECT_TRUE(testing::rejects_naming(merge_topk_plan(buffers.problem(), nullptr), "plan is null"));
}

TEST(MergeCApi, CpuMergeAndErrors) {
  const std::vector<float> values = {3, 1, 2, 5};
  const std::vector<int32_t> indices = {0, 1, 7, -1};
  std::vector<int32_t> out(3, 77);
  std::vector<float> out_values(3, 0.0f);
  litetopk_merge_problem c{};
  c.values = values.data();
  c.indices = indices.data();
  c.batch = 1;
  c.shards = 2;
  c.k_in = 2;
  c.k = 3;
  c.flags = LITETOPK_SMALLEST | LITETOPK_SORTED;
  c.out_indices = out.data();
  c.out_values = out_values.data();
  ASSERT_EQ(litetopk_merge_topk_cpu(&c), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(out, (std::vector<int32_t>{1, 7, 0}));
  EXPECT_EQ(out_values, (std::vector<float>{1, 2, 3}));

  EXPECT_EQ(litetopk_merge_topk_cpu(nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("problem must not be null"),
            std::string::npos);
  c.k_in = 0;
  EXPECT_EQ(litetopk_merge_topk_cpu(&c), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("k_in must be >= 1, got 0"),
            std::string::npos);
  std::size_t bytes = 0;
  EXPECT_EQ(litetopk_merge_topk_workspace_size(&c, &bytes), LITETOPK_INVALID_ARGUMENT);
  EXPECT_EQ(litetopk_merge_topk(&c, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace litetopk
