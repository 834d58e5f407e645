// Bad input to sparse attention: kInvalidArgument naming the argument, and nothing written.
// Checked through validate_sparse_attention_problem and sparse_attention_cpu. The contents of
// indices are not validated (any value outside [0, s_kv) is a skipped slot): see
// sparse_attention_reference_test.cpp for what they do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "common/validation_testing.h"
#include "litetopk/attention.h"

namespace litetopk {
namespace {

using testing::offset;
using testing::rejects_naming;

constexpr int64_t S_Q = 2, S_KV = 4, H = 16, D_QK = 576, D_V = 512, TOPK = 3;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr uint16_t kSentinelBits = 0x5a5a;
constexpr float kSentinel = 9.0f;

// Buffers for a valid problem, over-allocated so that misaligned pointers stay in bounds.
struct Buffers {
  alignas(16) uint16_t q[S_Q * H * D_QK + 16] = {};
  alignas(16) uint16_t kv[S_KV * D_QK + 16] = {};
  alignas(16) int32_t indices[S_Q * TOPK + 4] = {0, 3, -1, 2, 7, 2};
  alignas(16) uint16_t out[S_Q * H * D_V + 16];
  alignas(16) float max_logits[S_Q * H + 4];
  alignas(16) float lse[S_Q * H + 4];

  Buffers() {
    for (auto& o : out) o = kSentinelBits;
    for (auto& v : max_logits) v = kSentinel;
    for (auto& v : lse) v = kSentinel;
  }
  bool outputs_untouched() const {
    for (auto o : out) {
      if (o != kSentinelBits) return false;
    }
    for (std::size_t i = 0; i < S_Q * H + 4; ++i) {
      if (max_logits[i] != kSentinel || lse[i] != kSentinel) return false;
    }
    return true;
  }

