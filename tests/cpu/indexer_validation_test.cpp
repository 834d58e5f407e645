// Bad input to the indexer: kInvalidArgument naming the argument, and nothing written. Checked
// through validate_indexer_problem, indexer_topk_cpu and (for the score inputs) indexer_logits_cpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "api/indexer_validation.h"
#include "common/validation_testing.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {
namespace {

using testing::offset;
using testing::rejects_naming;

constexpr int64_t T = 2, H = 32, D = 128, S = 6, K = 3;
constexpr int32_t kSentinel = 0x5a5a5a5a;

// Buffers for a valid problem, over-allocated so that misaligned pointers stay in bounds.
struct Buffers {
  alignas(16) uint8_t q[T * H * D + 32] = {};
  alignas(16) uint8_t kv[S * D + 32] = {};
  alignas(16) float kv_scale[S + 4] = {1, 1, 1, 1, 1, 1};
  alignas(16) float weights[T * H + 4] = {};
  alignas(16) int32_t ks[T + 4] = {0, 1};
  alignas(16) int32_t ke[T + 4] = {6, 4};
  alignas(16) int32_t indices[T * K + 4];
  alignas(16) float values[T * K + 4];
  alignas(16) float logits[T * S + 4];

  Buffers() { reset_outputs(); }
  void reset_outputs() {
    for (auto& i : indices) i = kSentinel;
    for (auto& v : values) v = 9.0f;
    for (auto& l : logits) l = 9.0f;
  }
  bool outputs_untouched() const {
    for (auto i : indices) {
      if (i != kSentinel) return false;
    }
    for (auto v : values) {
      if (v != 9.0f) return false;
    }
    for (auto l : logits) {
      if (l != 9.0f) return false;
    }
    return true;
  }

  IndexerProblem problem() {
    IndexerProblem p;
    p.q = q;
    p.kv = kv;
    p.kv_scale = kv_scale;
    p.weights = weights;
    p.ks = ks;
    p.ke = ke;
    p.num_queries = T;
    p.num_heads = H;
    p.head_dim = D;
    p.num_keys = S;
    p.k = K;
    p.indices = indices;
    p.values = values;
    return p;
  }
};

// What indexer_logits_cpu (which has no k, indices or values) makes of the same bad input.
enum class Logits { kRejects, kAccepts, kSkip /* a shape no host buffer can back */ };

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this
  Logits logits;
  void (*break_it)(IndexerProblem&, Buffers&);
};

void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

