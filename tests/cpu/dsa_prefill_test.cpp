// dsa_prefill_cpu against the two references run by hand (indexer_topk_cpu, ks[t] added to every
// index that is not padding, sparse_attention_cpu): the same indices, out, max_logits and lse,
// bit for bit, on causal chunks and on ranges that start past 0, are shorter than k or are empty.
// Then the checks: each names the DSA problem's field, and a plan rejects what the halves reject.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "litetopk/dsa.h"
#include "testkit/dsa_workload.h"
#include "tools/dsa_runner.h"

namespace litetopk {
namespace {

using testkit::DsaSpec;
using testkit::DsaWorkload;

struct LayerOutputs {
  std::vector<int32_t> indices;
  std::vector<uint16_t> out;
  std::vector<float> max_logits, lse;

  explicit LayerOutputs(const DsaSpec& spec)
      : indices(static_cast<std::size_t>(spec.T * spec.k), 12345),
        out(static_cast<std::size_t>(spec.T * spec.h_q * spec.d_v), 0x7fc0),
        max_logits(static_cast<std::size_t>(spec.T * spec.h_q), 12345.0f),
        lse(max_logits.size(), 12345.0f) {}
};

// The layer by hand: the indexer reference, the offset written out here, the attention reference.
LayerOutputs by_hand(const DsaWorkload& w) {
  LayerOutputs r(w.spec);
  IndexerProblem ip = w.indexer_problem();
  ip.indices = r.indices.data();
  EXPECT_TRUE(indexer_topk_cpu(ip).is_ok());
  for (int64_t t = 0; t < w.spec.T; ++t) {
    for (int64_t j = 0; j < w.spec.k; ++j) {
      int32_t& index = r.indices[static_cast<std::size_t>(t * w.spec.k + j)];
      index = index >= 0 ? w.indexer.ks[static_cast<std::size_t>(t)] + index : -1;
    }
  }
  SparseAttentionProblem ap = w.attention_problem(r.indices.data());
  ap.out = r.out.data();
  ap.max_logits = r.max_logits.data();
  ap.lse = r.lse.data();
  EXPECT_TRUE(sparse_attention_cpu(ap).is_ok());
  return r;
}

// dsa_prefill_cpu with indices out, or without (the call keeps its own).
LayerOutputs layer(const DsaWorkload& w, bool want_indices) {
  LayerOutputs r(w.spec);
  DsaPrefillProblem p = tools::dsa_prefill_problem(w);
  p.indices = want_indices ? r.indices.data() : nullptr;
  p.out = r.out.data();
  p.max_logits = r.max_logits.data();
  p.lse = r.lse.data();
  const Status s = dsa_prefill_cpu(p);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b,
                        const char* what) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

void expect_layer_matches_by_hand(const DsaWorkload& w) {
  const LayerOutputs want = by_hand(w);
  const LayerOutputs got = layer(w, true);
  EXPECT_EQ(got.indices, want.indices);
  EXPECT_EQ(got.out, want.out);
  expect_same_floats(got.max_logits, want.max_logits, "max_logits");
  expect_same_floats(got.lse, want.lse, "lse");
  const LayerOutputs without = layer(w, false);
  EXPECT_EQ(without.out, want.out) << "the outputs must not depend on whether indices are given";
  expect_same_floats(without.lse, want.lse, "lse without indices");
}

DsaSpec small_spec(int64_t T, int64_t S, int64_t k, int64_t h_q, uint64_t seed) {
  DsaSpec spec;
  spec.T = T;
  spec.S = S;
  spec.k = k;
  spec.h_q = h_q;
  spec.H = 32;
  spec.seed = seed;
  return spec;
}

TEST(DsaPrefillCpu, CausalChunkMatchesTheReferencesByHand) {
  for (uint64_t seed : {1u, 2u}) {
    // S - T + 1 = 25 < k = 32: the first queries' rows are short of k.
    const DsaWorkload w = testkit::make_dsa_workload(small_spec(24, 48, 32, 16, seed));
    SCOPED_TRACE(seed);
    expect_layer_matches_by_hand(w);
  }
}

TEST(DsaPrefillCpu, OffsetRangesShortAndEmptyRangesMatchTheReferencesByHand) {
  DsaWorkload w = testkit::make_dsa_workload(small_spec(16, 96, 24, 64, 7));
  const int32_t S = static_cast<int32_t>(w.spec.S);
  for (int32_t t = 0; t < static_cast<int32_t>(w.spec.T); ++t) {
    int32_t& ks = w.indexer.ks[static_cast<std::size_t>(t)];
    int32_t& ke = w.indexer.ke[static_cast<std::size_t>(t)];
    switch (t % 4) {
      case 0: ks = ke = 40 + t; break;           // empty: nothing to attend
      case 1: ks = S - 5; ke = S; break;          // shorter than k, at the end of the keys
      case 2: ks = 10 + t; ke = 10 + t + 60; break;  // starts past 0, longer than k
      default: ks = 0; ke = S; break;             // every key
    }
  }
  expect_layer_matches_by_hand(w);

  const LayerOutputs got = layer(w, true);
  const int64_t k = w.spec.k, h_q = w.spec.h_q;
  for (int64_t t = 0; t < w.spec.T; ++t) {
    const int32_t ks = w.indexer.ks[static_cast<std::size_t>(t)];
    const int32_t ke = w.indexer.ke[static_cast<std::size_t>(t)];
    int64_t valid = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t row = got.indices[static_cast<std::size_t>(t * k + j)];
      if (row == -1) continue;
      ++valid;
      EXPECT_GE(row, ks) << "query " << t << " slot " << j << ": a kv row, not a relative index";
      EXPECT_LT(row, ke) << "query " << t << " slot " << j;
    }
    EXPECT_EQ(valid, std::min<int64_t>(k, ke - ks)) << "query " << t;
    if (ks == ke) {
      for (int64_t h = 0; h < h_q; ++h) {
        EXPECT_EQ(got.max_logits[static_cast<std::size_t>(t * h_q + h)], -INFINITY);
        EXPECT_EQ(got.lse[static_cast<std::size_t>(t * h_q + h)], -INFINITY);
      }
      for (int64_t e = 0; e < h_q * w.spec.d_v; ++e) {
        EXPECT_EQ(got.out[static_cast<std::size_t>(t * h_q * w.spec.d_v + e)], 0u)
            << "query " << t << " attends nothing: out 0";
      }
    }
  }
}

TEST(DsaPrefillCpu, EveryRangeShorterThanK) {
  // k = 64 > S = 40: every row is padded.
  expect_layer_matches_by_hand(testkit::make_dsa_workload(small_spec(8, 40, 64, 32, 3)));
}

// ---- checks ----

void expect_rejected(const Status& status, const char* mention) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find(mention), std::string::npos)
      << "message \"" << status.message() << "\" does not name " << mention;
}

