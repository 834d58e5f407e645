// GPU indexer against the CPU fp64 oracle: the logits kernel element by element, and indexer_topk
// (unfused path) on every adversarial indexer case; bad input on the GPU entry points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/indexer_testing.h"
#include "testkit/device_memory.h"
#include "formats/hot_sample_layout.h"
#include "litetopk/fp8_e4m3.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

using testkit::DeviceBuffer;

// The GPU is held to indexer_tolerance_rel_gpu (the fp8 wgmma accumulator's bound, about 4.9e-4
// of the scale); LogitsMatchCpu prints the worst error it saw per case.
double gpu_rel(const IndexerCase& c) { return indexer_tolerance_rel_gpu(c.D, c.H); }

// The case's inputs on the device and a problem over them.
struct DeviceInputs {
  DeviceBuffer q, kv, kv_scale, weights, ks, ke, indices, values;

  Status upload(const IndexerCase& c, const HostIndexerInputs& in) {
    Status s = q.allocate(std::max<std::size_t>(in.q.size(), 16));
    if (s) s = kv.allocate(std::max<std::size_t>(in.kv.size(), 16));
    if (s) s = kv_scale.allocate(std::max<std::size_t>(in.kv_scale.size(), 1) * 4);
    if (s) s = weights.allocate(std::max<std::size_t>(in.weights.size(), 1) * 4);
    if (s) s = ks.allocate(std::max<std::size_t>(in.ks.size(), 1) * 4);
    if (s) s = ke.allocate(std::max<std::size_t>(in.ke.size(), 1) * 4);
    const auto out = static_cast<std::size_t>(std::max<int64_t>(c.T * c.k, 1));
    if (s) s = indices.allocate(out * 4);
    if (s) s = values.allocate(out * 4);
    if (s) s = testkit::copy_to_device(q.data(), in.q.data(), in.q.size());
    if (s) s = testkit::copy_to_device(kv.data(), in.kv.data(), in.kv.size());
    if (s) s = testkit::copy_to_device(kv_scale.data(), in.kv_scale.data(), in.kv_scale.size() * 4);
    if (s) s = testkit::copy_to_device(weights.data(), in.weights.data(), in.weights.size() * 4);
    if (s) s = testkit::copy_to_device(ks.data(), in.ks.data(), in.ks.size() * 4);
    if (s) s = testkit::copy_to_device(ke.data(), in.ke.data(), in.ke.size() * 4);
    if (s) s = testkit::fill_device(indices.data(), 0x5a, indices.size());
    if (s) s = testkit::fill_device(values.data(), 0x5a, values.size());
    return s;
  }

  IndexerProblem problem(const IndexerCase& c, const HostIndexerInputs& in) {
    IndexerProblem p = make_indexer_problem(c, in, indices.as<int32_t>(), values.as<float>());
    p.q = q.data();
    p.kv = kv.data();
    p.kv_scale = kv_scale.as<float>();
    p.weights = weights.as<float>();
    p.ks = ks.as<int32_t>();
    p.ke = ke.as<int32_t>();
    return p;
  }
};

class IndexerGpu : public ::testing::TestWithParam<IndexerCase> {};

