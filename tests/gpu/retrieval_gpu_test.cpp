// retrieval_topk's GPU paths against the CPU reference (testkit/retrieval_verify.h): the unfused
// one in one chunk and in several, and the fused one (fp16 and bf16 corpora), on every workload
// kind, metric and corpus format (fp16, bf16, fp8 with row scales); the corpus bitmap (all off,
// all on, sparse, with ranges shorter than k), k = 1 and 8192, k beyond the corpus, NaN rows, ties
// and the deterministic flag, the corpus norms helper, the launch's address checks, and a capture
// in a CUDA graph replayed on new queries. The fused path also on what stresses its lists (every
// score tied, rows sorted so that each tile beats the last), on several query blocks and splits
// with a sample, on dims that are not a multiple of 64, and its refusal of an fp8 corpus.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_select_runner.h"
#include "litetopk/float_bits.h"
#include "litetopk/retrieval.h"
#include "testkit/device_memory.h"
#include "testkit/retrieval_verify.h"
#include "testkit/retrieval_workload.h"

namespace litetopk {
namespace {

using testkit::RetrievalKind;

// Copies `bytes` of host memory into a new device buffer.
bool copy_up(const void* host, std::size_t bytes, testkit::DeviceBuffer* device) {
  return device->allocate(bytes).is_ok() &&
         testkit::copy_to_device(device->data(), host, bytes).is_ok();
}

// One workload on the device, with poisoned outputs; problem() points at the device copies.
struct DeviceRetrieval {
  testkit::DeviceBuffer queries, corpus, scales, norms, starts, ends, bitmap, indices, scores,
      workspace;
  RetrievalProblem host;  // the host problem (host pointers)

