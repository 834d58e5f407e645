// select_topk_plan once, select_topk_launch many: a plan made from sizes alone (no addresses)
// runs exactly on several sets of buffers, with every algorithm, the same as the one-shot call;
// a launch without an address the plan needs is refused and writes nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

TEST(SelectPlanGpu, OnePlanManyBuffers) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (SelectAlgo algo : {SelectAlgo::kAuto, SelectAlgo::kSampleFilter, SelectAlgo::kRadix,
                          SelectAlgo::kGridRadix, SelectAlgo::kSieve, SelectAlgo::kCluster,
                          SelectAlgo::kRegister}) {
    SelectCase c;
    c.name = "Plan";
    c.batch = 3;
    c.n = algo == SelectAlgo::kRegister ? 9000 : 70000;  // register: rows of up to 16K
    c.k = 300;
    c.with_ranges = true;
    c.sorted = true;
    HostRows rows = make_rows(c);
    SelectProblem sizes = make_problem(c, rows, nullptr, nullptr);
    sizes.scores = nullptr;
    // Ranges and values are planned as present by non-null placeholders, then dropped.
    const SelectProblem with_addresses = make_problem(c, rows, nullptr, nullptr);
    SelectOptions options;
    options.algo = algo;
    sizes.row_starts = with_addresses.row_starts;
    sizes.row_ends = with_addresses.row_ends;
    std::vector<float> placeholder(1);
    sizes.values = placeholder.data();
    SelectPlan plan;
    const Status planned = select_topk_plan(sizes, options, &plan);
    ASSERT_TRUE(planned.is_ok()) << planned.to_string();
    EXPECT_NE(plan.algo, SelectAlgo::kAuto);
    EXPECT_EQ(plan.problem.scores, nullptr);
    EXPECT_TRUE(plan.has_row_starts && plan.has_row_ends && plan.has_values);

    const std::size_t out = static_cast<std::size_t>(c.batch * c.k);
    testkit::DeviceBuffer workspace;
    ASSERT_TRUE(workspace.allocate(plan.workspace_bytes).is_ok());
    for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth,
                            Pattern::kNanInfSprinkled}) {
      c.pattern = pattern;
      c.seed += 1;
      rows = make_rows(c);
      testkit::DeviceBuffer scores, indices, values, starts, ends;
      ASSERT_TRUE(starts.allocate(rows.starts.size() * 4).is_ok());
      ASSERT_TRUE(ends.allocate(rows.ends.size() * 4).is_ok());
      ASSERT_TRUE(
          testkit::copy_to_device(starts.data(), rows.starts.data(), rows.starts.size() * 4)
              .is_ok());
      ASSERT_TRUE(
          testkit::copy_to_device(ends.data(), rows.ends.data(), rows.ends.size() * 4).is_ok());
      ASSERT_TRUE(scores.allocate(rows.scores.size()).is_ok());
      ASSERT_TRUE(indices.allocate(out * 4).is_ok());
      ASSERT_TRUE(values.allocate(out * 4).is_ok());
      ASSERT_TRUE(
          testkit::copy_to_device(scores.data(), rows.scores.data(), rows.scores.size()).is_ok());
      SelectAddresses addresses;
      addresses.scores = scores.data();
      addresses.row_starts = starts.as<int32_t>();
      addresses.row_ends = ends.as<int32_t>();
      addresses.indices = indices.as<int32_t>();
      addresses.values = values.data();
      const Status launched = select_topk_launch(plan, addresses, workspace.data(), nullptr);
      ASSERT_TRUE(launched.is_ok()) << launched.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      HostResult got, ref;
      got.indices.resize(out);
      got.values.resize(out * 4);
      ASSERT_TRUE(testkit::copy_to_host(got.indices.data(), indices.data(), out * 4).is_ok());
      ASSERT_TRUE(testkit::copy_to_host(got.values.data(), values.data(), out * 4).is_ok());
      ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok());
      EXPECT_TRUE(check_selection(c, rows, got.indices.data(), got.values.data(),
                                  ref.indices.data(), ref.values.data()))
          << select_algo_name(plan.algo) << " " << pattern_name(pattern);

      addresses.values = nullptr;  // the plan writes values: refused, nothing written
      ASSERT_TRUE(testkit::fill_device(indices.data(), 0x5a, indices.size()).is_ok());
      const Status refused = select_topk_launch(plan, addresses, workspace.data(), nullptr);
      EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
      std::vector<int32_t> untouched(out);
      ASSERT_TRUE(testkit::copy_to_host(untouched.data(), indices.data(), out * 4).is_ok());
      EXPECT_EQ(untouched, std::vector<int32_t>(out, 0x5a5a5a5a));
    }
  }
}

// Sample-filter's block shapes and segments as planned on this device: wide blocks (512 threads,
// one per SM) while the batch fits one wave, narrow ones (256, two per SM for k <= 2048) beyond;
// rows of up to 1 MB kept whole from a third of a wave of rows, longer or fewer rows split to
// fill the device once.
TEST(SelectPlanGpu, SampleFilterBlockShapes) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  int device = 0;
  int sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  struct Expected {
    int64_t batch, n, k;
    DType dtype;
    int32_t threads, blocks_per_sm, segments;  // segments 0: at least 2
  };
  const int64_t wave = sms;
  const Expected cases[] = {
      {wave, 131072, 2048, DType::kFloat32, 512, 1, 1},
      {(wave + 2) / 3, 131072, 2048, DType::kFloat32, 512, 1, 1},
      {(wave + 2) / 3, 1 << 20, 2048, DType::kFloat32, 512, 1, 0},  // 4 MB rows split
      {(wave + 2) / 3, 1 << 19, 2048, DType::kBFloat16, 512, 1, 1},  // 1 MB rows whole
      {4, 131072, 2048, DType::kFloat32, 512, 1, 0},
      {wave + 1, 131072, 2048, DType::kFloat32, 256, 2, 1},
      {wave + 1, 131072, 4096, DType::kFloat32, 256, 1, 1},
      {4, 1 << 20, 8192, DType::kBFloat16, 512, 1, 0},
  };
  for (const Expected& e : cases) {
    SCOPED_TRACE(std::to_string(e.batch) + " x " + std::to_string(e.n) + ", k " +
                 std::to_string(e.k));
    SelectProblem problem;
    problem.dtype = e.dtype;
    problem.batch = e.batch;
    problem.n = e.n;
    problem.k = e.k;
    std::vector<int32_t> placeholder(1);
    problem.indices = placeholder.data();
    SelectOptions options;
    options.algo = SelectAlgo::kSampleFilter;
    SelectPlan plan;
    const Status planned = select_topk_plan(problem, options, &plan);
    ASSERT_TRUE(planned.is_ok()) << planned.to_string();
    EXPECT_EQ(plan.threads_per_block, e.threads);
    EXPECT_EQ(plan.blocks_per_sm, e.blocks_per_sm);
    if (e.segments > 0) {
      EXPECT_EQ(plan.segments, e.segments);
    } else {
      EXPECT_GE(plan.segments, 2);
    }
    EXPECT_EQ(plan.large_k, e.k > 2048);
  }
}

}  // namespace
}  // namespace litetopk::testing