struct HostTopk {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

// Runs indexer_topk with `options` on poisoned outputs and copies the result back; with `counts`,
// also the fused kernel's three candidate counters (IndexerOptions::candidate_counters).
Status run_with_options(const IndexerCase& c, const HostIndexerInputs& in, IndexerOptions options,
                        HostTopk* result, unsigned long long (*counts)[3] = nullptr) {
  DeviceInputs dev;
  Status s = dev.upload(c, in);
  if (!s) return s;
  const IndexerProblem p = dev.problem(c, in);
  DeviceBuffer counters;
  if (counts != nullptr) {
    s = counters.allocate(sizeof(*counts));
    if (s) s = testkit::fill_device(counters.data(), 0, sizeof(*counts));
    if (!s) return s;
    options.candidate_counters = counters.as<unsigned long long>();
  }
  std::size_t bytes = 0;
  s = indexer_topk_workspace_size(p, &bytes, options);
  DeviceBuffer workspace;
  if (s) s = workspace.allocate(bytes);
  if (s) s = indexer_topk(p, workspace.data(), bytes, nullptr, options);
  if (s) s = testkit::device_synchronize();
  const auto out = static_cast<std::size_t>(c.T * c.k);
  result->indices.resize(out);
  result->values.resize(out);
  if (s) s = testkit::copy_to_host(result->indices.data(), dev.indices.data(), out * 4);
  if (s) s = testkit::copy_to_host(result->values.data(), dev.values.data(), out * 4);
  if (s && counts != nullptr) s = testkit::copy_to_host(*counts, counters.data(), sizeof(*counts));
  return s;
}

// indexer_topk with `algo` and the fused kernel's candidate capacity.
Status run_topk(const IndexerCase& c, const HostIndexerInputs& in, IndexerAlgo algo,
                HostTopk* result, int64_t candidate_capacity = 0) {
  IndexerOptions options;
  options.algo = algo;
  options.candidate_capacity = candidate_capacity;
  return run_with_options(c, in, options, result);
}

TEST_P(IndexerGpu, TopkMatchesOracle) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase& c = GetParam();
  const HostIndexerInputs in = make_indexer_inputs(c);
  HostTopk unfused;
  const Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(check_indexer_oracle(c, in, unfused.indices.data(), unfused.values.data(), gpu_rel(c)));
}

// The fused kernel: the oracle, and index-for-index agreement (ties aside) with the unfused path,
// which computes bit-identical scores; with the default candidate capacity and with the smallest
// one (capacity 1 is raised to 2k), which forces a reduction of the lists whenever 2k pile up.
TEST_P(IndexerGpu, FusedMatchesOracleAndUnfused) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase& c = GetParam();
  const HostIndexerInputs in = make_indexer_inputs(c);
  HostTopk unfused;
  Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int64_t capacity : {int64_t{0}, int64_t{1}}) {
    SCOPED_TRACE("candidate_capacity " + std::to_string(capacity));
    HostTopk fused;
    s = run_topk(c, in, IndexerAlgo::kFused, &fused, capacity);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(check_indexer_oracle(c, in, fused.indices.data(), fused.values.data(), gpu_rel(c)));
    EXPECT_TRUE(check_indexer_agreement(c, fused.indices.data(), fused.values.data(),
                                        unfused.indices.data(), unfused.values.data()));
  }
}