  ::testing::AssertionResult upload(const testkit::RetrievalWorkload& w, const RetrievalProblem& p) {
    host = p;
    const std::size_t out = static_cast<std::size_t>(p.batch * p.k) * 4;
    const bool fp8 = p.corpus_format == RetrievalCorpusFormat::kFp8E4M3;
    if (!testkit::upload(w.queries, &queries).is_ok() ||
        !copy_up(p.corpus, w.corpus_bytes(), &corpus) ||
        (fp8 && !testkit::upload(w.corpus_scales, &scales).is_ok()) ||
        !testkit::upload(w.corpus_norms, &norms).is_ok() ||
        (p.range_starts && !copy_up(p.range_starts, p.batch * 4, &starts)) ||
        (p.range_ends && !copy_up(p.range_ends, p.batch * 4, &ends)) ||
        (p.corpus_bitmap && !copy_up(p.corpus_bitmap, retrieval_bitmap_bytes(p.n), &bitmap)) ||
        !indices.allocate(out).is_ok() || !scores.allocate(out).is_ok() ||
        !testkit::fill_device(indices.data(), 0x5a, out).is_ok() ||
        !testkit::fill_device(scores.data(), 0x5a, out).is_ok()) {
      return ::testing::AssertionFailure() << "device upload failed";
    }
    return ::testing::AssertionSuccess();
  }
  RetrievalProblem problem() const {
    RetrievalProblem p = host;
    p.queries = queries.data();
    p.corpus = corpus.data();
    p.corpus_scales = host.corpus_scales ? scales.as<float>() : nullptr;
    p.corpus_norms = host.corpus_norms ? norms.as<float>() : nullptr;
    p.range_starts = host.range_starts ? starts.as<int32_t>() : nullptr;
    p.range_ends = host.range_ends ? ends.as<int32_t>() : nullptr;
    p.corpus_bitmap = host.corpus_bitmap ? bitmap.as<uint8_t>() : nullptr;
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
    for (std::size_t i = 0; i < out; ++i) {
      if (got_indices[i] < 0 && !std::isnan(got_scores[i])) {
        return ::testing::AssertionFailure() << "slot " << i << ": padding scores " << got_scores[i];
      }
    }
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

testkit::RetrievalSpec spec_of(RetrievalKind kind, RetrievalMetric metric, DType dtype, int64_t n,
                               int64_t k, uint64_t seed = 3) {
  testkit::RetrievalSpec spec;
  spec.batch = 8;
  spec.n = n;
  spec.dim = 128;
  spec.k = k;
  spec.dtype = dtype;
  spec.metric = metric;
  spec.kind = kind;
  spec.seed = seed;
  return spec;
}

testkit::RetrievalWorkload workload(RetrievalKind kind, RetrievalMetric metric, DType dtype,
                                    int64_t n, int64_t k, uint64_t seed = 3) {
  return testkit::make_retrieval_workload(spec_of(kind, metric, dtype, n, k, seed));
}

testkit::RetrievalWorkload fp8_workload(RetrievalKind kind, RetrievalMetric metric, int64_t n,
                                        int64_t k, uint64_t seed = 3) {
  testkit::RetrievalSpec spec = spec_of(kind, metric, DType::kFloat16, n, k, seed);
  spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
  return testkit::make_retrieval_workload(spec);
}

// The unfused path in chunks of `rows` rows (0: the default chunking).
RetrievalOptions chunks_of(int64_t rows) {
  RetrievalOptions options;
  options.chunk_rows = rows;
  options.path = RetrievalPath::kUnfused;
  return options;
}

RetrievalOptions fused_path() {
  RetrievalOptions options;
  options.path = RetrievalPath::kFused;
  return options;
}

// The unfused path in chunks of each of `rows`, and the fused path where it runs (a float16 or
// bfloat16 corpus).
std::vector<RetrievalOptions> every_path(const RetrievalProblem& p,
                                         std::initializer_list<int64_t> rows) {
  std::vector<RetrievalOptions> paths;
  for (int64_t r : rows) paths.push_back(chunks_of(r));
  if (p.corpus_format == RetrievalCorpusFormat::kSameAsQueries) paths.push_back(fused_path());
  return paths;
}

std::string path_label(const RetrievalOptions& options) {
  return std::string(retrieval_path_name(options.path)) + " chunk_rows " +
         std::to_string(options.chunk_rows);
}

// Runs `p` over `w` unfused in one chunk and in chunks of 700 rows, and fused, and checks each.
void run_every_path(const testkit::RetrievalWorkload& w, const RetrievalProblem& p) {
  for (const RetrievalOptions& options : every_path(p, {0, 700})) {
    SCOPED_TRACE(path_label(options));
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, p));
    ASSERT_TRUE(device.run(options));
    EXPECT_TRUE(device.check());
  }
}

// Captures one launch of `plan` over `device` in a CUDA graph, then replays it twice, each time on
// the queries of next_workload(replay) over the same corpus, and checks each result.
template <class NextWorkload>
void replay_captured(const RetrievalPlan& plan, DeviceRetrieval* device,
                     NextWorkload next_workload) {
  ASSERT_TRUE(device->workspace.allocate(plan.workspace_bytes).is_ok());
  const RetrievalAddresses addresses = retrieval_addresses(device->problem());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status captured = retrieval_topk_launch(plan, addresses, device->workspace.data(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t replay = 0; replay < 2; ++replay) {
    const testkit::RetrievalWorkload next = next_workload(replay);
    ASSERT_TRUE(testkit::copy_to_device(device->queries.data(), next.queries.data(),
                                        next.queries.size() * 2).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    // The host problem over the new queries and the same corpus.
    device->host.queries = next.queries.data();
    EXPECT_TRUE(device->check()) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(RetrievalGpu, EveryWorkloadMetricAndFormatInOneAndSeveralChunks) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (RetrievalKind kind : testkit::all_retrieval_kinds()) {
    for (RetrievalMetric metric :
         {RetrievalMetric::kInnerProduct, RetrievalMetric::kCosine, RetrievalMetric::kL2}) {
      for (int format = 0; format < 3; ++format) {  // fp16, bf16, fp8 (fp16 queries)
        for (bool norms : {false, true}) {
          if (norms && metric != RetrievalMetric::kL2) continue;
          SCOPED_TRACE(::testing::Message()
                       << testkit::retrieval_kind_name(kind) << " " << retrieval_metric_name(metric)
                       << " " << (format == 0 ? "fp16" : format == 1 ? "bf16" : "fp8")
                       << (norms ? " with norms" : ""));
          const testkit::RetrievalWorkload w =
              format == 2 ? fp8_workload(kind, metric, 3000, 64)
                          : workload(kind, metric, format == 0 ? DType::kFloat16 : DType::kBFloat16,
                                     3000, 64);
          RetrievalProblem p = w.host_problem();
          p.corpus_norms = norms ? w.corpus_norms.data() : nullptr;
          p.sorted = true;
          run_every_path(w, p);
        }
      }
    }
  }
}

// Up to kRetrievalFp8DirectMaxBatch queries the unfused path scores an fp8 corpus straight from
// its bytes (fp8_row_dots_kernel.cu): every batch of it, dims whose rows take 4 to 64 chunks of
// 16 bytes (groups of 4, 8 and 32 lanes, one or two chunks a lane), both query dtypes, every
// metric, NaN bytes and scales, ranges and a bitmap, one chunk and several.
TEST(RetrievalGpu, Fp8CorpusAtSmallBatchesScoredFromItsBytes) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t batch = 1; batch <= kRetrievalFp8DirectMaxBatch + 1; ++batch) {
    for (int64_t dim : {64, 112, 768, 1024}) {
      for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
        for (RetrievalMetric metric : {RetrievalMetric::kInnerProduct, RetrievalMetric::kL2}) {
          SCOPED_TRACE(::testing::Message() << "batch " << batch << " dim " << dim << " "
                                            << dtype_name(dtype) << " "
                                            << retrieval_metric_name(metric));
          testkit::RetrievalSpec spec =
              spec_of(RetrievalKind::kClustered, metric, dtype, 2501, 96, 40 + batch + dim);
          spec.batch = batch;
          spec.dim = dim;
          spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
          testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
          for (int64_t c = 3; c < w.spec.n; c += 97) w.corpus_fp8[c * dim + dim - 1] = 0x7f;
          w.corpus_scales[11] = std::numeric_limits<float>::quiet_NaN();
          RetrievalProblem p = w.host_problem();
          p.sorted = true;
          run_every_path(w, p);
          // Query b's range: all, a middle part, one shorter than k, an empty one, all.
          const int32_t range_starts[] = {0, 600, 2400, 5, 0};
          const int32_t range_ends[] = {2501, 1900, 2450, 5, 2501};
          const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.7, 5);
          p.range_starts = range_starts;
          p.range_ends = range_ends;
          p.corpus_bitmap = bitmap.data();
          run_every_path(w, p);
        }
      }
    }
  }
}

// The same kernel on a corpus large enough that its warps take several tiles of rows each (the
// grid is capped at 4096 blocks of 32 rows at dim 768): the next tile's loads, made while the
// current one is summed, are the ones scored.
TEST(RetrievalGpu, Fp8CorpusAtSmallBatchesOverManyTilesAWarp) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t batch : {int64_t{1}, int64_t{2}, int64_t{4}}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    testkit::RetrievalSpec spec = spec_of(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct,
                                          DType::kFloat16, 300001, 512, 70 + batch);
    spec.batch = batch;
    spec.dim = 768;
    spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
    const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, w.host_problem()));
    ASSERT_TRUE(device.run(chunks_of(0)));
    EXPECT_TRUE(device.check());
  }
}

