// The DSA layer's inputs and checks (testkit/dsa_workload.h, testkit/dsa_verify.h): the spec's
// errors, the two halves drawn exactly like the indexer and sparse attention generators, the
// attended pairs of a causal chunk, which queries the checks cover, and the checker passing the
// references' own outputs while catching a wrong index, a future token, a wrong out value and a
// wrong lse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/float_bits.h"
#include "testkit/dsa_verify.h"
#include "testkit/dsa_workload.h"

namespace litetopk::testkit {
namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

DsaSpec tiny() {
  DsaSpec spec;
  spec.T = 8;
  spec.S = 20;
  spec.h_q = 32;
  spec.k = 16;  // the first queries see 13 .. 15 tokens: -1 padded rows
  spec.seed = 3;
  return spec;
}

// The references' outputs for the whole chunk.
struct Outputs {
  std::vector<int32_t> indices;
  std::vector<uint16_t> out;
  std::vector<float> max_logits, lse;
};

Outputs run_references(const DsaWorkload& w) {
  const DsaSpec& spec = w.spec;
  Outputs o;
  o.indices.assign(size(spec.T * spec.k), -2);
  o.out.assign(size(spec.T * spec.h_q * spec.d_v), 0);
  o.max_logits.assign(size(spec.T * spec.h_q), 0.0f);
  o.lse.assign(o.max_logits.size(), 0.0f);
  IndexerProblem ip = w.indexer_problem();
  ip.indices = o.indices.data();
  EXPECT_TRUE(indexer_topk_cpu(ip).is_ok());
  SparseAttentionProblem ap = w.attention_problem(o.indices.data());
  ap.out = o.out.data();
  ap.max_logits = o.max_logits.data();
  ap.lse = o.lse.data();
  EXPECT_TRUE(sparse_attention_cpu(ap).is_ok());
  return o;
}

TEST(DsaWorkload, SpecErrorsNameWhatIsWrong) {
  EXPECT_EQ(dsa_spec_error(tiny()), "");
  const auto error_of = [](auto edit) {
    DsaSpec spec = tiny();
    edit(spec);
    return dsa_spec_error(spec);
  };
  EXPECT_NE(error_of([](DsaSpec& s) { s.T = 0; }).find("T (queries) must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.S = 7; }).find("must be in [T, 2^31 - 1]"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.S = int64_t{1} << 31; }).find("2^31 - 1"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.h_q = 48; }).find("h_q (attention heads) must be 16"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.d_qk = 128; }).find("d_qk must be 576 or 512"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.d_v = 256; }).find("d_v 512"), std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.H = 16; }).find("the indexer needs H 32 or 64"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.k = 0; }).find("k must be in [1, 8192]"),
            std::string::npos);
  EXPECT_NE(error_of([](DsaSpec& s) { s.k = 8193; }).find("k must be in [1, 8192]"),
            std::string::npos);
  EXPECT_EQ(dsa_shape_label(tiny()), "T=8 S=20 h_q=32 k=16");
}

TEST(DsaWorkload, HalvesAreTheIndexerAndSparseAttentionGenerators) {
  const DsaSpec spec = tiny();
  const DsaWorkload w = make_dsa_workload(spec);
  const IndexerWorkload indexer = make_indexer_workload(dsa_indexer_spec(spec));
  EXPECT_EQ(w.indexer.q, indexer.q);
  EXPECT_EQ(w.indexer.kv, indexer.kv);
  EXPECT_EQ(w.indexer.kv_scale, indexer.kv_scale);
  EXPECT_EQ(w.indexer.weights, indexer.weights);
  EXPECT_EQ(w.indexer.ks, indexer.ks);
  EXPECT_EQ(w.indexer.ke, indexer.ke);
  const SparseAttentionWorkload attention =
      make_sparse_attention_workload(dsa_attention_spec(spec));
  EXPECT_EQ(w.attention.q, attention.q);
  EXPECT_EQ(w.attention.kv, attention.kv);
  EXPECT_FLOAT_EQ(w.attention.sm_scale, attention.sm_scale);
  EXPECT_TRUE(w.attention.indices.empty());  // the indexer's job
  EXPECT_EQ(w.attention.q.size(), size(spec.T * spec.h_q * spec.d_qk));
  EXPECT_EQ(w.attention.kv.size(), size(spec.S * spec.d_qk));
  // Causal: query t sees [0, S - T + t].
  for (int64_t t = 0; t < spec.T; ++t) {
    EXPECT_EQ(w.indexer.ks[size(t)], 0);
    EXPECT_EQ(w.indexer.ke[size(t)], spec.S - spec.T + t + 1);
  }
  // The MLA half from seed + 1: not the same normals as the indexer's.
  EXPECT_EQ(dsa_attention_spec(spec).seed, spec.seed + 1);
  DsaSpec other = spec;
  other.seed = spec.seed + 1;
  EXPECT_NE(make_dsa_workload(other).attention.kv, w.attention.kv);
}

TEST(DsaWorkload, AttendedPairsAndFlops) {
  DsaSpec spec = tiny();  // rows see 13 .. 20 tokens, k = 16
  EXPECT_EQ(dsa_attention_pairs(spec), 13 + 14 + 15 + 16 * 5);
  spec.k = 4;
  EXPECT_EQ(dsa_attention_pairs(spec), 4 * 8);
  const DsaWorkload w = make_dsa_workload(spec);
  EXPECT_DOUBLE_EQ(w.attention_flops(), 2.0 * 32 * 32 * (576 + 512));
  EXPECT_DOUBLE_EQ(w.indexer_flops(), w.indexer.flops());
}

TEST(DsaVerify, CheckedQueriesFollowTheBudgets) {
  DsaSpec small = tiny();
  EXPECT_EQ(dsa_indexer_check_queries(small).size(), size(small.T));
  EXPECT_EQ(dsa_attention_check_queries(small).size(), size(small.T));

  DsaSpec big;
  big.T = 4096;
  big.S = 131072;
  big.h_q = 16;
  big.k = 2048;
  EXPECT_EQ(dsa_indexer_check_queries(big), indexer_verify_queries(big.T));
  const std::vector<int64_t> sample = dsa_attention_check_queries(big);
  const double per_query = 2.0 * 2048 * 16 * (576 + 512);
  EXPECT_EQ(sample.size(), size(static_cast<int64_t>(kDsaAttentionCheckFlops / per_query)));
  EXPECT_EQ(sample.front(), 0);
  EXPECT_EQ(sample.back(), big.T - 1);
  EXPECT_TRUE(std::is_sorted(sample.begin(), sample.end()));
  big.h_q = 128;  // a query costs more than the budget: still 8
  EXPECT_EQ(dsa_attention_check_queries(big).size(), size(8));
}

TEST(DsaVerify, PassesTheReferencesAndCatchesErrors) {
  const DsaWorkload w = make_dsa_workload(tiny());
  const DsaSpec& spec = w.spec;
  const Outputs o = run_references(w);
  EXPECT_EQ(o.indices[size(13)], -1);  // query 0 sees 13 tokens: padded
  const DsaChecker checker(w);
  EXPECT_EQ(checker.indexer_queries().size(), size(spec.T));
  EXPECT_EQ(checker.check_indices(o.indices.data()), "");
  EXPECT_EQ(checker.check_attention(o.indices.data(), o.out.data(), o.max_logits.data(),
                                    o.lse.data()),
            "");

  {  // a future token: query 0 sees [0, 12]
    std::vector<int32_t> indices = o.indices;
    indices[0] = 13;
    EXPECT_NE(checker.check_indices(indices.data()).find("query 0"), std::string::npos);
  }
  {  // a token listed twice
    std::vector<int32_t> indices = o.indices;
    const int64_t last = (spec.T - 1) * spec.k;
    indices[size(last + 1)] = indices[size(last)];
    EXPECT_NE(checker.check_indices(indices.data()).find("selected twice"), std::string::npos);
  }
  {  // an out value off by far more than bf16 rounding
    std::vector<uint16_t> out = o.out;
    const int64_t at = (3 * spec.h_q + 5) * spec.d_v + 100;
    const float wrong = float_bits::f32_from_bf16_bits(out[size(at)]) + 0.5f;
    out[size(at)] = float_bits::bf16_bits_from_f32(wrong);
    const std::string mismatch =
        checker.check_attention(o.indices.data(), out.data(), o.max_logits.data(), o.lse.data());
    EXPECT_NE(mismatch.find("attention query 3 head 5: out column 100"), std::string::npos)
        << mismatch;
  }
  {  // a wrong lse
    std::vector<float> lse = o.lse;
    lse[size(7 * spec.h_q)] += 0.01f;
    EXPECT_NE(checker.check_attention(o.indices.data(), o.out.data(), o.max_logits.data(),
                                      lse.data())
                  .find("attention query 7 head 0: lse"),
              std::string::npos);
  }
  {  // the reference runs over the index rows it is given
    std::vector<int32_t> indices = o.indices;
    std::swap(indices[size(2 * spec.k)], indices[size(2 * spec.k + 8)]);  // the same set
    EXPECT_EQ(checker.check_attention(indices.data(), o.out.data(), o.max_logits.data(),
                                      o.lse.data()),
              "");
    indices[size(2 * spec.k)] = -1;  // one token fewer for query 2
    EXPECT_NE(checker.check_attention(indices.data(), o.out.data(), o.max_logits.data(),
                                      o.lse.data())
                  .find("attention query 2"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace litetopk::testkit