TEST_P(IndexerGpu, LogitsMatchCpu) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase& c = GetParam();
  if (c.T * c.S > (int64_t{1} << 24)) GTEST_SKIP() << "large case: covered by TopkMatchesOracle";
  const HostIndexerInputs in = make_indexer_inputs(c);
  DeviceInputs dev;
  ASSERT_TRUE(dev.upload(c, in).is_ok());
  const IndexerProblem p = dev.problem(c, in);
  const int64_t stride = c.S + 3;  // a stride that is not the row length
  const auto count = static_cast<std::size_t>(std::max<int64_t>(c.T * stride, 1));
  DeviceBuffer logits;
  ASSERT_TRUE(logits.allocate(count * 4).is_ok());
  ASSERT_TRUE(testkit::fill_device(logits.data(), 0x5a, count * 4).is_ok());
  Status s = indexer_logits(p, logits.as<float>(), stride, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::vector<float> got(count);
  ASSERT_TRUE(testkit::copy_to_host(got.data(), logits.data(), count * 4).is_ok());
  std::vector<float> want(count);
  IndexerProblem host = make_indexer_problem(c, in, nullptr, nullptr);
  s = indexer_logits_cpu(host, want.data(), stride);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  // The scale of indexer_tolerance_rel: sum_h |w[t,h]| |q[t,h]|_2 * max_s |kv_scale[s]| |kv[s]|_2.
  auto norm = [](const uint8_t* bytes) {
    double sum = 0.0;
    for (int d = 0; d < 128; ++d) {
      const double v = fp8::e4m3_to_float(bytes[d]);
      if (std::isfinite(v)) sum += v * v;
    }
    return std::sqrt(sum);
  };
  double kv_max = 0.0;
  for (int64_t sk = 0; sk < c.S; ++sk) {
    kv_max = std::max(kv_max, std::fabs(in.kv_scale[static_cast<std::size_t>(sk)]) *
                                  norm(in.kv.data() + sk * 128));
  }
  double worst = 0.0;  // largest |error| / the query's tolerance scale
  for (int64_t t = 0; t < c.T; ++t) {
    double scale = 1e-30;
    for (int64_t h = 0; h < c.H; ++h) {
      scale += std::fabs(in.weights[static_cast<std::size_t>(t * c.H + h)]) *
               norm(in.q.data() + (t * c.H + h) * 128) * kv_max;
    }
    for (int64_t sk = 0; sk < c.S; ++sk) {
      const auto i = static_cast<std::size_t>(t * stride + sk);
      if (std::isnan(want[i]) || std::isinf(want[i])) {
        ASSERT_TRUE((std::isnan(want[i]) && std::isnan(got[i])) || want[i] == got[i])
            << c.name << " query " << t << " key " << sk << ": got " << got[i] << ", want "
            << want[i];
        continue;
      }
      const double error = std::fabs(static_cast<double>(got[i]) - want[i]) / scale;
      worst = std::max(worst, error);
      ASSERT_LE(error, gpu_rel(c)) << c.name << " query " << t << " key " << sk << ": got "
                                        << got[i] << ", want " << want[i];
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("  %s: worst |gpu - cpu| / tolerance scale = %.3g\n", c.name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Cases, IndexerGpu, ::testing::ValuesIn(indexer_cases()),
                         [](const ::testing::TestParamInfo<IndexerCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(IndexerGpuErrors, WorkspaceTooSmall) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("Errors", 4, 3000, 64, 2049, 1);
  const HostIndexerInputs in = make_indexer_inputs(c);
  DeviceInputs dev;
  ASSERT_TRUE(dev.upload(c, in).is_ok());
  const IndexerProblem p = dev.problem(c, in);
  Status s;
  for (IndexerAlgo algo : {IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    IndexerOptions options;
    options.algo = algo;
    std::size_t bytes = 0;
    ASSERT_TRUE(indexer_topk_workspace_size(p, &bytes, options).is_ok());
    ASSERT_GT(bytes, 0u);
    DeviceBuffer workspace;
    ASSERT_TRUE(workspace.allocate(bytes).is_ok());
    s = indexer_topk(p, workspace.data(), bytes - 1, nullptr, options);
    EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  }
  s = indexer_logits(p, nullptr, c.S, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
}

}  // namespace
}  // namespace litetopk::testing

namespace litetopk::testing {
namespace {

// A small fused case for compute-sanitizer (its filter is *Small*): several list reductions per
// query (k = 64 over 3000 keys, capacity 2k), a partial last block of queries, H = 32 and 64.
TEST(IndexerGpuSmall, FusedUnderSanitizer) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t heads : {32, 64}) {
    const IndexerCase c = causal_case("SmallFused", 6, 3000, heads, 64, 5);
    const HostIndexerInputs in = make_indexer_inputs(c);
    HostTopk fused;
    const Status s = run_topk(c, in, IndexerAlgo::kFused, &fused, 1);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(check_indexer_oracle(c, in, fused.indices.data(), fused.values.data(), gpu_rel(c)));
  }
}

// The fused kernel's candidate counters: it admits at least the k best of every query's range
// (it keeps them) and at most every key of the ranges; the smallest capacity forces reductions.
TEST(IndexerGpuSmall, FusedCandidateCounters) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("SmallCounters", 6, 3000, 64, 64, 9);
  const HostIndexerInputs in = make_indexer_inputs(c);
  IndexerOptions options;
  options.algo = IndexerAlgo::kFused;
  options.candidate_capacity = 1;
  options.cold_sample = false;  // a re-run block would count its candidates twice
  HostTopk fused;
  unsigned long long counts[3] = {};
  const Status s = run_with_options(c, in, options, &fused, &counts);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  unsigned long long least = 0, most = 0;
  for (int64_t t = 0; t < c.T; ++t) {
    const auto begin = std::clamp<int64_t>(in.ks[static_cast<std::size_t>(t)], 0, c.S);
    const auto end = std::clamp<int64_t>(in.ke[static_cast<std::size_t>(t)], begin, c.S);
    most += static_cast<unsigned long long>(end - begin);
    least += static_cast<unsigned long long>(std::min<int64_t>(end - begin, c.k));
  }
  EXPECT_GE(counts[0], least);
  EXPECT_LE(counts[0], most);
  EXPECT_GT(counts[1], 0u);  // capacity 2k = 128 over ~3000 keys per query
}

// ---- the cold sample's speculative gate ----

// Inputs whose k best all lie in the cold sample: with 8 sample tiles over a range of 256 tiles
// (S = 16384, every query's range nearly all of it), the sample is key tiles 0, 32, 64, ...; their
// kv scales are 64x the others and the weights positive, so those tiles hold every query's k
// best. A query's speculative gate is then its r-th best sample score (mu = 8 x 64 / 256 = 2,
// r = 11, k = 64): far fewer than k keys beat it, every query fails its check, and every query
// block is re-run. The results are exact, the same as unfused and as without the cold sample.
TEST(IndexerGpuSmall, FusedColdSampleRetriesFailedBlocks) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t heads : {32, 64}) {
    const IndexerCase c = causal_case("ColdSampleRetry", 8, 16384, heads, 64, 21);
    HostIndexerInputs in = make_indexer_inputs(c);
    for (int64_t key = 0; key < c.S; ++key) {
      if ((key / 64) % 32 == 0) in.kv_scale[static_cast<std::size_t>(key)] = 64.0f;
    }
    for (float& w : in.weights) w = std::fabs(w) + 0.1f;
    HostTopk unfused, speculative, plain;
    Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    IndexerOptions options;
    options.algo = IndexerAlgo::kFused;
    options.cold_sample_tiles = 8;  // the sampled tiles are known
    unsigned long long counts[3] = {};
    s = run_with_options(c, in, options, &speculative, &counts);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    options.cold_sample = false;
    unsigned long long plain_counts[3] = {};
    s = run_with_options(c, in, options, &plain, &plain_counts);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const int64_t query_blocks = (c.T * heads + 255) / 256;
    EXPECT_EQ(counts[2], static_cast<unsigned long long>(query_blocks)) << "H = " << heads;
    EXPECT_EQ(plain_counts[2], 0u);
    for (const HostTopk* r : {&speculative, &plain}) {
      EXPECT_TRUE(check_indexer_oracle(c, in, r->indices.data(), r->values.data(), gpu_rel(c)));
      EXPECT_TRUE(check_indexer_agreement(c, r->indices.data(), r->values.data(),
                                          unfused.indices.data(), unfused.values.data()));
    }
  }
}

// On random inputs the speculative gate holds (a re-run is rare) and the results are those of the
// unfused path, with and without the cold sample; the candidate counts are printed.
TEST(IndexerGpuSmall, FusedColdSampleExact) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("ColdSample", 16, 65536, 64, 512, 77);
  const HostIndexerInputs in = make_indexer_inputs(c);
  HostTopk unfused;
  Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (bool cold_sample : {true, false}) {
    IndexerOptions options;
    options.algo = IndexerAlgo::kFused;
    options.cold_sample = cold_sample;
    HostTopk fused;
    unsigned long long counts[3] = {};
    s = run_with_options(c, in, options, &fused, &counts);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(check_indexer_agreement(c, fused.indices.data(), fused.values.data(),
                                        unfused.indices.data(), unfused.values.data()))
        << "cold sample " << cold_sample;
    std::printf("  cold sample %s: %.0f candidates per query, %llu query blocks re-run\n",
                cold_sample ? "on" : "off",
                static_cast<double>(counts[0]) / static_cast<double>(c.T), counts[2]);
  }
}