TEST(RetrievalGpu, BitmapAllOffAllOnAndSparse) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (bool fp8 : {false, true}) {
    const testkit::RetrievalWorkload w =
        fp8 ? fp8_workload(RetrievalKind::kClustered, RetrievalMetric::kL2, 3001, 100)
            : workload(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct, DType::kBFloat16,
                       3001, 100);
    for (double allowed : {0.0, 1.0, 0.02, 0.5}) {
      SCOPED_TRACE(::testing::Message() << (fp8 ? "fp8" : "bf16") << " allowed " << allowed);
      const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, allowed, 17);
      RetrievalProblem p = w.host_problem();
      p.corpus_bitmap = bitmap.data();
      p.sorted = allowed != 0.5;
      run_every_path(w, p);
    }
  }
}

TEST(RetrievalGpu, RangesShorterThanKWithAndWithoutBitmap) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      workload(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct, DType::kFloat16, 5000,
               2048);
  const std::vector<int32_t> starts = {0, 100, 7, 4999, 1000, 5000, 0, 2500};
  const std::vector<int32_t> ends = {5000, 400, 7, 5000, 4100, 5000, 2100, 4600};
  const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.6, 23);
  RetrievalProblem p = w.host_problem();
  p.range_starts = starts.data();
  p.range_ends = ends.data();
  for (bool filtered : {false, true}) {
    p.corpus_bitmap = filtered ? bitmap.data() : nullptr;
    for (bool sorted : {false, true}) {
      p.sorted = sorted;
      for (const RetrievalOptions& options : every_path(p, {1024})) {
        DeviceRetrieval device;
        ASSERT_TRUE(device.upload(w, p));
        ASSERT_TRUE(device.run(options));
        EXPECT_TRUE(device.check()) << "bitmap " << filtered << " sorted " << sorted << " "
                                    << path_label(options);
      }
    }
  }
}

