// Bad input to sparse_decode: kInvalidArgument naming the argument and the values, and nothing
// written. Checked through validate_sparse_decode_problem / validate_dense_decode_problem and the
// CPU entry points (sparse_decode_cpu, dense_decode_cpu, sparse_decode_quantize_cpu,
// sparse_kv_append_cpu, sparse_kv_rebuild_cpu, decode_fidelity_cpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using testing::DecodeWorkload;
using testing::DecodeWorkloadSpec;
using testing::HostSparseCache;

constexpr int64_t kD = 128;
constexpr float kSentinel = 12345.0f;

// A valid problem: 2 sequences (130 and 5 tokens), 2 KV heads x 2 query heads, BS 128,
// max_blocks 2 (capacity 256), contiguous or paged.
struct Valid {
  DecodeWorkload w;
  HostSparseCache cache;
  std::vector<float> out, lse;
  std::vector<uint8_t> mask;

  explicit Valid(bool paged)
      : w(make_workload()), cache(w.dtype, w.batch, w.num_kv_heads, 128, 2, paged, 11) {
    const Status status = sparse_decode_quantize_cpu(w.dense(), cache.view());
    EXPECT_TRUE(status.is_ok()) << status.to_string();
    out.assign(static_cast<std::size_t>(w.batch * w.num_q_heads * kD + 8), kSentinel);
    lse.assign(static_cast<std::size_t>(w.batch * w.num_q_heads + 8), kSentinel);
    mask.assign(static_cast<std::size_t>(w.batch * w.num_kv_heads * 2), 9);
  }

  static DecodeWorkload make_workload() {
    DecodeWorkloadSpec spec;
    spec.num_kv_heads = 2;
    spec.group_size = 2;
    spec.lengths = {130, 5};
    return testing::make_decode_workload(spec);
  }

  SparseDecodeProblem problem() {
    SparseDecodeProblem p;
    p.cache = cache.view();
    p.q = w.q.data();
    p.num_q_heads = w.num_q_heads;
    p.delta = 5.0f;
    p.out = out.data();
    p.out_dtype = DType::kFloat32;
    p.lse = lse.data();
    p.kept_mask = mask.data();
    return p;
  }

  bool outputs_untouched() const {
    for (float x : out) {
      if (x != kSentinel) return false;
    }
    for (float x : lse) {
      if (x != kSentinel) return false;
    }
    for (uint8_t m : mask) {
      if (m != 9) return false;
    }
    return true;
  }
};

template <typename T>
T* shifted(T* pointer, std::ptrdiff_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(pointer) + static_cast<uintptr_t>(bytes));
}

struct BadSparse {
  const char* name;
  void (*mutate)(SparseDecodeProblem&);
  const char* message;
};

