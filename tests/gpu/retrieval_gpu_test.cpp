// retrieval_topk's unfused GPU path against the CPU reference (testkit/retrieval_verify.h) on
// every workload kind and metric, in one chunk and in several; ranges, k beyond the corpus, the
// deterministic flag, and a capture in a CUDA graph replayed on new queries.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/gpu_select_runner.h"
#include "litetopk/retrieval.h"
#include "testkit/device_memory.h"
#include "testkit/retrieval_verify.h"
#include "testkit/retrieval_workload.h"

namespace litetopk {
namespace {

using testkit::RetrievalKind;

// One workload on the device, with poisoned outputs; problem() points at the device copies.
struct DeviceRetrieval {
  testkit::DeviceBuffer queries, corpus, norms, starts, ends, indices, scores, workspace;
  RetrievalProblem host;  // the host problem (host pointers)

  ::testing::AssertionResult upload(const testkit::RetrievalWorkload& w, const RetrievalProblem& p) {
    host = p;
    const std::size_t out = static_cast<std::size_t>(p.batch * p.k) * 4;
    if (!testkit::upload(w.queries, &queries).is_ok() ||
        !testkit::upload(w.corpus, &corpus).is_ok() ||
        !testkit::upload(w.corpus_norms, &norms).is_ok() ||
        (p.range_starts && !copy(p.range_starts, p.batch, &starts)) ||
        (p.range_ends && !copy(p.range_ends, p.batch, &ends)) || !indices.allocate(out).is_ok() ||
        !scores.allocate(out).is_ok() || !testkit::fill_device(indices.data(), 0x5a, out).is_ok() ||
        !testkit::fill_device(scores.data(), 0x5a, out).is_ok()) {
      return ::testing::AssertionFailure() << "device upload failed";
    }
    return ::testing::AssertionSuccess();
  }
  static bool copy(const int32_t* host_array, int64_t count, testkit::DeviceBuffer* device) {
    return testkit::upload(std::vector<int32_t>(host_array, host_array + count), device).is_ok();
  }
  RetrievalProblem problem() const {
    RetrievalProblem p = host;
    p.queries = queries.data();
    p.corpus = corpus.data();
    p.corpus_norms = host.corpus_norms ? norms.as<float>() : nullptr;
    p.range_starts = host.range_starts ? starts.as<int32_t>() : nullptr;
    p.range_ends = host.range_ends ? ends.as<int32_t>() : nullptr;
    p.indices = indices.as<int32_t>();
    p.scores = scores.as<float>();
    return p;
  }
  ::testing::AssertionResult run(const RetrievalOptions& options) {
    const RetrievalProblem p = problem();
    std::size_t bytes = 0;
    if (Status s = retrieval_topk_workspace_size(p, &bytes, options); !s) {
      return ::testing::AssertionFailure() << s.to_string();
    }
    if (!workspace.allocate(bytes).is_ok()) return ::testing::AssertionFailure() << "allocate";
    if (Status s = retrieval_topk(p, workspace.data(), bytes, nullptr, options); !s) {
      return ::testing::AssertionFailure() << s.to_string();
    }
    if (!testkit::device_synchronize().is_ok()) return ::testing::AssertionFailure() << "sync";
    return ::testing::AssertionSuccess();
  }
  void download(std::vector<int32_t>* got_indices, std::vector<float>* got_scores) const {
    const std::size_t out = static_cast<std::size_t>(host.batch * host.k);
    got_indices->assign(out, 0);
    got_scores->assign(out, 0.0f);
    ASSERT_TRUE(testkit::copy_to_host(got_indices->data(), indices.data(), out * 4).is_ok());
    ASSERT_TRUE(testkit::copy_to_host(got_scores->data(), scores.data(), out * 4).is_ok());
  }
  // The GPU result against the CPU reference of the host problem (testkit/retrieval_verify.h).
  ::testing::AssertionResult check() const {
    std::vector<int32_t> got_indices;
    std::vector<float> got_scores;
    download(&got_indices, &got_scores);
    const std::size_t out = static_cast<std::size_t>(host.batch * host.k);
    std::vector<int32_t> want_indices(out);
    std::vector<float> want_scores(out);
    RetrievalProblem reference = host;
    reference.indices = want_indices.data();
    reference.scores = want_scores.data();
    if (Status s = retrieval_topk_cpu(reference); !s) {
      return ::testing::AssertionFailure() << "reference: " << s.to_string();
    }
    const std::string mismatch = testkit::compare_retrieval(
        host, got_indices.data(), got_scores.data(), want_indices.data(), want_scores.data(),
        testkit::retrieval_tolerance(host, want_scores.data()));
    if (!mismatch.empty()) return ::testing::AssertionFailure() << mismatch;
    if (host.sorted) {
      for (std::size_t i = 1; i < out; ++i) {
        if (i % host.k != 0 && got_indices[i] >= 0 && got_scores[i] > got_scores[i - 1]) {
          return ::testing::AssertionFailure() << "slot " << i << ": not sorted best first";
        }
      }
    }
    return ::testing::AssertionSuccess();
  }
};

testkit::RetrievalWorkload workload(RetrievalKind kind, RetrievalMetric metric, DType dtype,
                                    int64_t n, int64_t k, uint64_t seed = 3) {
  testkit::RetrievalSpec spec;
  spec.batch = 8;
  spec.n = n;
  spec.dim = 128;
  spec.k = k;
  spec.dtype = dtype;
  spec.metric = metric;
  spec.kind = kind;
  spec.seed = seed;
  return testkit::make_retrieval_workload(spec);
}

RetrievalOptions chunks_of(int64_t rows) {
  RetrievalOptions options;
  options.chunk_rows = rows;
  return options;
}

TEST(RetrievalGpu, EveryWorkloadAndMetricInOneAndSeveralChunks) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (RetrievalKind kind : testkit::all_retrieval_kinds()) {
    for (RetrievalMetric metric : {RetrievalMetric::kInnerProduct, RetrievalMetric::kL2}) {
      for (bool norms : {false, true}) {
        if (norms && metric != RetrievalMetric::kL2) continue;
        const DType dtype = norms ? DType::kBFloat16 : DType::kFloat16;
        const testkit::RetrievalWorkload w = workload(kind, metric, dtype, 3000, 64);
        RetrievalProblem p = w.host_problem();
        p.corpus_norms = norms ? w.corpus_norms.data() : nullptr;
        p.sorted = true;
        for (int64_t rows : {int64_t{0}, int64_t{700}}) {
          SCOPED_TRACE(::testing::Message()
                       << testkit::retrieval_kind_name(kind) << " " << retrieval_metric_name(metric)
                       << (norms ? " with norms" : "") << " chunk_rows " << rows);
          DeviceRetrieval device;
          ASSERT_TRUE(device.upload(w, p));
          ASSERT_TRUE(device.run(chunks_of(rows)));
          EXPECT_TRUE(device.check());
        }
      }
    }
  }
}

TEST(RetrievalGpu, RangesAndLargeKAcrossChunks) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      workload(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct, DType::kFloat16, 5000,
               2048);
  const std::vector<int32_t> starts = {0, 100, 7, 4999, 1000, 5000, 0, 2500};
  const std::vector<int32_t> ends = {5000, 400, 7, 5000, 4100, 5000, 2100, 4600};
  RetrievalProblem p = w.host_problem();
  p.range_starts = starts.data();
  p.range_ends = ends.data();
  for (bool sorted : {false, true}) {
    p.sorted = sorted;
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, p));
    ASSERT_TRUE(device.run(chunks_of(1024)));
    EXPECT_TRUE(device.check()) << "sorted " << sorted;
  }
}