TEST(RetrievalGpu, KOneAndTheLargestK) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t k : {int64_t{1}, kRetrievalMaxK}) {
    for (bool fp8 : {false, true}) {
      const testkit::RetrievalWorkload w =
          fp8 ? fp8_workload(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, 20000, k)
              : workload(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, DType::kFloat16,
                         20000, k);
      RetrievalProblem p = w.host_problem();
      p.sorted = true;
      for (const RetrievalOptions& options : every_path(p, {0, 9000})) {
        DeviceRetrieval device;
        ASSERT_TRUE(device.upload(w, p));
        ASSERT_TRUE(device.run(options));
        EXPECT_TRUE(device.check()) << "k " << k << (fp8 ? " fp8 " : " fp16 ")
                                    << path_label(options);
      }
    }
  }
}

TEST(RetrievalGpu, KBeyondTheCorpusPads) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      workload(RetrievalKind::kNormal, RetrievalMetric::kL2, DType::kBFloat16, 300, 512);
  for (const RetrievalOptions& options : every_path(w.host_problem(), {0, 128})) {
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, w.host_problem()));
    ASSERT_TRUE(device.run(options));
    EXPECT_TRUE(device.check()) << path_label(options);
  }
}

TEST(RetrievalGpu, NaNRowsAndQueriesAreNeverSelected) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  testkit::RetrievalWorkload w =
      workload(RetrievalKind::kNormalized, RetrievalMetric::kInnerProduct, DType::kFloat16, 2000,
               1500);
  const uint16_t nan = float_bits::f16_bits_from_f32(std::numeric_limits<float>::quiet_NaN());
  for (int64_t c = 0; c < w.spec.n; c += 3) w.corpus[c * w.spec.dim + 5] = nan;
  w.queries[2 * w.spec.dim] = nan;  // query 2 scores NaN everywhere
  RetrievalProblem p = w.host_problem();
  run_every_path(w, p);
  testkit::RetrievalWorkload f =
      fp8_workload(RetrievalKind::kNormalized, RetrievalMetric::kL2, 2000, 1500);
  for (int64_t c = 1; c < f.spec.n; c += 4) f.corpus_fp8[c * f.spec.dim + 9] = 0x7f;  // e4m3 NaN
  f.corpus_scales[6] = std::numeric_limits<float>::quiet_NaN();
  run_every_path(f, f.host_problem());
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
  ASSERT_TRUE(device.run(fused_path()));
  EXPECT_TRUE(device.check());
  device.download(&second, &scores);
  EXPECT_EQ(first, second);  // both paths, and both runs, pick the same rows
  // Deterministic ties go to the smallest rows: each tied group lists its copies in order.
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t j = 1; j < p.k; ++j) {
      if (scores[b * p.k + j] == scores[b * p.k + j - 1]) {
        EXPECT_EQ(second[b * p.k + j], second[b * p.k + j - 1] + 10) << "query " << b;
      }
    }
  }
}

