// Bad input to the paged decode indexer: kInvalidArgument naming the argument, and nothing
// written. Checked through validate_paged_indexer_problem and indexer_topk_paged_cpu. Contents of
// context_lens and block_table are not validated (the caller's contract): see
// indexer_paged_test.cpp for what out-of-range contents do.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "common/validation_testing.h"
#include "litetopk/indexer.h"

namespace litetopk {
namespace {

using testing::offset;
using testing::rejects_naming;

constexpr int64_t B = 2, N = 2, H = 32, D = 128, BS = 64, BLOCKS = 3, MAX_BLOCKS = 2, K = 3;
constexpr int32_t kSentinel = 0x5a5a5a5a;

// Buffers for a valid problem, over-allocated so that misaligned pointers stay in bounds.
struct Buffers {
  alignas(16) uint8_t q[B * N * H * D + 32] = {};
  alignas(16) uint8_t kv_cache[BLOCKS * BS * (D + 4) + 32] = {};
  alignas(16) float weights[B * N * H + 4] = {};
  alignas(16) int32_t context_lens[B + 4] = {100, 3};
  alignas(16) int32_t block_table[B * MAX_BLOCKS + 4] = {2, 0, 1, -1};
  alignas(16) int32_t indices[B * N * K + 4];
  alignas(16) float values[B * N * K + 4];

  Buffers() {
    for (auto& i : indices) i = kSentinel;
    for (auto& v : values) v = 9.0f;
  }
  bool outputs_untouched() const {
    for (auto i : indices) {
      if (i != kSentinel) return false;
    }
    for (auto v : values) {
      if (v != 9.0f) return false;
    }
    return true;
  }

