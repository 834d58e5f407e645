// dsa_prefill on the GPU against the CPU layer's checks (testkit/dsa_verify.h): the indices
// (made relative again, ks[t] subtracted) within tolerance of the indexer reference, and out,
// max_logits and lse within bf16 tolerance of sparse_attention_cpu over the GPU's own kv rows; on
// causal chunks and on ranges that start past 0. Then the layer captured in a CUDA graph (no
// allocation, no synchronization, no host read) and replayed on new data written into the same
// buffers.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_select_runner.h"
#include "litetopk/dsa.h"
#include "testkit/device_memory.h"
#include "testkit/dsa_verify.h"
#include "testkit/dsa_workload.h"

namespace litetopk::testing {
namespace {

using testkit::DeviceBuffer;
using testkit::DsaSpec;
using testkit::DsaWorkload;

// The layer's device buffers, sized once for a spec; inputs written by write_inputs.
struct DeviceLayer {
  DeviceBuffer index_q, index_kv, index_kv_scale, index_weights, ks, ke, q, kv, out, max_logits,
      lse, indices, workspace;

  Status allocate(const DsaSpec& spec) {
    const auto n = [](int64_t count, std::size_t bytes) {
      return static_cast<std::size_t>(count) * bytes;
    };
    Status s = index_q.allocate(n(spec.T * spec.H * spec.D, 1));
    if (s) s = index_kv.allocate(n(spec.S * spec.D, 1));
    if (s) s = index_kv_scale.allocate(n(spec.S, 4));
    if (s) s = index_weights.allocate(n(spec.T * spec.H, 4));
    if (s) s = ks.allocate(n(spec.T, 4));
    if (s) s = ke.allocate(n(spec.T, 4));
    if (s) s = q.allocate(n(spec.T * spec.h_q * spec.d_qk, 2));
    if (s) s = kv.allocate(n(spec.S * spec.d_qk, 2));
    if (s) s = out.allocate(n(spec.T * spec.h_q * spec.d_v, 2));
    if (s) s = max_logits.allocate(n(spec.T * spec.h_q, 4));
    if (s) s = lse.allocate(n(spec.T * spec.h_q, 4));
    if (s) s = indices.allocate(n(spec.T * spec.k, 4));
    return s;
  }

  Status write_inputs(const DsaWorkload& w) {
    const auto copy = [](const DeviceBuffer& to, const auto& from) {
      return testkit::copy_to_device(to.data(), from.data(), from.size() * sizeof(from[0]));
    };
    Status s = copy(index_q, w.indexer.q);
    if (s) s = copy(index_kv, w.indexer.kv);
    if (s) s = copy(index_kv_scale, w.indexer.kv_scale);
    if (s) s = copy(index_weights, w.indexer.weights);
    if (s) s = copy(ks, w.indexer.ks);
    if (s) s = copy(ke, w.indexer.ke);
    if (s) s = copy(q, w.attention.q);
    if (s) s = copy(kv, w.attention.kv);
    // Poisoned outputs: whatever the launch does not write shows.
    if (s) s = testkit::fill_device(out.data(), 0x7f, out.size());
    if (s) s = testkit::fill_device(indices.data(), 0x5a, indices.size());
    return s;
  }