TEST(RetrievalGpu, CorpusNormsMatchTheCpu) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (bool fp8 : {false, true}) {
    const testkit::RetrievalWorkload w =
        fp8 ? fp8_workload(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, 5000, 8)
            : workload(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kBFloat16, 5000, 8);
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, w.host_problem()));
    testkit::DeviceBuffer norms;
    ASSERT_TRUE(norms.allocate(static_cast<std::size_t>(w.spec.n) * 4).is_ok());
    const Status s = retrieval_corpus_norms(device.problem(), norms.as<float>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::vector<float> got(static_cast<std::size_t>(w.spec.n));
    ASSERT_TRUE(testkit::copy_to_host(got.data(), norms.data(), got.size() * 4).is_ok());
    for (int64_t c = 0; c < w.spec.n; ++c) {
      ASSERT_NEAR(got[c], w.corpus_norms[c], 1e-5f * (1.0f + w.corpus_norms[c])) << "row " << c;
    }
  }
}

TEST(RetrievalGpu, LaunchNeedsTheAddressesThePlanRead) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      fp8_workload(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, 1000, 16);
  const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.5, 1);
  RetrievalProblem p = w.host_problem();
  p.corpus_bitmap = bitmap.data();
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, p));
  RetrievalPlan plan;
  ASSERT_TRUE(retrieval_topk_plan(device.problem(), {}, &plan).is_ok());
  ASSERT_TRUE(plan.has_bitmap);
  ASSERT_TRUE(device.workspace.allocate(plan.workspace_bytes).is_ok());
  RetrievalAddresses addresses = retrieval_addresses(device.problem());
  addresses.corpus_bitmap = nullptr;
  Status s = retrieval_topk_launch(plan, addresses, device.workspace.data(), nullptr);
  EXPECT_NE(s.message().find("corpus_bitmap must not be null"), std::string::npos) << s.to_string();
  addresses = retrieval_addresses(device.problem());
  addresses.corpus_scales = nullptr;
  s = retrieval_topk_launch(plan, addresses, device.workspace.data(), nullptr);
  EXPECT_NE(s.message().find("corpus_scales must not be null"), std::string::npos) << s.to_string();
}

TEST(RetrievalGpu, GraphCaptureReplaysOnNewQueries) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      fp8_workload(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, 4000, 128);
  const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.7, 4);
  RetrievalProblem p = w.host_problem();
  p.corpus_bitmap = bitmap.data();
  p.sorted = true;
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, p));
  RetrievalPlan plan;
  ASSERT_TRUE(retrieval_topk_plan(device.problem(), chunks_of(1000), &plan).is_ok());
  ASSERT_EQ(plan.chunks, 4);
  replay_captured(plan, &device, [](uint64_t replay) {
    return fp8_workload(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, 4000, 128, 90 + replay);
  });
}

// A workload of `batch` queries of `dim` columns over n rows.
testkit::RetrievalWorkload shaped(RetrievalKind kind, RetrievalMetric metric, DType dtype,
                                  int64_t batch, int64_t n, int64_t dim, int64_t k) {
  testkit::RetrievalSpec spec = spec_of(kind, metric, dtype, n, k, 11);
  spec.batch = batch;
  spec.dim = dim;
  return testkit::make_retrieval_workload(spec);
}