  SparseAttentionProblem problem() {
    SparseAttentionProblem p;
    p.q = q;
    p.kv = kv;
    p.indices = indices;
    p.s_q = S_Q;
    p.s_kv = S_KV;
    p.h_q = H;
    p.d_qk = D_QK;
    p.d_v = D_V;
    p.topk = TOPK;
    p.sm_scale = 0.04f;
    p.out = out;
    p.max_logits = max_logits;
    p.lse = lse;
    return p;
  }
};

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this
  void (*break_it)(SparseAttentionProblem&, Buffers&);
};

void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

using P = SparseAttentionProblem;

const BadInput kBadInputs[] = {
    {"NullQ", "q must not be null", [](P& p, Buffers&) { p.q = nullptr; }},
    {"NullKv", "kv must not be null", [](P& p, Buffers&) { p.kv = nullptr; }},
    {"NullIndices", "indices must not be null", [](P& p, Buffers&) { p.indices = nullptr; }},
    {"NullOut", "out must not be null", [](P& p, Buffers&) { p.out = nullptr; }},
    {"SqNegative", "s_q must be in [0, 2147483647], got -1", [](P& p, Buffers&) { p.s_q = -1; }},
    {"SqTooLarge", "s_q must be in [0, 2147483647], got 2147483648",
     [](P& p, Buffers&) { p.s_q = kMaxInt32 + 1; }},
    {"SkvNegative", "s_kv must be in [0, 2147483647] (int32 indices), got -4",
     [](P& p, Buffers&) { p.s_kv = -4; }},
    {"SkvTooLarge", "s_kv must be in [0, 2147483647] (int32 indices), got 2147483648",
     [](P& p, Buffers&) { p.s_kv = kMaxInt32 + 1; }},
    {"Hq48", "h_q must be 16, 32, 64 or 128, got 48", [](P& p, Buffers&) { p.h_q = 48; }},
    {"Hq8", "h_q must be 16, 32, 64 or 128, got 8", [](P& p, Buffers&) { p.h_q = 8; }},
    {"Hq256", "h_q must be 16, 32, 64 or 128, got 256", [](P& p, Buffers&) { p.h_q = 256; }},
    {"HqZero", "h_q must be 16, 32, 64 or 128, got 0", [](P& p, Buffers&) { p.h_q = 0; }},
    {"Dqk128", "d_qk must be 576 or 512, got 128", [](P& p, Buffers&) { p.d_qk = 128; }},
    {"Dqk640", "d_qk must be 576 or 512, got 640", [](P& p, Buffers&) { p.d_qk = 640; }},
    {"Dv256", "d_v must be 512, got 256", [](P& p, Buffers&) { p.d_v = 256; }},
    {"DvZero", "d_v must be 512, got 0", [](P& p, Buffers&) { p.d_v = 0; }},
    {"TopkZero", "topk must be in [1, 2147483647], got 0", [](P& p, Buffers&) { p.topk = 0; }},
    {"TopkNegative", "topk must be in [1, 2147483647], got -3",
     [](P& p, Buffers&) { p.topk = -3; }},
    {"TopkTooLarge", "topk must be in [1, 2147483647], got 2147483648",
     [](P& p, Buffers&) { p.topk = kMaxInt32 + 1; }},
    {"SmScaleNaN", "sm_scale must be finite, got nan",
     [](P& p, Buffers&) { p.sm_scale = std::numeric_limits<float>::quiet_NaN(); }},
    {"SmScaleInf", "sm_scale must be finite, got inf",
     [](P& p, Buffers&) { p.sm_scale = std::numeric_limits<float>::infinity(); }},
    {"IndicesBytesOverflow", "s_q * topk * 4 (the bytes of indices) overflows int64",
     [](P& p, Buffers&) {
       p.s_q = kMaxInt32;  // 2^31 - 1 squared times 4 is about 2^64
       p.topk = kMaxInt32;
     }},
    {"QMisaligned", "q must be 16-byte aligned (TMA)",
     [](P& p, Buffers& b) { p.q = b.q + 4; }},  // 8 bytes
    {"KvMisaligned", "kv must be 16-byte aligned (TMA)", [](P& p, Buffers& b) { p.kv = b.kv + 1; }},
    {"OutMisaligned", "out must be 16-byte aligned (TMA)",
     [](P& p, Buffers& b) { p.out = b.out + 2; }},
    {"IndicesMisaligned", "indices must be 4-byte aligned",
     [](P& p, Buffers& b) { p.indices = offset<const int32_t*>(b.indices, 2); }},
    {"MaxLogitsMisaligned", "max_logits must be 4-byte aligned",
     [](P& p, Buffers& b) { p.max_logits = offset<float*>(b.max_logits, 1); }},
    {"LseMisaligned", "lse must be 4-byte aligned",
     [](P& p, Buffers& b) { p.lse = offset<float*>(b.lse, 3); }},
    {"AlgoOutsideTheEnum", "algo must be a SparseAttentionAlgo, got 9",
     [](P& p, Buffers&) { p.algo = static_cast<SparseAttentionAlgo>(9); }},
    {"UnionPackedAt64Heads", "algo union-packed needs h_q 16 or 32", [](P& p, Buffers&) {
       p.algo = SparseAttentionAlgo::kUnionPacked;
       p.h_q = 64;
     }},
    {"UnionPackedTopkOverOneSort", "(64 / h_q) * topk <= 8192", [](P& p, Buffers&) {
       p.algo = SparseAttentionAlgo::kUnionPacked;
       p.topk = 2049;  // 4 queries x 2049 slots
     }},
    {"UnionPackedTokensOverTheWord", "s_kv <= 2^27", [](P& p, Buffers&) {
       p.algo = SparseAttentionAlgo::kUnionPacked;
       p.s_kv = (int64_t{1} << 27) + 1;
     }},
};

class SparseAttentionValidation : public ::testing::TestWithParam<BadInput> {};

TEST_P(SparseAttentionValidation, RejectsWithArgumentName) {
  Buffers b;
  SparseAttentionProblem p = b.problem();
  ASSERT_TRUE(validate_sparse_attention_problem(p).is_ok());
  ASSERT_TRUE(sparse_attention_cpu(p).is_ok());  // the unbroken problem is fine
  b = Buffers();
  p = b.problem();

  GetParam().break_it(p, b);
  EXPECT_TRUE(rejects_naming(validate_sparse_attention_problem(p), GetParam().mention));
  EXPECT_TRUE(rejects_naming(sparse_attention_cpu(p), GetParam().mention));
  EXPECT_TRUE(b.outputs_untouched()) << "output written on failure";
}

INSTANTIATE_TEST_SUITE_P(Bad, SparseAttentionValidation, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(SparseAttentionValidationEdges, NoQueriesNeedNoPointersButShapesAreChecked) {
  SparseAttentionProblem p;
  p.h_q = 128;
  p.d_qk = 576;
  p.s_kv = 131072;
  p.topk = 2048;
  EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok());
  EXPECT_TRUE(sparse_attention_cpu(p).is_ok());
  p.topk = 0;
  EXPECT_TRUE(rejects_naming(validate_sparse_attention_problem(p), "topk"));
  p.topk = 2048;
  p.d_v = 576;
  EXPECT_TRUE(rejects_naming(validate_sparse_attention_problem(p), "d_v"));
}

TEST(SparseAttentionValidationEdges, EveryShapeOfTheContractIsAccepted) {
  Buffers b;
  SparseAttentionProblem p = b.problem();
  for (int64_t h_q : {16, 32, 64, 128}) {
    for (int64_t d_qk : {512, 576}) {
      p.h_q = h_q;
      p.d_qk = d_qk;
      EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok()) << h_q << " " << d_qk;
    }
  }
  for (float scale : {0.0f, -1.5f, 1e30f, std::numeric_limits<float>::denorm_min()}) {
    p.sm_scale = scale;
    EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok()) << scale;
  }
  p.s_q = kMaxInt32;
  p.s_kv = kMaxInt32;
  p.topk = 1 << 30;  // (2^31 - 1) * 2^30 * 4 < 2^63: fits
  EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok());
}