  PagedIndexerProblem problem() {
    PagedIndexerProblem p;
    p.q = q;
    p.kv_cache = kv_cache;
    p.weights = weights;
    p.context_lens = context_lens;
    p.block_table = block_table;
    p.batch = B;
    p.next_n = N;
    p.num_heads = H;
    p.head_dim = D;
    p.num_blocks = BLOCKS;
    p.block_size = BS;
    p.max_blocks = MAX_BLOCKS;
    p.max_context = 128;
    p.k = K;
    p.indices = indices;
    p.values = values;
    return p;
  }
};

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this
  void (*break_it)(PagedIndexerProblem&, Buffers&);
};

void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

const BadInput kBadInputs[] = {
    {"NullQ", "q must not be null", [](PagedIndexerProblem& p, Buffers&) { p.q = nullptr; }},
    {"NullKvCache", "kv_cache must not be null",
     [](PagedIndexerProblem& p, Buffers&) { p.kv_cache = nullptr; }},
    {"NullWeights", "weights must not be null",
     [](PagedIndexerProblem& p, Buffers&) { p.weights = nullptr; }},
    {"NullContextLens", "context_lens must not be null",
     [](PagedIndexerProblem& p, Buffers&) { p.context_lens = nullptr; }},
    {"NullBlockTable", "block_table must not be null",
     [](PagedIndexerProblem& p, Buffers&) { p.block_table = nullptr; }},
    {"NullIndices", "indices must not be null",
     [](PagedIndexerProblem& p, Buffers&) { p.indices = nullptr; }},
    {"BatchNegative", "batch must be >= 0, got -1",
     [](PagedIndexerProblem& p, Buffers&) { p.batch = -1; }},
    {"NextNZero", "next_n must be in [1, 4], got 0",
     [](PagedIndexerProblem& p, Buffers&) { p.next_n = 0; }},
    {"NextNFive", "next_n must be in [1, 4], got 5",
     [](PagedIndexerProblem& p, Buffers&) { p.next_n = 5; }},
    {"Heads48", "num_heads must be 32 or 64, got 48",
     [](PagedIndexerProblem& p, Buffers&) { p.num_heads = 48; }},
    {"HeadDim64", "head_dim must be 128, got 64",
     [](PagedIndexerProblem& p, Buffers&) { p.head_dim = 64; }},
    {"BlockSize32", "block_size must be 64, got 32",
     [](PagedIndexerProblem& p, Buffers&) { p.block_size = 32; }},
    {"BlockSizeZero", "block_size must be 64, got 0",
     [](PagedIndexerProblem& p, Buffers&) { p.block_size = 0; }},
    {"NumBlocksNegative", "num_blocks must be >= 0, got -3",
     [](PagedIndexerProblem& p, Buffers&) { p.num_blocks = -3; }},
    {"NumBlocksTooLarge", "num_blocks must be <= 2147483647 (int32 block table), got 2147483648",
     [](PagedIndexerProblem& p, Buffers&) { p.num_blocks = int64_t{1} << 31; }},
    {"MaxBlocksNegative", "max_blocks must be >= 0, got -1",
     [](PagedIndexerProblem& p, Buffers&) { p.max_blocks = -1; }},
    {"MaxBlocksTooLarge", "max_blocks must be <= 2147483647, got 2147483648",
     [](PagedIndexerProblem& p, Buffers&) { p.max_blocks = int64_t{1} << 31; }},
    {"MaxContextNegative", "max_context must be >= 0, got -1",
     [](PagedIndexerProblem& p, Buffers&) { p.max_context = -1; }},
    {"MaxContextPastTable",
     "max_context must be <= max_blocks * block_size (2 * 64 = 128), got 129",
     [](PagedIndexerProblem& p, Buffers&) { p.max_context = 129; }},
    {"MaxContextPastInt32", "max_context must be <= 2147483647 (int32 context_lens)",
     [](PagedIndexerProblem& p, Buffers&) {
       p.max_blocks = int64_t{1} << 30;
       p.max_context = int64_t{1} << 31;
     }},
    {"KZero", "k must be in [1, 8192], got 0", [](PagedIndexerProblem& p, Buffers&) { p.k = 0; }},
    {"KTooLarge", "k must be in [1, 8192], got 8193",
     [](PagedIndexerProblem& p, Buffers&) { p.k = 8193; }},
    {"QueryBytesOverflow", "batch * next_n * num_heads * head_dim overflows int64",
     [](PagedIndexerProblem& p, Buffers&) { p.batch = int64_t{1} << 50; }},
    {"BlockTableOverflow", "batch * max_blocks overflows int64",
     [](PagedIndexerProblem& p, Buffers&) {
       p.batch = int64_t{1} << 40;  // B * N * H * D = 2^53 fits; B * 2^30 does not
       p.max_blocks = int64_t{1} << 30;
     }},
    {"RowsTimesKOverflow", "batch * next_n * k overflows int64",
     [](PagedIndexerProblem& p, Buffers&) {
       p.batch = int64_t{1} << 50;  // B * N * H * D = 2^62 fits; B * N * 8192 does not
       p.next_n = 1;
       p.max_blocks = 1;
       p.max_context = 0;
       p.k = 8192;
     }},
    {"QMisaligned", "q must be 16-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) { p.q = b.q + 8; }},
    {"KvCacheMisaligned", "kv_cache must be 16-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) { p.kv_cache = b.kv_cache + 4; }},
    {"WeightsMisaligned", "weights must be 4-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) { p.weights = offset<const float*>(b.weights, 1); }},
    {"ContextLensMisaligned", "context_lens must be 4-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) {
       p.context_lens = offset<const int32_t*>(b.context_lens, 2);
     }},
    {"BlockTableMisaligned", "block_table must be 4-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) {
       p.block_table = offset<const int32_t*>(b.block_table, 3);
     }},
    {"IndicesMisaligned", "indices must be 4-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) { p.indices = offset<int32_t*>(b.indices, 2); }},
    {"ValuesMisaligned", "values must be 4-byte aligned",
     [](PagedIndexerProblem& p, Buffers& b) { p.values = offset<float*>(b.values, 1); }},
};

class PagedIndexerValidation : public ::testing::TestWithParam<BadInput> {};

TEST_P(PagedIndexerValidation, RejectsWithArgumentName) {
  Buffers b;
  PagedIndexerProblem p = b.problem();
  ASSERT_TRUE(validate_paged_indexer_problem(p).is_ok());
  ASSERT_TRUE(indexer_topk_paged_cpu(p).is_ok());  // the unbroken problem is fine
  b = Buffers();
  p = b.problem();

  GetParam().break_it(p, b);
  EXPECT_TRUE(rejects_naming(validate_paged_indexer_problem(p), GetParam().mention));
  EXPECT_TRUE(rejects_naming(indexer_topk_paged_cpu(p), GetParam().mention));
  EXPECT_TRUE(b.outputs_untouched()) << "output written on failure";
}

INSTANTIATE_TEST_SUITE_P(Bad, PagedIndexerValidation, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(PagedIndexerValidationEdges, ZeroBatchNeedsNoPointersButChecksK) {
  PagedIndexerProblem p;
  p.next_n = 1;
  p.num_heads = 64;
  p.head_dim = 128;
  p.block_size = 64;
  p.max_blocks = 4;
  p.max_context = 256;
  p.k = 2048;
  EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok());
  EXPECT_TRUE(indexer_topk_paged_cpu(p).is_ok());
  p.k = 0;
  EXPECT_EQ(validate_paged_indexer_problem(p).code(), StatusCode::kInvalidArgument);
}

// With no visible token (max_context 0) the table and the cache are not needed; with an empty
// cache (num_blocks 0) every table entry is outside it. Either way every row is -1 padding.
TEST(PagedIndexerValidationEdges, NothingReadableNeedsNoCacheAndGivesAllPadding) {
  for (bool no_context : {true, false}) {
    SCOPED_TRACE(no_context ? "max_context 0" : "num_blocks 0");
    Buffers b;
    PagedIndexerProblem p = b.problem();
    if (no_context) {
      p.max_context = 0;
      p.block_table = nullptr;
    } else {
      p.num_blocks = 0;
    }
    p.kv_cache = nullptr;
    ASSERT_TRUE(indexer_topk_paged_cpu(p).is_ok());
    for (int64_t i = 0; i < B * N * K; ++i) EXPECT_EQ(b.indices[i], -1);
  }
}

TEST(PagedIndexerValidationEdges, ValuesAreOptionalAndRangesAreInclusive) {
  Buffers b;
  PagedIndexerProblem p = b.problem();
  p.values = nullptr;
  EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok());
  for (int64_t next_n : {int64_t{1}, int64_t{4}}) {
    p.next_n = next_n;
    EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok()) << next_n;
  }
  p.num_heads = 64;
  p.k = 8192;
  p.max_context = MAX_BLOCKS * BS;
  EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok());
  p.max_blocks = 0;
  p.max_context = 0;
  EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok());
}