TEST(RetrievalGpu, FusedOverSeveralQueryBlocksSplitsAndOddDims) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    int64_t batch, n, dim, k;
    RetrievalMetric metric;
    DType dtype;
  };
  for (const Case& c : {Case{130, 60000, 128, 256, RetrievalMetric::kInnerProduct, DType::kFloat16},
                        Case{3, 200000, 80, 1024, RetrievalMetric::kL2, DType::kBFloat16},
                        Case{65, 9000, 208, 64, RetrievalMetric::kCosine, DType::kFloat16},
                        Case{1, 100000, 1024, 16, RetrievalMetric::kInnerProduct, DType::kBFloat16},
                        Case{17, 777, 64, 8192, RetrievalMetric::kL2, DType::kFloat16}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << " x " << c.n << " d " << c.dim << " k " << c.k);
    const testkit::RetrievalWorkload w =
        shaped(RetrievalKind::kClustered, c.metric, c.dtype, c.batch, c.n, c.dim, c.k);
    RetrievalProblem p = w.host_problem();
    p.sorted = c.k != 256;
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, p));
    RetrievalPlan plan;
    ASSERT_TRUE(retrieval_topk_plan(device.problem(), fused_path(), &plan).is_ok());
    EXPECT_EQ(plan.path, RetrievalPath::kFused);
    ASSERT_TRUE(device.run(fused_path()));
    EXPECT_TRUE(device.check());
  }
}

TEST(RetrievalGpu, FusedListsThatFillAreCompactedExactly) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  // Every score tied (938 tiles over 264 lists of 384 slots): each list passes its limit within
  // three tiles and keeps its k smallest rows.
  testkit::RetrievalWorkload tied = shaped(RetrievalKind::kNormalized, RetrievalMetric::kInnerProduct,
                                           DType::kFloat16, 8, 120000, 64, 100);
  for (int64_t c = 1; c < tied.spec.n; ++c) {
    std::copy_n(&tied.corpus[0], tied.spec.dim, &tied.corpus[c * tied.spec.dim]);
  }
  // Rows sorted by their score for query 0 rising along the corpus: every tile beats the sample's
  // gate, so the gate rises only through the lists.
  testkit::RetrievalWorkload rising = shaped(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct,
                                             DType::kBFloat16, 4, 80000, 64, 2000);
  {
    const int64_t d = rising.spec.dim;
    std::vector<std::pair<double, int64_t>> order(static_cast<std::size_t>(rising.spec.n));
    for (int64_t c = 0; c < rising.spec.n; ++c) {
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) {
        dot += double{float_bits::f32_from_bf16_bits(rising.queries[j])} *
               float_bits::f32_from_bf16_bits(rising.corpus[c * d + j]);
      }
      order[c] = {dot, c};
    }
    std::sort(order.begin(), order.end());
    std::vector<uint16_t> sorted(rising.corpus.size());
    for (int64_t c = 0; c < rising.spec.n; ++c) {
      std::copy_n(&rising.corpus[order[c].second * d], d, &sorted[c * d]);
    }
    rising.corpus = sorted;
  }
  for (const testkit::RetrievalWorkload* w : {&tied, &rising}) {
    for (bool deterministic : {false, true}) {
      RetrievalProblem p = w->host_problem();
      p.deterministic = deterministic;
      p.sorted = true;
      DeviceRetrieval device;
      ASSERT_TRUE(device.upload(*w, p));
      ASSERT_TRUE(device.run(fused_path()));
      EXPECT_TRUE(device.check()) << (w == &tied ? "tied" : "rising") << " deterministic "
                                  << deterministic;
      if (!deterministic || w != &tied) continue;
      std::vector<int32_t> indices;
      std::vector<float> scores;
      device.download(&indices, &scores);
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t j = 0; j < p.k; ++j) EXPECT_EQ(indices[b * p.k + j], j) << "query " << b;
      }
    }
  }
}