// ---- the gated kernel (cold sample gate in the four-warpgroup core's epilogue) ----

// Runs unfused and fused (gated: the cold sample on, no state) on the same inputs and holds the
// fused result to unfused (and to the oracle when it is quick: unfused is held to it on every
// case of the suite); returns the fused kernel's counters.
void expect_gated_exact(const IndexerCase& c, const HostIndexerInputs& in, int64_t capacity,
                        unsigned long long (*counts)[3]) {
  HostTopk unfused, fused;
  Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  IndexerOptions options;
  options.algo = IndexerAlgo::kFused;
  options.candidate_capacity = capacity;
  s = run_with_options(c, in, options, &fused, counts);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  if (c.T * c.S * c.H <= (int64_t{1} << 25)) {
    EXPECT_TRUE(
        check_indexer_oracle(c, in, fused.indices.data(), fused.values.data(), gpu_rel(c)));
  }
  EXPECT_TRUE(check_indexer_agreement(c, fused.indices.data(), fused.values.data(),
                                      unfused.indices.data(), unfused.values.data()));
}

// Lists too short for what the gate admits (capacity 2k against about 3k expected): rows
// overflow, their blocks are re-run exactly, and nothing is lost. With the default capacity on
// the same inputs, no block is re-run.
TEST(IndexerGpuSmall, GatedListOverflowIsRerun) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t heads : {32, 64}) {
    const IndexerCase c = causal_case("GatedOverflow", 24, 65536, heads, 512, 91);
    const HostIndexerInputs in = make_indexer_inputs(c);
    unsigned long long small[3] = {}, fitting[3] = {};
    expect_gated_exact(c, in, 1, &small);
    EXPECT_GT(small[2], 0u) << "H = " << heads;
    expect_gated_exact(c, in, 0, &fitting);
    EXPECT_EQ(fitting[2], 0u) << "H = " << heads;
  }
}