struct Fixture {
  DsaWorkload w = testkit::make_dsa_workload(small_spec(4, 16, 8, 16, 5));
  LayerOutputs outputs{w.spec};
  DsaPrefillProblem valid() {
    DsaPrefillProblem p = tools::dsa_prefill_problem(w);
    p.out = outputs.out.data();
    return p;
  }
};

// Each problem is the valid one with one field broken; its message starts with the field's name.
TEST(DsaPrefillValidation, NamesTheDsaProblemsFields) {
  Fixture f;
  ASSERT_TRUE(validate_dsa_prefill_problem(f.valid()).is_ok());
  auto* misaligned = reinterpret_cast<int32_t*>(
      reinterpret_cast<std::uintptr_t>(f.outputs.indices.data()) + 2);
  const struct {
    void (*broken)(DsaPrefillProblem*, int32_t*);
    const char* message;
  } cases[] = {
      {[](DsaPrefillProblem* p, int32_t*) { p->index_heads = 48; },
       "index_heads must be 32 or 64, got 48"},
      {[](DsaPrefillProblem* p, int32_t*) { p->index_head_dim = 64; },
       "index_head_dim must be 128, got 64"},
      {[](DsaPrefillProblem* p, int32_t*) { p->k = 0; }, "k must be in [1, 8192], got 0"},
      {[](DsaPrefillProblem* p, int32_t*) { p->h_q = 8; },
       "h_q must be 16, 32, 64 or 128, got 8"},
      {[](DsaPrefillProblem* p, int32_t*) { p->d_qk = 100; }, "d_qk must be 576 or 512, got 100"},
      {[](DsaPrefillProblem* p, int32_t*) { p->sm_scale = NAN; }, "sm_scale must be finite"},
      {[](DsaPrefillProblem* p, int32_t*) { p->num_keys = int64_t{1} << 33; },
       "num_keys must be <= 2147483647"},
      {[](DsaPrefillProblem* p, int32_t*) { p->index_q = nullptr; }, "index_q must not be null"},
      {[](DsaPrefillProblem* p, int32_t*) { p->index_kv_scale = nullptr; },
       "index_kv_scale must not be null"},
      {[](DsaPrefillProblem* p, int32_t*) { p->index_weights = nullptr; },
       "index_weights must not be null"},
      {[](DsaPrefillProblem* p, int32_t*) { p->q = nullptr; }, "q must not be null"},
      {[](DsaPrefillProblem* p, int32_t*) { p->out = nullptr; }, "out must not be null"},
      {[](DsaPrefillProblem* p, int32_t* bad) { p->indices = bad; },
       "indices must be 4-byte aligned"},
  };
  for (const auto& c : cases) {
    DsaPrefillProblem p = f.valid();
    c.broken(&p, misaligned);
    const Status s = dsa_prefill_cpu(p);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_EQ(s.message().rfind(c.message, 0), 0u)
        << "message \"" << s.message() << "\" does not start with " << c.message;
  }
}