TEST(RetrievalGpu, KBeyondTheCorpusPads) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      workload(RetrievalKind::kNormal, RetrievalMetric::kL2, DType::kBFloat16, 300, 512);
  for (int64_t rows : {int64_t{0}, int64_t{128}}) {
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, w.host_problem()));
    ASSERT_TRUE(device.run(chunks_of(rows)));
    EXPECT_TRUE(device.check()) << "chunk_rows " << rows;
  }
}

TEST(RetrievalGpu, DeterministicRunsAgree) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  testkit::RetrievalWorkload w =
      workload(RetrievalKind::kNormalized, RetrievalMetric::kInnerProduct, DType::kFloat16, 2000,
               100);
  // Ten distinct rows repeated: every score is tied 200 times.
  for (int64_t c = 10; c < w.spec.n; ++c) {
    std::copy_n(&w.corpus[(c % 10) * w.spec.dim], w.spec.dim, &w.corpus[c * w.spec.dim]);
  }
  RetrievalProblem p = w.host_problem();
  p.deterministic = true;
  p.sorted = true;
  std::vector<int32_t> first, second;
  std::vector<float> scores;
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, p));
  ASSERT_TRUE(device.run(chunks_of(384)));
  EXPECT_TRUE(device.check());
  device.download(&first, &scores);
  ASSERT_TRUE(device.run(chunks_of(384)));
  device.download(&second, &scores);
  EXPECT_EQ(first, second);
}

TEST(RetrievalGpu, GraphCaptureReplaysOnNewQueries) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      workload(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kFloat16, 4000, 128);
  RetrievalProblem p = w.host_problem();
  p.sorted = true;
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, p));
  RetrievalPlan plan;
  ASSERT_TRUE(retrieval_topk_plan(device.problem(), chunks_of(1000), &plan).is_ok());
  ASSERT_EQ(plan.chunks, 4);
  ASSERT_TRUE(device.workspace.allocate(plan.workspace_bytes).is_ok());
  const RetrievalProblem d = device.problem();
  const RetrievalAddresses addresses{d.queries,    d.corpus,  d.corpus_norms, d.range_starts,
                                     d.range_ends, d.indices, d.scores};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status captured = retrieval_topk_launch(plan, addresses, device.workspace.data(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t replay = 0; replay < 2; ++replay) {
    const testkit::RetrievalWorkload next = workload(
        RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kFloat16, 4000, 128, 90 + replay);
    ASSERT_TRUE(testkit::copy_to_device(device.queries.data(), next.queries.data(),
                                        next.queries.size() * 2).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    // The host problem over the new queries and the same corpus.
    device.host.queries = next.queries.data();
    EXPECT_TRUE(device.check()) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace litetopk