const BadSparse kBadSparse[] = {
    {"DtypeFloat32", [](SparseDecodeProblem& p) { p.cache.dtype = DType::kFloat32; },
     "cache.dtype must be float16 or bfloat16, got float32"},
    {"NegativeBatch", [](SparseDecodeProblem& p) { p.cache.batch = -1; },
     "cache.batch must be >= 0, got -1"},
    {"ZeroKvHeads", [](SparseDecodeProblem& p) { p.cache.num_kv_heads = 0; },
     "cache.num_kv_heads must be >= 1, got 0"},
    {"HeadDim64", [](SparseDecodeProblem& p) { p.cache.head_dim = 64; },
     "cache.head_dim must be 128, got 64"},
    {"BlockSize64", [](SparseDecodeProblem& p) { p.cache.block_size = 64; },
     "cache.block_size must be 128 or 256, got 64"},
    {"BlockSize512", [](SparseDecodeProblem& p) { p.cache.block_size = 512; },
     "cache.block_size must be 128 or 256, got 512"},
    {"ZeroMaxBlocks", [](SparseDecodeProblem& p) { p.cache.max_blocks = 0; },
     "cache.max_blocks must be >= 1, got 0"},
    {"HugeMaxBlocks", [](SparseDecodeProblem& p) { p.cache.max_blocks = int64_t{1} << 40; },
     "cache.max_blocks * block_size must be <= 2147483647"},
    {"PagedWithoutPages",
     [](SparseDecodeProblem& p) {
       static const int32_t table[4] = {0, 1, 2, 3};
       p.cache.block_table = table;
       p.cache.num_pages = 0;
     },
     "cache.num_pages must be >= 1 with a block_table, got 0"},
    {"SizeOverflow",
     [](SparseDecodeProblem& p) {
       p.cache.batch = int64_t{1} << 30;
       p.cache.num_kv_heads = int64_t{1} << 30;
       p.cache.num_pages = int64_t{1} << 30;  // used when paged
     },
     "cache: the cache's size overflows int64"},
    // Few pages, but the tail keys are per (request, head): 2^48 of them x 64 KB.
    {"PagedTailKeysOverflow",
     [](SparseDecodeProblem& p) {
       static const int32_t table[4] = {0, 1, 2, 3};
       p.cache.block_table = table;
       p.cache.num_pages = 4;
       p.cache.batch = int64_t{1} << 24;
       p.cache.num_kv_heads = int64_t{1} << 24;
     },
     "cache: the cache's size overflows int64"},
    {"NullLengths", [](SparseDecodeProblem& p) { p.cache.lengths = nullptr; },
     "cache.lengths must not be null"},
    {"NullKeyCodes", [](SparseDecodeProblem& p) { p.cache.key_codes = nullptr; },
     "cache.key_codes must not be null"},
    {"NullKeyScales", [](SparseDecodeProblem& p) { p.cache.key_scales = nullptr; },
     "cache.key_scales must not be null"},
    {"NullKeyResiduals", [](SparseDecodeProblem& p) { p.cache.key_residuals = nullptr; },
     "cache.key_residuals must not be null"},
    {"NullValues", [](SparseDecodeProblem& p) { p.cache.values = nullptr; },
     "cache.values must not be null"},
    {"NullTailKeys", [](SparseDecodeProblem& p) { p.cache.tail_keys = nullptr; },
     "cache.tail_keys must not be null"},
    {"MisalignedKeyCodes",
     [](SparseDecodeProblem& p) { p.cache.key_codes = shifted(p.cache.key_codes, 8); },
     "cache.key_codes must be 16-byte aligned"},
    {"MisalignedValues",
     [](SparseDecodeProblem& p) { p.cache.values = shifted(p.cache.values, 2); },
     "cache.values must be 16-byte aligned"},
    {"MisalignedLengths",
     [](SparseDecodeProblem& p) { p.cache.lengths = shifted(p.cache.lengths, 2); },
     "cache.lengths must be 4-byte aligned"},
    {"ZeroQueryHeads", [](SparseDecodeProblem& p) { p.num_q_heads = 0; },
     "num_q_heads must be num_kv_heads (2) times a group size in [1, 16], got 0"},
    {"QueryHeadsNotMultiple", [](SparseDecodeProblem& p) { p.num_q_heads = 3; },
     "num_q_heads must be num_kv_heads (2) times a group size in [1, 16], got 3"},
    {"GroupOf17", [](SparseDecodeProblem& p) { p.num_q_heads = 34; },
     "num_q_heads must be num_kv_heads (2) times a group size in [1, 16], got 34"},
    {"NegativeScale", [](SparseDecodeProblem& p) { p.softmax_scale = -0.1f; },
     "softmax_scale must be finite and > 0 (0: 1/sqrt(head_dim)), got -0.1"},
    {"NanScale",
     [](SparseDecodeProblem& p) { p.softmax_scale = std::numeric_limits<float>::quiet_NaN(); },
     "softmax_scale must be finite and > 0"},
    {"InfiniteScale",
     [](SparseDecodeProblem& p) { p.softmax_scale = std::numeric_limits<float>::infinity(); },
     "softmax_scale must be finite and > 0"},
    {"NegativeDelta", [](SparseDecodeProblem& p) { p.delta = -1.0f; },
     "delta must be >= 0 (natural-log units; +inf keeps every block), got -1"},
    {"NanDelta",
     [](SparseDecodeProblem& p) { p.delta = std::numeric_limits<float>::quiet_NaN(); },
     "delta must be >= 0"},
    {"NegativeMassTarget",
     [](SparseDecodeProblem& p) {
       p.selection = SparseSelection::kMass;
       p.mass_target = -0.01f;
     },
     "mass_target must be in [0, 1) (0 keeps every block), got -0.01"},
    {"MassTargetOne",
     [](SparseDecodeProblem& p) {
       p.selection = SparseSelection::kMass;
       p.mass_target = 1.0f;
     },
     "mass_target must be in [0, 1)"},
    {"NanMassTarget",
     [](SparseDecodeProblem& p) {
       p.selection = SparseSelection::kMass;
       p.mass_target = std::numeric_limits<float>::quiet_NaN();
     },
     "mass_target must be in [0, 1)"},
    {"BadSelection", [](SparseDecodeProblem& p) { p.selection = static_cast<SparseSelection>(5); },
     "selection must be SparseSelection::kDelta (0) or kMass (1), got 5"},
    {"BadOutDtype", [](SparseDecodeProblem& p) { p.out_dtype = static_cast<DType>(7); },
     "out_dtype must be float32, float16 or bfloat16, got invalid"},
    {"NullQuery", [](SparseDecodeProblem& p) { p.q = nullptr; }, "q must not be null"},
    {"NullOut", [](SparseDecodeProblem& p) { p.out = nullptr; }, "out must not be null"},
    {"MisalignedQuery", [](SparseDecodeProblem& p) { p.q = shifted(p.q, 2); },
     "q must be 16-byte aligned"},
    {"MisalignedLse", [](SparseDecodeProblem& p) { p.lse = shifted(p.lse, 2); },
     "lse must be 4-byte aligned"},
};