TEST(DsaPrefillValidation, CpuChecksTheRanges) {
  Fixture f;
  f.w.indexer.ks[2] = 3;
  f.w.indexer.ke[2] = 2;
  expect_rejected(dsa_prefill_cpu(f.valid()), "ks[2] must be <= ke[2], got 3 > 2");
  f.w.indexer.ks[2] = 0;
  f.w.indexer.ke[2] = 17;
  expect_rejected(dsa_prefill_cpu(f.valid()), "ke[2] must be in [0, num_keys=16], got 17");
}

TEST(DsaPrefillPlan, RejectsBeforeAskingAnyDevice) {
  Fixture f;
  DsaPrefillPlan plan;
  DsaPrefillProblem p = f.valid();
  p.index_heads = 16;
  expect_rejected(dsa_prefill_plan(p, {}, &plan), "index_heads");
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.indexer.algo, IndexerAlgo::kAuto) << "a failed plan must not look planned";
  DsaPrefillOptions options;
  options.attention_algo = SparseAttentionAlgo::kUnionPacked;
  p = f.valid();
  p.h_q = 64;
  expect_rejected(dsa_prefill_plan(p, options, &plan), "attention_algo union-packed needs");
  options = {};
  options.indexer.candidate_capacity = -1;
  expect_rejected(dsa_prefill_plan(f.valid(), options, &plan),
                  "options.indexer.candidate_capacity must be >= 0");
  expect_rejected(dsa_prefill_plan(f.valid(), {}, nullptr), "plan is null");
  std::size_t bytes = 1;
  p = f.valid();
  p.k = 9000;
  expect_rejected(dsa_prefill_workspace_size(p, &bytes), "k must be in [1, 8192], got 9000");
  EXPECT_EQ(bytes, 0u);
}

TEST(DsaPrefillPlan, LaunchRefusesAPlanNeverMade) {
  expect_rejected(dsa_prefill_launch(DsaPrefillPlan{}, {}, nullptr, nullptr),
                  "plan was not made by dsa_prefill_plan");
}

}  // namespace
}  // namespace litetopk