  // The problem's sizes from the spec and these buffers' addresses (the caller picks whether the
  // indices are the caller's).
  DsaPrefillProblem problem(const DsaWorkload& w, bool want_indices) const {
    DsaPrefillProblem p;
    p.num_queries = w.spec.T;
    p.num_keys = w.spec.S;
    p.index_heads = w.spec.H;
    p.index_head_dim = w.spec.D;
    p.k = w.spec.k;
    p.h_q = w.spec.h_q;
    p.d_qk = w.spec.d_qk;
    p.d_v = w.spec.d_v;
    p.sm_scale = w.attention.sm_scale;
    p.index_q = index_q.data();
    p.index_kv = index_kv.data();
    p.index_kv_scale = index_kv_scale.as<float>();
    p.index_weights = index_weights.as<float>();
    p.ks = ks.as<int32_t>();
    p.ke = ke.as<int32_t>();
    p.q = q.data();
    p.kv = kv.data();
    p.out = out.data();
    p.max_logits = max_logits.as<float>();
    p.lse = lse.as<float>();
    p.indices = want_indices ? indices.as<int32_t>() : nullptr;
    return p;
  }
};

// The layer's outputs read back from the device.
struct HostLayer {
  std::vector<int32_t> rows;
  std::vector<uint16_t> out;
  std::vector<float> max_logits, lse;
};

Status read_back(const DsaSpec& spec, const DeviceLayer& d, HostLayer* h) {
  h->rows.resize(static_cast<std::size_t>(spec.T * spec.k));
  h->out.resize(static_cast<std::size_t>(spec.T * spec.h_q * spec.d_v));
  h->max_logits.resize(static_cast<std::size_t>(spec.T * spec.h_q));
  h->lse.resize(h->max_logits.size());
  Status s = testkit::copy_to_host(h->rows.data(), d.indices.data(), h->rows.size() * 4);
  if (s) s = testkit::copy_to_host(h->out.data(), d.out.data(), h->out.size() * 2);
  if (s) s = testkit::copy_to_host(h->max_logits.data(), d.max_logits.data(), h->lse.size() * 4);
  if (s) s = testkit::copy_to_host(h->lse.data(), d.lse.data(), h->lse.size() * 4);
  return s;
}

// Checks `got`'s rows (made relative to ks[t] again for the indexer's check) and its attention
// over `rows` (the same run's unless given); "" when they pass.
std::string check_layer(const DsaWorkload& w, const HostLayer& got,
                        const std::vector<int32_t>* rows = nullptr) {
  const DsaSpec& spec = w.spec;
  const testkit::DsaChecker checker(w);
  if (rows == nullptr) {
    std::vector<int32_t> relative(got.rows);
    for (int64_t t = 0; t < spec.T; ++t) {
      for (int64_t j = 0; j < spec.k; ++j) {
        int32_t& r = relative[static_cast<std::size_t>(t * spec.k + j)];
        if (r >= 0) r -= w.indexer.ks[static_cast<std::size_t>(t)];
      }
    }
    const std::string indices = checker.check_indices(relative.data());
    if (!indices.empty()) return "indices: " + indices;
    rows = &got.rows;
  }
  const std::string attention = checker.check_attention(rows->data(), got.out.data(),
                                                        got.max_logits.data(), got.lse.data());
  return attention.empty() ? "" : "attention: " + attention;
}

// Reads the layer back and checks it.
std::string check_layer(const DsaWorkload& w, const DeviceLayer& d) {
  HostLayer got;
  if (Status s = read_back(w.spec, d, &got); !s) return s.to_string();
  return check_layer(w, got);
}

DsaSpec layer_spec(int64_t h_q, uint64_t seed) {
  DsaSpec spec;
  spec.T = 128;
  spec.S = 4096;
  spec.h_q = h_q;
  spec.H = 64;
  spec.k = 512;
  spec.seed = seed;
  return spec;
}

// Moves every range to start past 0 (ks[t] = t + 1, keeping its end), so that the kv rows differ
// from the indexer's positions.
void offset_ranges(DsaWorkload* w) {
  for (std::size_t t = 0; t < w->indexer.ks.size(); ++t) {
    const int32_t start = static_cast<int32_t>(t) + 1;
    w->indexer.ks[t] = start < w->indexer.ke[t] ? start : w->indexer.ke[t];
  }
}

void run_and_check(const DsaWorkload& w, const DsaPrefillOptions& options, bool want_indices) {
  DeviceLayer d;
  ASSERT_TRUE(d.allocate(w.spec).is_ok());
  ASSERT_TRUE(d.write_inputs(w).is_ok());
  const DsaPrefillProblem p = d.problem(w, want_indices);
  std::size_t bytes = 0;
  ASSERT_TRUE(dsa_prefill_workspace_size(p, &bytes, options).is_ok());
  ASSERT_TRUE(d.workspace.allocate(bytes).is_ok());
  const Status s = dsa_prefill(p, d.workspace.data(), bytes, nullptr, options);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_TRUE(testkit::device_synchronize().is_ok());
  if (want_indices) {
    EXPECT_EQ(check_layer(w, d), "");
  }
}

TEST(DsaPrefillGpu, MatchesTheCpuLayer) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t h_q : {16, 64, 128}) {
    for (IndexerAlgo indexer : {IndexerAlgo::kAuto, IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
      SCOPED_TRACE(std::string("h_q ") + std::to_string(h_q) + " indexer " +
                   indexer_algo_name(indexer));
      DsaPrefillOptions options;
      options.indexer.algo = indexer;
      run_and_check(testkit::make_dsa_workload(layer_spec(h_q, 11)), options, true);
    }
  }
}

TEST(DsaPrefillGpu, RangesPastZeroGiveKvRows) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (SparseAttentionAlgo attention :
       {SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kPerQuery, SparseAttentionAlgo::kPlain}) {
    SCOPED_TRACE(sparse_attention_algo_name(attention));
    DsaWorkload w = testkit::make_dsa_workload(layer_spec(16, 12));
    offset_ranges(&w);
    DsaPrefillOptions options;
    options.attention_algo = attention;
    run_and_check(w, options, true);
  }
}