// Every score equal (one kv row repeated, one scale): the gate is that score, every key reaches
// it, each list overflows and the re-run picks k of the ties. Then every score NaN but a few:
// the sample holds fewer valid scores than the gate's rank, the gate is -inf, and the result is
// the valid keys then -1 padding.
TEST(IndexerGpuSmall, GatedTiesAndNaN) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("GatedTies", 8, 32768, 64, 256, 17);
  HostIndexerInputs in = make_indexer_inputs(c);
  const std::size_t row = static_cast<std::size_t>(c.D);
  for (std::size_t key = 1; key < static_cast<std::size_t>(c.S); ++key) {
    std::copy(in.kv.begin(), in.kv.begin() + static_cast<std::ptrdiff_t>(row),
              in.kv.begin() + static_cast<std::ptrdiff_t>(key * row));
  }
  for (float& scale : in.kv_scale) scale = 1.0f;
  for (float& w : in.weights) w = std::fabs(w) + 0.1f;
  unsigned long long ties[3] = {};
  expect_gated_exact(c, in, 0, &ties);
  EXPECT_GT(ties[2], 0u);
  HostIndexerInputs sparse = make_indexer_inputs(c);
  for (std::size_t key = 0; key < sparse.kv_scale.size(); ++key) {
    if (key % 1000 != 3) sparse.kv_scale[key] = NAN;
  }
  unsigned long long none[3] = {};
  expect_gated_exact(c, sparse, 0, &none);
}

// Tiny and uneven shapes through the gated pipeline: one query, ranges shorter than k in a long
// key set, a partial last query block, k = 1.
TEST(IndexerGpuSmall, GatedShortRangesAndTinyShapes) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t heads : {32, 64}) {
    const IndexerCase one = causal_case("GatedOne", 1, 40000, heads, 1, 3);
    unsigned long long counts[3] = {};
    expect_gated_exact(one, make_indexer_inputs(one), 0, &counts);
    const IndexerCase ragged = causal_case("GatedRagged", 13, 50000, heads, 2048, 4);
    HostIndexerInputs in = make_indexer_inputs(ragged);
    for (int64_t t = 0; t < ragged.T; ++t) {
      // Every other query: a range of 1000 keys (shorter than k) somewhere in the middle.
      if (t % 2 == 1) {
        in.ks[static_cast<std::size_t>(t)] = static_cast<int32_t>(5000 + 997 * t);
        in.ke[static_cast<std::size_t>(t)] = static_cast<int32_t>(6000 + 997 * t);
      }
    }
    expect_gated_exact(ragged, in, 0, &counts);
  }
}

