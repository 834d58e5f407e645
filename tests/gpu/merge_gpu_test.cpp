// merge_topk on the GPU against the plain reference (tests/cpu/merge_cases.h) on the same random
// and adversarial shard lists as the CPU suite, sorted and unsorted; the plan/launch pair, and
// a capture in a CUDA graph replayed on new lists.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cpu/merge_cases.h"
#include "gpu/gpu_select_runner.h"
#include "litetopk/merge.h"
#include "testkit/device_memory.h"

namespace litetopk {
namespace {

using merge_testing::MergeCase;

// The device copies of one case's lists and outputs; problem() points at them.
struct DeviceLists {
  testkit::DeviceBuffer values, indices, counts, out_indices, out_values, workspace;
  MergeProblem host_problem;

  ::testing::AssertionResult upload(const merge_testing::MergeInputs& in) {
    host_problem = in.problem;
    const std::size_t out = static_cast<std::size_t>(in.problem.batch * in.problem.k);
    if (!testkit::upload(in.values, &values).is_ok() ||
        !testkit::upload(in.indices, &indices).is_ok() ||
        (!in.counts.empty() && !testkit::upload(in.counts, &counts).is_ok()) ||
        !out_indices.allocate(out * 4).is_ok() || !out_values.allocate(out * 4).is_ok() ||
        !testkit::fill_device(out_indices.data(), 0x55, out * 4).is_ok() ||
        !testkit::fill_device(out_values.data(), 0x55, out * 4).is_ok()) {
      return ::testing::AssertionFailure() << "device upload failed";
    }
    return ::testing::AssertionSuccess();
  }
  MergeProblem problem() const {
    MergeProblem p = host_problem;
    p.values = values.as<float>();
    p.indices = indices.as<int32_t>();
    p.counts = host_problem.counts ? counts.as<int32_t>() : nullptr;
    p.out_indices = out_indices.as<int32_t>();
    p.out_values = out_values.as<float>();
    return p;
  }
  ::testing::AssertionResult check(bool sorted) const {
    const std::size_t out = static_cast<std::size_t>(host_problem.batch * host_problem.k);
    std::vector<int32_t> got_indices(out);
    std::vector<float> got_values(out);
    if (!testkit::copy_to_host(got_indices.data(), out_indices.data(), out * 4).is_ok() ||
        !testkit::copy_to_host(got_values.data(), out_values.data(), out * 4).is_ok()) {
      return ::testing::AssertionFailure() << "device download failed";
    }
    return merge_testing::matches_plain(host_problem, got_indices, got_values, sorted);
  }
};

TEST(MergeGpu, RandomListsMatchPlainReference) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  uint32_t seed = 1;
  for (const MergeCase& c : merge_testing::standard_cases()) {
    for (const bool sorted : {false, true}) {
      merge_testing::MergeInputs in = merge_testing::make_inputs(c, seed++);
      in.problem.sorted = sorted;
      DeviceLists device;
      ASSERT_TRUE(device.upload(in));
      const MergeProblem p = device.problem();
      std::size_t bytes = 0;
      ASSERT_TRUE(merge_topk_workspace_size(p, &bytes).is_ok());
      ASSERT_TRUE(device.workspace.allocate(bytes).is_ok());
      const Status status = merge_topk(p, device.workspace.data(), bytes, nullptr);
      ASSERT_TRUE(status.is_ok()) << status.to_string() << " " << describe(c);
      ASSERT_TRUE(testkit::device_synchronize().is_ok());
      EXPECT_TRUE(device.check(sorted)) << describe(c) << (sorted ? " sorted" : "");
    }
  }
}

TEST(MergeGpu, LargeRowsWithManyTies) {
  // k 2048 of 8 shards of 2048: the radix passes over every digit, ties across shards.
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const MergeCase c{5, 8, 2048, 2048, true, merge_testing::Layout::kGathered, false, 0.01, 0.05};
  merge_testing::MergeInputs in = merge_testing::make_inputs(c, 99);
  DeviceLists device;
  ASSERT_TRUE(device.upload(in));
  ASSERT_TRUE(merge_topk(device.problem(), nullptr, 0, nullptr).is_ok());
  ASSERT_TRUE(testkit::device_synchronize().is_ok());
  EXPECT_TRUE(device.check(false));
}

TEST(MergeGpu, PlanOnceLaunchInACudaGraph) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const MergeCase c{4, 3, 300, 256, false, merge_testing::Layout::kRows, true, 0.1, 0.1};
  merge_testing::MergeInputs in = merge_testing::make_inputs(c, 5);
  in.problem.sorted = true;
  DeviceLists device;
  ASSERT_TRUE(device.upload(in));
  MergePlan plan;
  ASSERT_TRUE(merge_topk_plan(device.problem(), &plan).is_ok());
  ASSERT_TRUE(device.workspace.allocate(plan.workspace_bytes).is_ok());
  const MergeProblem p = device.problem();
  const MergeAddresses addresses{p.values, p.indices, p.counts, p.out_indices, p.out_values};

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status captured = merge_topk_launch(plan, addresses, device.workspace.data(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint32_t replay = 0; replay < 2; ++replay) {
    // New lists in the same buffers, then a replay.
    merge_testing::MergeInputs next = merge_testing::make_inputs(c, 50 + replay);
    next.problem.sorted = true;
    ASSERT_TRUE(testkit::copy_to_device(device.values.data(), next.values.data(),
                                        next.values.size() * 4).is_ok());
    ASSERT_TRUE(testkit::copy_to_device(device.indices.data(), next.indices.data(),
                                        next.indices.size() * 4).is_ok());
    ASSERT_TRUE(testkit::copy_to_device(device.counts.data(), next.counts.data(),
                                        next.counts.size() * 4).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    device.host_problem = next.problem;
    EXPECT_TRUE(device.check(true)) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace litetopk