TEST(SparseAttentionValidationEdges, StatsAreOptionalAndEmptyKvNeedsNoPointer) {
  Buffers b;
  SparseAttentionProblem p = b.problem();
  p.max_logits = nullptr;
  p.lse = nullptr;
  EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok());
  EXPECT_TRUE(sparse_attention_cpu(p).is_ok());
  p.s_kv = 0;
  p.kv = nullptr;  // every slot is skipped: kv is never read
  EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok());
  EXPECT_TRUE(sparse_attention_cpu(p).is_ok());
  for (int64_t i = 0; i < S_Q * H * D_V; ++i) ASSERT_EQ(b.out[i], 0);
}

TEST(SparseAttentionValidationEdges, IndexContentsAreNotValidated) {
  Buffers b;
  const int32_t garbage[] = {
      -1000, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 4, 5, -2};
  for (int i = 0; i < 6; ++i) b.indices[i] = garbage[i];
  const SparseAttentionProblem p = b.problem();
  EXPECT_TRUE(validate_sparse_attention_problem(p).is_ok());
  EXPECT_TRUE(sparse_attention_cpu(p).is_ok());
  for (int64_t i = 0; i < S_Q * H; ++i) {
    EXPECT_EQ(b.lse[i], -std::numeric_limits<float>::infinity());  // nothing valid: s_kv = 4
  }
}

TEST(SparseAttentionValidationEdges, AlgorithmNamesRoundTrip) {
  for (SparseAttentionAlgo algo : {SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kPerQuery,
                                   SparseAttentionAlgo::kUnionPacked, SparseAttentionAlgo::kPlain}) {
    SparseAttentionAlgo parsed = SparseAttentionAlgo::kPlain;
    EXPECT_TRUE(parse_sparse_attention_algo(sparse_attention_algo_name(algo), &parsed));
    EXPECT_EQ(parsed, algo);
  }
  SparseAttentionAlgo unchanged = SparseAttentionAlgo::kPerQuery;
  EXPECT_FALSE(parse_sparse_attention_algo("packed", &unchanged));
  EXPECT_FALSE(parse_sparse_attention_algo(nullptr, &unchanged));
  EXPECT_EQ(unchanged, SparseAttentionAlgo::kPerQuery);
  EXPECT_STREQ(sparse_attention_algo_name(static_cast<SparseAttentionAlgo>(-1)), "invalid");
}

// The workspace holds the unions: [groups][G * topk] int32 slot words and [groups] int32 sizes,
// each part rounded up to 256 bytes; nothing for the other algorithms.
TEST(SparseAttentionValidationEdges, WorkspaceIsTheUnionsWhenPacked) {
  Buffers b;
  SparseAttentionProblem p = b.problem();  // h_q 16: G = 4, one group of the two queries
  std::size_t bytes = 1;
  for (SparseAttentionAlgo algo : {SparseAttentionAlgo::kPerQuery, SparseAttentionAlgo::kPlain}) {
    p.algo = algo;
    ASSERT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
    EXPECT_EQ(bytes, 0u);
  }
  for (SparseAttentionAlgo algo : {SparseAttentionAlgo::kUnionPacked, SparseAttentionAlgo::kAuto}) {
    p.algo = algo;
    ASSERT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
    EXPECT_EQ(bytes, 256u + 256u);  // 4 x 3 words, 1 size
  }
  p.s_q = 4096;
  p.topk = 2048;
  ASSERT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
  EXPECT_EQ(bytes, std::size_t{4096} * 2048 * 4 + 4096);  // 1024 sizes: 4096 bytes
  p.h_q = 32;  // G = 2
  p.s_q = 5;
  ASSERT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
  EXPECT_EQ(bytes, std::size_t{6} * 2048 * 4 + 256);
  p.h_q = 64;  // auto runs per query
  p.algo = SparseAttentionAlgo::kAuto;
  ASSERT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
  EXPECT_EQ(bytes, 0u);
}

}  // namespace
}  // namespace litetopk