// Without indices the workspace holds the rows: the outputs are the attention over the rows a
// run with indices chose (the same sets; their order, and so the sums', may differ).
TEST(DsaPrefillGpu, WithoutIndicesTheOutputsAreTheSame) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const DsaWorkload w = testkit::make_dsa_workload(layer_spec(32, 13));
  DeviceLayer d;
  ASSERT_TRUE(d.allocate(w.spec).is_ok());
  HostLayer with_indices, without;
  for (bool want_indices : {true, false}) {
    ASSERT_TRUE(d.write_inputs(w).is_ok());
    const DsaPrefillProblem p = d.problem(w, want_indices);
    std::size_t bytes = 0;
    ASSERT_TRUE(dsa_prefill_workspace_size(p, &bytes).is_ok());
    ASSERT_TRUE(d.workspace.allocate(bytes).is_ok());
    ASSERT_TRUE(dsa_prefill(p, d.workspace.data(), bytes, nullptr).is_ok());
    ASSERT_TRUE(read_back(w.spec, d, want_indices ? &with_indices : &without).is_ok());
  }
  EXPECT_EQ(check_layer(w, with_indices), "");
  EXPECT_EQ(check_layer(w, without, &with_indices.rows), "");
}

TEST(DsaPrefillGpu, CapturedInAGraphAndReplayedOnNewData) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  DsaWorkload w = testkit::make_dsa_workload(layer_spec(16, 21));
  DeviceLayer d;
  ASSERT_TRUE(d.allocate(w.spec).is_ok());
  const DsaPrefillProblem p = d.problem(w, true);
  DsaPrefillPlan plan;
  ASSERT_TRUE(dsa_prefill_plan(p, {}, &plan).is_ok());
  ASSERT_TRUE(d.workspace.allocate(plan.workspace_bytes).is_ok());
  DsaPrefillAddresses a;
  a.index_q = p.index_q;
  a.index_kv = p.index_kv;
  a.index_kv_scale = p.index_kv_scale;
  a.index_weights = p.index_weights;
  a.ks = p.ks;
  a.ke = p.ke;
  a.q = p.q;
  a.kv = p.kv;
  a.out = p.out;
  a.max_logits = p.max_logits;
  a.lse = p.lse;
  a.indices = p.indices;

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status captured = dsa_prefill_launch(plan, a, d.workspace.data(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t seed : {22u, 23u}) {
    DsaSpec spec = w.spec;
    spec.seed = seed;
    w = testkit::make_dsa_workload(spec);
    if (seed == 23u) offset_ranges(&w);  // new ranges too: nothing of them was read at capture
    ASSERT_TRUE(d.write_inputs(w).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(check_layer(w, d), "") << "seed " << seed;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace litetopk::testing