const BadInput kBadInputs[] = {
    {"NullQ", "q must", Logits::kRejects, [](IndexerProblem& p, Buffers&) { p.q = nullptr; }},
    {"NullKv", "kv must", Logits::kRejects, [](IndexerProblem& p, Buffers&) { p.kv = nullptr; }},
    {"NullKvScale", "kv_scale must", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.kv_scale = nullptr; }},
    {"NullWeights", "weights must", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.weights = nullptr; }},
    {"NullKs", "ks must", Logits::kRejects, [](IndexerProblem& p, Buffers&) { p.ks = nullptr; }},
    {"NullKe", "ke must", Logits::kRejects, [](IndexerProblem& p, Buffers&) { p.ke = nullptr; }},
    {"NullIndices", "indices must", Logits::kAccepts,
     [](IndexerProblem& p, Buffers&) { p.indices = nullptr; }},
    {"Heads48", "num_heads must be 32 or 64, got 48", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_heads = 48; }},
    {"Heads128", "num_heads must", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_heads = 128; }},
    {"HeadDim64", "head_dim must be 128, got 64", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.head_dim = 64; }},
    {"NumQueriesNegative", "num_queries must be >= 0, got -1", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_queries = -1; }},
    {"NumKeysNegative", "num_keys must be >= 0, got -2", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_keys = -2; }},
    {"NumKeysTooLarge", "num_keys must be <= 2147483647", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_keys = int64_t{1} << 31; }},
    {"QueriesTimesHeadsOverflow", "num_queries * num_heads * head_dim overflows", Logits::kRejects,
     [](IndexerProblem& p, Buffers&) { p.num_queries = int64_t{1} << 52; }},
    {"KZero", "k must be in [1, 8192], got 0", Logits::kAccepts,
     [](IndexerProblem& p, Buffers&) { p.k = 0; }},
    {"KNegative", "k must", Logits::kAccepts, [](IndexerProblem& p, Buffers&) { p.k = -3; }},
    {"KTooLarge", "k must be in [1, 8192], got 8193", Logits::kAccepts,
     [](IndexerProblem& p, Buffers&) { p.k = 8193; }},
    {"QueriesTimesKOverflow", "num_queries * k overflows", Logits::kSkip,
     [](IndexerProblem& p, Buffers&) {
       p.num_queries = (int64_t{1} << 50) + 1;  // T * H * D fits (H = 32), T * 8192 does not
       p.k = 8192;
     }},
    {"QMisaligned", "q must be 16-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.q = b.q + 8; }},
    {"KvMisaligned", "kv must be 16-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.kv = b.kv + 1; }},
    {"KvScaleMisaligned", "kv_scale must be 4-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.kv_scale = offset<const float*>(b.kv_scale, 2); }},
    {"WeightsMisaligned", "weights must be 4-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.weights = offset<const float*>(b.weights, 1); }},
    {"KsMisaligned", "ks must be 4-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.ks = offset<const int32_t*>(b.ks, 2); }},
    {"KeMisaligned", "ke must be 4-byte aligned", Logits::kRejects,
     [](IndexerProblem& p, Buffers& b) { p.ke = offset<const int32_t*>(b.ke, 1); }},
    {"IndicesMisaligned", "indices must be 4-byte aligned", Logits::kAccepts,
     [](IndexerProblem& p, Buffers& b) { p.indices = offset<int32_t*>(b.indices, 2); }},
    {"ValuesMisaligned", "values must be 4-byte aligned", Logits::kAccepts,
     [](IndexerProblem& p, Buffers& b) { p.values = offset<float*>(b.values, 3); }},
};

// Range contents: checked by indexer_topk_cpu / indexer_logits_cpu (host pointers), not by
// validate_indexer_problem (which never reads device memory).
struct BadRange {
  const char* name;
  const char* mention;
  int32_t ks[2], ke[2];
};

void PrintTo(const BadRange& range, std::ostream* os) { *os << range.name; }

const BadRange kBadRanges[] = {
    {"KsNegative", "ks[0] must be in [0, num_keys=6], got -1", {-1, 0}, {6, 4}},
    {"KsPastS", "ks[1] must be in [0, num_keys=6], got 7", {0, 7}, {6, 6}},
    {"KePastS", "ke[0] must be in [0, num_keys=6], got 7", {0, 1}, {7, 4}},
    {"KeNegative", "ke[1] must be in [0, num_keys=6], got -4", {0, 1}, {6, -4}},
    {"KsAfterKe", "ks[1] must be <= ke[1], got 5 > 4", {0, 5}, {6, 4}},
};

class IndexerValidation : public ::testing::TestWithParam<BadInput> {};

TEST_P(IndexerValidation, RejectsWithArgumentName) {
  Buffers b;
  IndexerProblem p = b.problem();
  ASSERT_TRUE(validate_indexer_problem(p).is_ok());
  ASSERT_TRUE(indexer_topk_cpu(p).is_ok());  // the unbroken problem is fine
  ASSERT_TRUE(indexer_logits_cpu(p, b.logits, S).is_ok());
  b.reset_outputs();

  GetParam().break_it(p, b);
  const std::string mention = GetParam().mention;
  EXPECT_TRUE(rejects_naming(validate_indexer_problem(p), mention));
  EXPECT_TRUE(rejects_naming(indexer_topk_cpu(p), mention));
  if (GetParam().logits == Logits::kRejects) {
    EXPECT_TRUE(rejects_naming(indexer_logits_cpu(p, b.logits, S), mention));
  } else if (GetParam().logits == Logits::kAccepts) {
    const Status status = indexer_logits_cpu(p, b.logits, S);
    EXPECT_TRUE(status.is_ok()) << "indexer_logits_cpu needs no selection outputs: "
                                << status.to_string();
    b.reset_outputs();
  }
  EXPECT_TRUE(b.outputs_untouched()) << "output written on failure";
}

INSTANTIATE_TEST_SUITE_P(Bad, IndexerValidation, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& param_info) {
                           return std::string(param_info.param.name);
                         });

class IndexerRangeValidation : public ::testing::TestWithParam<BadRange> {};

TEST_P(IndexerRangeValidation, RejectsWithArgumentName) {
  Buffers b;
  b.ks[0] = GetParam().ks[0];
  b.ks[1] = GetParam().ks[1];
  b.ke[0] = GetParam().ke[0];
  b.ke[1] = GetParam().ke[1];
  const IndexerProblem p = b.problem();
  EXPECT_TRUE(validate_indexer_problem(p).is_ok()) << "contents of ks/ke are not looked at";
  for (const Status& status : {validate_indexer_ranges(p, b.ks, b.ke), indexer_topk_cpu(p),
                               indexer_logits_cpu(p, b.logits, S)}) {
    EXPECT_TRUE(rejects_naming(status, GetParam().mention));
  }
  EXPECT_TRUE(b.outputs_untouched()) << "output written on failure";
}

INSTANTIATE_TEST_SUITE_P(Bad, IndexerRangeValidation, ::testing::ValuesIn(kBadRanges),
                         [](const ::testing::TestParamInfo<BadRange>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(IndexerValidationEdges, ZeroQueriesNeedNoPointers) {
  IndexerProblem p;
  p.num_heads = 64;
  p.head_dim = 128;
  p.num_keys = 100;
  p.k = 2048;
  EXPECT_TRUE(validate_indexer_problem(p).is_ok());
  EXPECT_TRUE(indexer_topk_cpu(p).is_ok());
  EXPECT_TRUE(indexer_logits_cpu(p, nullptr, 100).is_ok());
  p.k = 0;  // k is still checked
  EXPECT_EQ(validate_indexer_problem(p).code(), StatusCode::kInvalidArgument);
}

TEST(IndexerValidationEdges, ZeroKeysNeedNoKvAndGiveAllPadding) {
  Buffers b;
  IndexerProblem p = b.problem();
  p.num_keys = 0;
  p.kv = nullptr;
  p.kv_scale = nullptr;
  const int32_t zeros[2] = {0, 0};
  p.ks = zeros;
  p.ke = zeros;
  ASSERT_TRUE(indexer_topk_cpu(p).is_ok());
  for (int64_t i = 0; i < T * K; ++i) EXPECT_EQ(b.indices[i], -1);
  EXPECT_TRUE(indexer_logits_cpu(p, nullptr, 0).is_ok());
}

TEST(IndexerValidationEdges, ValuesAreOptionalAndKRangeIsInclusive) {
  Buffers b;
  IndexerProblem p = b.problem();
  p.values = nullptr;
  EXPECT_TRUE(validate_indexer_problem(p).is_ok());
  p.k = 1;
  EXPECT_TRUE(validate_indexer_problem(p).is_ok());
  p.k = 8192;
  EXPECT_TRUE(validate_indexer_problem(p).is_ok());
}

TEST(IndexerValidationEdges, LogitsOutputChecks) {
  Buffers b;
  const IndexerProblem p = b.problem();
  Status status = indexer_logits_cpu(p, b.logits, S - 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logits_stride must be >= num_keys (6), got 5"),
            std::string::npos)
      << status.message();
  status = indexer_logits_cpu(p, nullptr, S);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logits must not be null"), std::string::npos)
      << status.message();
  status = indexer_logits_cpu(p, offset<float*>(b.logits, 1), S);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logits must be 4-byte aligned"), std::string::npos)
      << status.message();
  status = validate_indexer_logits_output(p, b.logits, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("overflows"), std::string::npos) << status.message();
  // Fits in elements but not in bytes: the rows after the first would wrap round.
  status = indexer_logits_cpu(p, b.logits, int64_t{1} << 61);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("the logits' extent in bytes overflows int64"),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(b.outputs_untouched());
}

}  // namespace
}  // namespace litetopk

namespace litetopk {
namespace {

// Options are checked before any device work, so these hold with or without a GPU.
TEST(IndexerOptionsValidation, NegativeCandidateCapacity) {
  Buffers b;
  const IndexerProblem p = b.problem();
  IndexerOptions options;
  std::size_t bytes = 0;
  options.candidate_capacity = -1;
  Status status = indexer_topk_workspace_size(p, &bytes, options);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("candidate_capacity"), std::string::npos);
}

// A requested list capacity is kept within [2k, S rounded up to 64]: a huge one used to reach
// the kernel's int32 slot counts and a workspace of lists x capacity slots.
TEST(IndexerOptionsValidation, CandidateCapacityWithinTwoKAndTheKeys) {
  IndexerProblem p;
  p.num_queries = 8;
  p.num_keys = 100000;
  p.k = 512;
  constexpr int64_t kLists = 1056;
  constexpr int64_t kSlack = 256;
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_EQ(heuristics::fused_list_capacity(p, huge, 0, 64, kLists, kSlack), 100032);
  EXPECT_EQ(heuristics::fused_list_capacity(p, 5000, 0, 64, kLists, kSlack), 5000);
  EXPECT_EQ(heuristics::fused_list_capacity(p, 1, 0, 64, kLists, kSlack), 1024);
  EXPECT_EQ(heuristics::gated_list_capacity(p, huge, 0, 64), 100032);
  p.num_keys = 700;  // shorter than 2k: 2k still (a list must free k slots when reduced)
  EXPECT_EQ(heuristics::fused_list_capacity(p, huge, 0, 64, kLists, kSlack), 1024);
}

TEST(IndexerOptionsValidation, UnknownAlgoNamesTheOption) {
  Buffers b;
  const IndexerProblem p = b.problem();
  IndexerOptions options;
  options.algo = static_cast<IndexerAlgo>(9);
  std::size_t bytes = 0;
  const Status status = indexer_topk_workspace_size(p, &bytes, options);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("options.algo"), std::string::npos);
}

// auto's cost model (indexer_topk_dispatch): the gated fused path from S = max(16 k, 32768)
// keys (measured faster than unfused from 32K at k = 2048 and at 256K for k = 8192,
// docs/BENCHMARKS.md), unfused below.
TEST(IndexerDispatch, FusedFromSixteenKeysPerKAndThirtyTwoK) {
  IndexerProblem p;
  p.num_queries = 8192;
  p.num_heads = 64;
  p.head_dim = 128;
  p.k = 2048;
  for (int64_t keys : {int64_t{16384}, int64_t{32767}}) {
    p.num_keys = keys;
    EXPECT_EQ(indexer_topk_dispatch(p), IndexerAlgo::kUnfused) << "S = " << keys;
  }
  for (int64_t keys : {int64_t{32768}, int64_t{262144}, int64_t{1048576}}) {
    p.num_keys = keys;
    EXPECT_EQ(indexer_topk_dispatch(p), IndexerAlgo::kFused) << "S = " << keys;
  }
  p.k = 8192;
  p.num_keys = 131071;
  EXPECT_EQ(indexer_topk_dispatch(p), IndexerAlgo::kUnfused) << "k = 8192, S = " << p.num_keys;
  p.num_keys = 262144;
  EXPECT_EQ(indexer_topk_dispatch(p), IndexerAlgo::kFused) << "k = 8192, S = " << p.num_keys;
  p.k = 64;
  p.num_keys = 16384;
  EXPECT_EQ(indexer_topk_dispatch(p), IndexerAlgo::kUnfused) << "k = 64, S = " << p.num_keys;
}

}  // namespace
}  // namespace litetopk