class SparseDecodeValidation : public ::testing::TestWithParam<BadSparse> {};

TEST_P(SparseDecodeValidation, NamesTheArgumentAndWritesNothing) {
  const BadSparse& bad = GetParam();
  for (const bool paged : {false, true}) {
    Valid valid(paged);
    SparseDecodeProblem p = valid.problem();
    ASSERT_TRUE(validate_sparse_decode_problem(p).is_ok());
    bad.mutate(p);
    const Status checked = validate_sparse_decode_problem(p);
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(checked.message().find(bad.message), std::string::npos) << checked.message();
    const Status ran = sparse_decode_cpu(p);
    EXPECT_EQ(ran.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ran.message(), checked.message());
    EXPECT_TRUE(valid.outputs_untouched());
  }
}

INSTANTIATE_TEST_SUITE_P(Bad, SparseDecodeValidation, ::testing::ValuesIn(kBadSparse),
                         [](const ::testing::TestParamInfo<BadSparse>& param_info) {
                           return std::string(param_info.param.name);
                         });

// The host-visible state: lengths within capacity, pages of the blocks in use.
TEST(SparseDecodeValidationHost, LengthsAndBlockTable) {
  Valid valid(false);
  SparseDecodeProblem p = valid.problem();
  ASSERT_TRUE(sparse_decode_cpu(p).is_ok());
  valid.out.assign(valid.out.size(), kSentinel);
  valid.lse.assign(valid.lse.size(), kSentinel);
  valid.mask.assign(valid.mask.size(), 9);
  valid.cache.lengths[1] = 257;
  Status s = sparse_decode_cpu(p);
  EXPECT_NE(s.message().find("lengths[1] must be in [0, max_blocks * block_size = 256], got 257"),
            std::string::npos)
      << s.message();
  valid.cache.lengths[1] = -3;
  s = sparse_decode_cpu(p);
  EXPECT_NE(s.message().find("lengths[1] must be in [0, max_blocks * block_size = 256], got -3"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(valid.outputs_untouched());

  Valid paged(true);
  SparseDecodeProblem pp = paged.problem();
  // Sequence 1 has 5 tokens: only its block 0 is in use, so its block 1 entry may hold anything.
  paged.cache.block_table[1 * 2 + 1] = -1;
  ASSERT_TRUE(sparse_decode_cpu(pp).is_ok());
  paged.out.assign(paged.out.size(), kSentinel);
  paged.lse.assign(paged.lse.size(), kSentinel);
  paged.mask.assign(paged.mask.size(), 9);
  paged.cache.block_table[0 * 2 + 1] = 7;  // num_pages = 2 * 2 + 3 = 7
  s = sparse_decode_cpu(pp);
  EXPECT_NE(s.message().find("block_table[0, 1] must be in [0, num_pages = 7), got 7"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(paged.outputs_untouched());
}

TEST(SparseDecodeValidationHost, DenseCacheAndProblem) {
  DecodeWorkload w = Valid::make_workload();
  std::vector<float> out(static_cast<std::size_t>(w.batch * w.num_q_heads * kD), kSentinel);
  DenseDecodeProblem p = w.dense_problem(out.data(), DType::kFloat32);
  ASSERT_TRUE(validate_dense_decode_problem(p).is_ok());
  const auto expect = [&](DenseDecodeProblem bad, const std::string& message) {
    const Status checked = validate_dense_decode_problem(bad);
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(checked.message().find(message), std::string::npos) << checked.message();
    const Status ran = dense_decode_cpu(bad);
    EXPECT_NE(ran.message().find(message), std::string::npos) << ran.message();
  };
  DenseDecodeProblem bad = p;
  bad.cache.dtype = static_cast<DType>(9);
  expect(bad, "cache.dtype must be float16, bfloat16 or float32, got invalid");
  bad = p;
  bad.cache.capacity = -1;
  expect(bad, "cache.capacity must be >= 0, got -1");
  bad = p;
  bad.cache.token_stride = 64;
  expect(bad, "cache.token_stride must be >= head_dim (128), got 64");
  bad = p;
  bad.cache.head_stride = 130 * kD + 3;
  expect(bad, "cache.batch_stride, head_stride and token_stride must be multiples of 8 elements");
  bad = p;
  bad.cache.batch_stride = -kD;
  expect(bad, "cache.batch_stride, head_stride and token_stride must be >= 0 (0: contiguous)");
  bad = p;
  bad.cache.token_stride = int64_t{1} << 60;
  expect(bad, "cache: the strided layout overflows int64");
  bad = p;
  bad.cache.keys = nullptr;
  expect(bad, "cache.keys must not be null");
  bad = p;
  bad.num_q_heads = 5;
  expect(bad, "num_q_heads must be num_kv_heads (2) times a group size in [1, 16], got 5");
  for (float x : out) ASSERT_EQ(x, kSentinel);
  // Lengths beyond the capacity (host check of dense_decode_cpu).
  w.lengths[0] = 131;
  const Status s = dense_decode_cpu(p);
  EXPECT_NE(s.message().find("lengths[0] must be in [0, capacity=130], got 131"),
            std::string::npos)
      << s.message();
}

TEST(SparseDecodeValidationHost, ConversionAppendRebuild) {
  DecodeWorkload w = Valid::make_workload();
  HostSparseCache cache(w.dtype, w.batch, w.num_kv_heads, 128, 2, false);
  DenseKvCache dense = w.dense();
  dense.dtype = DType::kBFloat16;
  Status s = sparse_decode_quantize_cpu(dense, cache.view());
  EXPECT_NE(s.message().find("dense.dtype must equal cache.dtype (float16), got bfloat16"),
            std::string::npos)
      << s.message();
  dense = w.dense();
  dense.num_kv_heads = 1;
  s = sparse_decode_quantize_cpu(dense, cache.view());
  EXPECT_NE(s.message().find("dense.num_kv_heads must equal cache.num_kv_heads (2), got 1"),
            std::string::npos)
      << s.message();
  dense = w.dense();
  dense.head_dim = 64;
  s = sparse_decode_quantize_cpu(dense, cache.view());
  EXPECT_NE(s.message().find("dense.head_dim must be 128, got 64"), std::string::npos)
      << s.message();
  // A sparse cache too small for the dense lengths.
  HostSparseCache small(w.dtype, w.batch, w.num_kv_heads, 128, 1, false);
  s = sparse_decode_quantize_cpu(w.dense(), small.view());
  EXPECT_NE(s.message().find("lengths[0] must be in [0, max_blocks * block_size = 128], got 130"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(small.lengths, (std::vector<int32_t>{0, 0}));

  std::vector<uint16_t> token(static_cast<std::size_t>(w.batch * w.num_kv_heads * kD), 0);
  s = sparse_kv_append_cpu(cache.view(), nullptr, token.data());
  EXPECT_NE(s.message().find("new_keys must not be null"), std::string::npos) << s.message();
  s = sparse_kv_append_cpu(cache.view(), token.data(), nullptr);
  EXPECT_NE(s.message().find("new_values must not be null"), std::string::npos) << s.message();

  ASSERT_TRUE(sparse_decode_quantize_cpu(w.dense(), cache.view()).is_ok());
  std::vector<float> keys(static_cast<std::size_t>(w.batch * w.num_kv_heads * 256 * kD));
  std::vector<float> values(keys.size());
  std::vector<int32_t> lengths(2, -5);
  DenseKvCache out;
  out.dtype = DType::kFloat16;
  out.batch = w.batch;
  out.num_kv_heads = w.num_kv_heads;
  out.capacity = 256;
  out.keys = keys.data();
  out.values = values.data();
  out.lengths = lengths.data();
  s = sparse_kv_rebuild_cpu(cache.view(), out);
  EXPECT_NE(s.message().find("out.dtype must be float32, got float16"), std::string::npos)
      << s.message();
  out.dtype = DType::kFloat32;
  out.capacity = 200;
  s = sparse_kv_rebuild_cpu(cache.view(), out);
  EXPECT_NE(s.message().find("out.capacity must be >= max_blocks * block_size = 256, got 200"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(lengths, (std::vector<int32_t>{-5, -5}));
}

// A paged cache's writers need pages of their own for the blocks they write; a page no one
// writes may be shared. Lengths 130 and 5, BS 128: a conversion writes blocks (0, 0), (0, 1) and
// (1, 0); an append writes (0, 1) and (1, 0) and reads (0, 0).
TEST(SparseDecodeValidationHost, WritersNeedPagesOfTheirOwn) {
  DecodeWorkload w = Valid::make_workload();
  HostSparseCache shared(w.dtype, w.batch, w.num_kv_heads, 128, 2, /*paged=*/true, 11);
  shared.block_table[1 * 2 + 0] = shared.block_table[0 * 2 + 0];
  Status s = sparse_decode_quantize_cpu(w.dense(), shared.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("block_table[0, 0] and block_table[1, 0] are both page"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(shared.lengths, (std::vector<int32_t>{0, 0}));

  HostSparseCache cache(w.dtype, w.batch, w.num_kv_heads, 128, 2, /*paged=*/true, 11);
  ASSERT_TRUE(sparse_decode_quantize_cpu(w.dense(), cache.view()).is_ok());
  const std::vector<uint16_t> token(static_cast<std::size_t>(w.batch * w.num_kv_heads * kD), 0);
  // Sequence 1's block 0 on sequence 0's full block 0: the append would overwrite what
  // sequence 0 reads.
  const int32_t own = cache.block_table[1 * 2 + 0];
  cache.block_table[1 * 2 + 0] = cache.block_table[0 * 2 + 0];
  s = sparse_kv_append_cpu(cache.view(), token.data(), token.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("block_table[1, 0] and block_table[0, 0] are both page"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(cache.lengths, (std::vector<int32_t>{130, 5}));
  // Both sequences' written blocks on one page.
  cache.block_table[1 * 2 + 0] = cache.block_table[0 * 2 + 1];
  s = sparse_kv_append_cpu(cache.view(), token.data(), token.data());
  EXPECT_NE(s.message().find("are both page"), std::string::npos) << s.message();
  // Sequence 1's unused block 1 may share a page with anything; then the append runs.
  cache.block_table[1 * 2 + 0] = own;
  cache.block_table[1 * 2 + 1] = cache.block_table[0 * 2 + 1];
  EXPECT_TRUE(sparse_kv_append_cpu(cache.view(), token.data(), token.data()).is_ok());
  EXPECT_EQ(cache.lengths, (std::vector<int32_t>{131, 6}));
}

TEST(SparseDecodeValidationHost, Fidelity) {
  DecodeWorkload w = Valid::make_workload();
  std::vector<float> out(static_cast<std::size_t>(w.batch * w.num_q_heads * kD), 0.0f);
  std::vector<uint8_t> mask(16, 1);
  DecodeFidelityProblem f;
  f.reference = w.dense_problem(nullptr, DType::kFloat32);
  f.out = out.data();
  f.kept_mask = mask.data();
  f.mask_blocks = 2;
  DecodeFidelity result;
  EXPECT_NE(decode_fidelity_cpu(f, nullptr).message().find("fidelity must not be null"),
            std::string::npos);
  ASSERT_TRUE(decode_fidelity_cpu(f, &result).is_ok());
  f.block_size = 64;
  EXPECT_NE(decode_fidelity_cpu(f, &result).message().find("block_size must be 128 or 256, got 64"),
            std::string::npos);
  f.block_size = 128;
  f.mask_blocks = 1;
  const Status s = decode_fidelity_cpu(f, &result);
  EXPECT_NE(s.message().find("mask_blocks must be >= ceil(capacity / block_size) = 2, got 1"),
            std::string::npos)
      << s.message();
  f.mask_blocks = 2;
  f.out = nullptr;
  EXPECT_NE(decode_fidelity_cpu(f, &result).message().find("out must not be null"),
            std::string::npos);
}

TEST(SparseDecodeValidationHost, CacheBytes) {
  EXPECT_NE(sparse_kv_cache_bytes(SparseKvCache{}, nullptr).message().find("bytes must not be null"),
            std::string::npos);
  SparseKvCache shape;
  shape.batch = 1;
  shape.num_kv_heads = 1;
  shape.max_blocks = 0;
  SparseKvCacheBytes bytes;
  EXPECT_NE(sparse_kv_cache_bytes(shape, &bytes).message().find("cache.max_blocks must be >= 1"),
            std::string::npos);
}

}  // namespace
}  // namespace litetopk