TEST(RetrievalGpu, FusedPoolsOfTiedRowsSelectExactly) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  // Every row tied: the pool's composites differ only in their row bits, so the final selection's
  // descent starts low in the composite (4096 rows, k 101: 12 differing bits; 16 rows: 4).
  struct Case {
    int64_t n, k;
  };
  for (const Case& c : {Case{4096, 101}, Case{16, 4}, Case{2000, 1000}, Case{300, 299}}) {
    SCOPED_TRACE(::testing::Message() << c.n << " tied rows, k " << c.k);
    testkit::RetrievalWorkload tied = shaped(RetrievalKind::kNormalized,
                                             RetrievalMetric::kInnerProduct, DType::kFloat16, 5,
                                             c.n, 64, c.k);
    for (int64_t r = 1; r < tied.spec.n; ++r) {
      std::copy_n(&tied.corpus[0], tied.spec.dim, &tied.corpus[r * tied.spec.dim]);
    }
    RetrievalProblem p = tied.host_problem();
    p.deterministic = true;
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(tied, p));
    ASSERT_TRUE(device.run(fused_path()));
    EXPECT_TRUE(device.check());
  }
}

TEST(RetrievalGpu, FusedWalksOfManyShortTiles) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  // One or two 64-column slices a tile and several sample tiles per block (1.2M rows: about 4
  // sample tiles and 70 tiles per block): the two math warpgroups' handshake, with warps of one
  // running a tile ahead of the others.
  for (const int64_t dim : {64, 128}) {
    SCOPED_TRACE(::testing::Message() << "d " << dim);
    const testkit::RetrievalWorkload w =
        shaped(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct,
               dim == 64 ? DType::kFloat16 : DType::kBFloat16, 8, 1200000, dim,
               dim == 64 ? 16 : 256);
    const RetrievalProblem p = w.host_problem();
    DeviceRetrieval device;
    ASSERT_TRUE(device.upload(w, p));
    RetrievalPlan plan;
    ASSERT_TRUE(retrieval_topk_plan(device.problem(), fused_path(), &plan).is_ok());
    EXPECT_GE(plan.fused_sample_tiles, 3 * plan.fused_splits);
    ASSERT_TRUE(device.run(fused_path()));
    EXPECT_TRUE(device.check());
  }
}

TEST(RetrievalGpu, FusedPathRefusesAnFp8Corpus) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const testkit::RetrievalWorkload w =
      fp8_workload(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, 1000, 16);
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, w.host_problem()));
  RetrievalPlan plan;
  const Status s = retrieval_topk_plan(device.problem(), fused_path(), &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("fp8_e4m3"), std::string::npos) << s.to_string();
  ASSERT_TRUE(retrieval_topk_plan(device.problem(), {}, &plan).is_ok());
  EXPECT_EQ(plan.path, RetrievalPath::kUnfused);
}

TEST(RetrievalGpu, FusedGraphCaptureReplaysOnNewQueries) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  auto make = [](uint64_t seed) {
    testkit::RetrievalSpec spec =
        spec_of(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kFloat16, 40000, 512, seed);
    spec.batch = 70;
    return testkit::make_retrieval_workload(spec);
  };
  const testkit::RetrievalWorkload w = make(5);
  RetrievalProblem p = w.host_problem();
  p.sorted = true;
  DeviceRetrieval device;
  ASSERT_TRUE(device.upload(w, p));
  RetrievalPlan plan;
  ASSERT_TRUE(retrieval_topk_plan(device.problem(), fused_path(), &plan).is_ok());
  ASSERT_EQ(plan.path, RetrievalPath::kFused);
  ASSERT_GT(plan.fused_sample_tiles, 0);
  replay_captured(plan, &device, [&make](uint64_t replay) { return make(60 + replay); });
}

}  // namespace
}  // namespace litetopk