// ---- the hot sample carried in IndexerState ----

// indexer_topk with a state (and the fused kernel's candidate counter): the result and the
// number of candidates admitted (0 for unfused).
Status run_with_state(const IndexerCase& c, const HostIndexerInputs& in, IndexerAlgo algo,
                      void* state, HostTopk* result, unsigned long long* candidates) {
  IndexerState st;
  st.data = state;
  st.bytes = indexer_state_bytes(c.k);
  IndexerOptions options;
  options.algo = algo;
  options.state = state != nullptr ? &st : nullptr;
  unsigned long long counts[3] = {};
  const Status s = run_with_options(c, in, options, result, &counts);
  *candidates = counts[0];
  return s;
}

// The state's header words: count, capacity, magic.
std::vector<int32_t> state_header(const DeviceBuffer& state) {
  std::vector<int32_t> header(3, 0);
  EXPECT_TRUE(testkit::copy_to_host(header.data(), state.data(), 3 * sizeof(int32_t)).is_ok());
  return header;
}

// Two consecutive chunks (make_chunk_pair): chunk 1 writes the hot sample, chunk 2 reads it. The
// results stay exact and index for index those of the unfused path, with a useful sample (fewer
// candidates than a cold start), a useless one (chunk 2's top-k is elsewhere) and a garbage state
// (never written by litetopk: ignored, then overwritten). Both algorithms write the sample.
TEST(IndexerGpuSmall, HotSampleAcrossChunks) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("HotSample", 12, 12000, 64, 64, 33);
  IndexerCase c1 = c;
  c1.S = c.S - c.T;
  const std::size_t state_bytes = indexer_state_bytes(c.k);
  for (bool disjoint : {false, true}) {
    SCOPED_TRACE(disjoint ? "chunk 2's top-k elsewhere" : "chunk 2's top-k overlaps chunk 1's");
    const auto [first, second] = make_chunk_pair(c, disjoint);
    for (IndexerAlgo writer : {IndexerAlgo::kFused, IndexerAlgo::kUnfused}) {
      SCOPED_TRACE(std::string("chunk 1 by ") + indexer_algo_name(writer));
      DeviceBuffer state;
      ASSERT_TRUE(state.allocate(state_bytes).is_ok());
      IndexerState st{state.data(), state_bytes};
      ASSERT_TRUE(indexer_state_reset(st, nullptr).is_ok());
      HostTopk r1;
      unsigned long long n1 = 0;
      Status s = run_with_state(c1, first, writer, state.data(), &r1, &n1);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      EXPECT_TRUE(check_indexer_oracle(c1, first, r1.indices.data(), r1.values.data(), gpu_rel(c1)));
      const std::vector<int32_t> header = state_header(state);
      EXPECT_EQ(header[0], std::min<int64_t>(4 * c.k, c1.S));
      EXPECT_EQ(header[1], 4 * c.k);
      EXPECT_EQ(header[2], 0x4c54484f);

      HostTopk unfused, cold, warm;
      unsigned long long n_unfused = 0, n_cold = 0, n_warm = 0;
      s = run_with_state(c, second, IndexerAlgo::kUnfused, nullptr, &unfused, &n_unfused);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      s = run_with_state(c, second, IndexerAlgo::kFused, nullptr, &cold, &n_cold);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      s = run_with_state(c, second, IndexerAlgo::kFused, state.data(), &warm, &n_warm);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      for (const HostTopk* r : {&cold, &warm}) {
        EXPECT_TRUE(check_indexer_oracle(c, second, r->indices.data(), r->values.data(), gpu_rel(c)));
        EXPECT_TRUE(check_indexer_agreement(c, r->indices.data(), r->values.data(),
                                            unfused.indices.data(), unfused.values.data()));
      }
      std::printf("  hot sample (%s, chunk 1 by %s): candidates cold %llu, with the sample %llu\n",
                  disjoint ? "disjoint" : "overlapping", indexer_algo_name(writer), n_cold,
                  n_warm);
      if (!disjoint) {
        EXPECT_LT(n_warm, n_cold);
      }
    }
  }
  // A state never written by litetopk (no magic word) is a cold start, then holds this sample.
  const auto [first, second] = make_chunk_pair(c, false);
  DeviceBuffer state;
  ASSERT_TRUE(state.allocate(state_bytes).is_ok());
  ASSERT_TRUE(testkit::fill_device(state.data(), 0x5a, state_bytes).is_ok());
  HostTopk r;
  unsigned long long n = 0;
  Status s = run_with_state(c, second, IndexerAlgo::kFused, state.data(), &r, &n);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(check_indexer_oracle(c, second, r.indices.data(), r.values.data(), gpu_rel(c)));
  EXPECT_EQ(state_header(state)[2], 0x4c54484f);
}