TEST(PagedIndexerValidationEdges, TableAndLengthContentsAreNotValidated) {
  Buffers b;
  b.context_lens[0] = -7;
  b.context_lens[1] = 1 << 30;  // far past max_context
  b.block_table[0] = -100;
  b.block_table[1] = 1 << 30;
  const PagedIndexerProblem p = b.problem();
  EXPECT_TRUE(validate_paged_indexer_problem(p).is_ok());
  EXPECT_TRUE(indexer_topk_paged_cpu(p).is_ok());
}

// auto's rule (indexer_topk_paged_dispatch), a host-only decision, the same without a GPU: the
// fused kernel without a decode state at next_n 1 for one request of up to 256K tokens or up to
// 16 requests of up to 2M tokens in all, unfused otherwise and with a state (docs/BENCHMARKS.md, the measured
// winners on the H200).
TEST(PagedIndexerDispatch, FusedForOneRequestOrUpTo16WithoutState) {
  Buffers b;
  PagedIndexerProblem p = b.problem();
  p.next_n = 1;
  p.batch = 1;
  p.max_context = 262144;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kFused);
  p.max_context = 262145;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  p.batch = 4;
  p.max_context = 32768;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kFused);
  p.batch = 16;
  p.max_context = 131072;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kFused);
  p.max_context = 131073;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  p.batch = 17;
  p.max_context = 32768;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  p.batch = 128;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  // next_n > 1 and a decode state take unfused.
  p.batch = 1;
  p.max_context = 32768;
  p.next_n = 2;
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  p.next_n = 1;
  int32_t state_words[4] = {};
  IndexerState state{state_words, sizeof(state_words)};
  IndexerOptions with_state;
  with_state.state = &state;
  EXPECT_EQ(indexer_topk_paged_dispatch(p, with_state), IndexerAlgo::kUnfused);
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kFused);
}

// The decode state: k positions per row, checked before anything runs.
TEST(PagedIndexerDecodeStateValidation, BytesAndBadStates) {
  EXPECT_EQ(paged_indexer_state_bytes(8, 2, 2048), std::size_t{8 * 2 * 2048 * 4});
  EXPECT_EQ(paged_indexer_state_bytes(0, 2, 2048), 0u);
  EXPECT_EQ(paged_indexer_state_bytes(3, 1, 0), 0u);
  // Bytes past int64: SIZE_MAX (2^64 wrapped to 0 before), which no state's bytes reach.
  EXPECT_EQ(paged_indexer_state_bytes(int64_t{1} << 47, 4, 8192),
            std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(paged_indexer_state_bytes(int64_t{1} << 46, 4, 8192),
            std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(paged_indexer_state_bytes(int64_t{1} << 45, 4, 8192), std::size_t{1} << 62);

  Buffers b;
  const PagedIndexerProblem p = b.problem();
  std::vector<int32_t> memory(static_cast<std::size_t>(p.batch * p.next_n * p.k) + 1);
  PagedIndexerPlan plan;
  IndexerState small{memory.data(), paged_indexer_state_bytes(p.batch, p.next_n, p.k) - 1};
  IndexerOptions options;
  options.state = &small;
  Status s = indexer_topk_paged_plan(p, options, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("paged_indexer_state_bytes"), std::string::npos) << s.message();
  IndexerState unaligned{reinterpret_cast<unsigned char*>(memory.data()) + 1,
                         paged_indexer_state_bytes(p.batch, p.next_n, p.k)};
  options.state = &unaligned;
  s = indexer_topk_paged_plan(p, options, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4-byte aligned"), std::string::npos) << s.message();
  IndexerState null_data{nullptr, 64};
  options.state = &null_data;
  s = indexer_topk_paged_plan(p, options, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.state->data"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace litetopk
