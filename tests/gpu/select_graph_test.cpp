// select_topk captured in a CUDA graph: the capture succeeds (no allocation, no synchronization)
// and replays give exact results on new data written into the same buffers.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

TEST(SelectGpuGraph, CaptureAndReplayOnNewData) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (SelectAlgo algo : {SelectAlgo::kSampleFilter, SelectAlgo::kRadix, SelectAlgo::kGridRadix,
                          SelectAlgo::kSieve, SelectAlgo::kCluster, SelectAlgo::kRegister}) {
    SelectCase c;
    c.name = "Graph";
    c.batch = 2;
    c.n = algo == SelectAlgo::kRegister ? 16000 : 150000;  // register: rows of up to 16K
    c.k = 512;
    c.sorted = true;
    testkit::DeviceBuffer scores, indices, values, workspace;
    const std::size_t out = static_cast<std::size_t>(c.batch * c.k);
    ASSERT_TRUE(scores.allocate(static_cast<std::size_t>(c.batch * c.n) * 4).is_ok());
    ASSERT_TRUE(indices.allocate(out * 4).is_ok());
    ASSERT_TRUE(values.allocate(out * 4).is_ok());
    HostRows rows = make_rows(c);
    SelectProblem p = make_problem(c, rows, indices.as<int32_t>(), values.data());
    p.scores = scores.data();
    SelectOptions o;
    o.algo = algo;
    std::size_t bytes = 0;
    ASSERT_TRUE(select_topk_workspace_size(p, &bytes, o).is_ok());
    ASSERT_TRUE(workspace.allocate(bytes).is_ok());

    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status captured = select_topk(p, workspace.data(), bytes, stream, o);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(captured.is_ok()) << captured.to_string();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

    for (uint64_t seed : {21u, 22u}) {
      c.seed = seed;
      rows = make_rows(c);
      ASSERT_TRUE(testkit::copy_to_device(scores.data(), rows.scores.data(), rows.scores.size()).is_ok());
      ASSERT_TRUE(testkit::fill_device(indices.data(), 0x5a, indices.size()).is_ok());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      HostResult got, ref;
      got.indices.resize(out);
      got.values.resize(out * 4);
      ASSERT_TRUE(testkit::copy_to_host(got.indices.data(), indices.data(), out * 4).is_ok());
      ASSERT_TRUE(testkit::copy_to_host(got.values.data(), values.data(), out * 4).is_ok());
      ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok());
      EXPECT_TRUE(check_selection(c, rows, got.indices.data(), got.values.data(),
                                  ref.indices.data(), ref.values.data()))
          << select_algo_name(algo) << " seed " << seed;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace litetopk::testing