// A hot sample whose k positions all score -inf (negative weights, kv_scale +inf there): the k
// best of the sample bound the gate at a boundary among -inf composites, whose key lies below
// -inf's. The gate must read as -inf (an earlier version decoded it as NaN, after which no score
// passed the math warps' flags and every query came out -1). The state is written by hand in its
// layout (formats/hot_sample_layout.h); the cold sample is off to isolate the hot one.
TEST(IndexerGpuSmall, HotSampleOfMinusInfinityScores) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("HotMinusInfinity", 4, 3000, 64, 16, 41);
  HostIndexerInputs in = make_indexer_inputs(c);
  for (float& w : in.weights) w = -std::fabs(w) - 0.01f;
  std::vector<int32_t> state_words(indexer_state_bytes(c.k) / sizeof(int32_t), 0);
  state_words[hot_sample::kCountWord] = static_cast<int32_t>(c.k);
  state_words[hot_sample::kCapacityWord] = static_cast<int32_t>(hot_sample::capacity(c.k));
  state_words[hot_sample::kMagicWord] = hot_sample::kMagic;
  for (int64_t i = 0; i < c.k; ++i) {
    const int64_t position = 100 + 7 * i;  // inside every query's causal range
    state_words[static_cast<std::size_t>(hot_sample::kHeaderWords + i)] =
        static_cast<int32_t>(position);
    in.kv_scale[static_cast<std::size_t>(position)] = INFINITY;
  }
  DeviceBuffer state;
  ASSERT_TRUE(state.allocate(state_words.size() * sizeof(int32_t)).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(state.data(), state_words.data(),
                                     state_words.size() * sizeof(int32_t))
                  .is_ok());
  IndexerState st{state.data(), state_words.size() * sizeof(int32_t)};
  HostTopk unfused, fused;
  Status s = run_topk(c, in, IndexerAlgo::kUnfused, &unfused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  IndexerOptions options;
  options.algo = IndexerAlgo::kFused;
  options.state = &st;
  options.cold_sample = false;
  s = run_with_options(c, in, options, &fused);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(check_indexer_oracle(c, in, fused.indices.data(), fused.values.data(), gpu_rel(c)));
  EXPECT_TRUE(check_indexer_agreement(c, fused.indices.data(), fused.values.data(),
                                      unfused.indices.data(), unfused.values.data()));
}

TEST(IndexerGpuErrors, StateTooSmall) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const IndexerCase c = causal_case("StateTooSmall", 4, 3000, 64, 16, 1);
  const HostIndexerInputs in = make_indexer_inputs(c);
  DeviceInputs dev;
  ASSERT_TRUE(dev.upload(c, in).is_ok());
  const IndexerProblem p = dev.problem(c, in);
  DeviceBuffer state;
  ASSERT_TRUE(state.allocate(indexer_state_bytes(c.k)).is_ok());
  IndexerState st{state.data(), indexer_state_bytes(c.k) - 4};
  IndexerOptions options;
  options.state = &st;
  std::size_t bytes = 0;
  const Status s = indexer_topk_workspace_size(p, &bytes, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("options.state->bytes"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace litetopk::testing
