// The sparse KV cache format on the host: element helpers, scale rounding, the quantization round
// trip (exact on representable inputs, within the fp8 residual's precision otherwise),
// conversion from a dense cache (full blocks, tail, values, lengths; paged = contiguous), append
// (bit-identical to conversion), memory per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "litetopk/float_bits.h"
#include "formats/sparse_kv_format.h"
#include "cpu/sparse_decode_cpu.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using testing::DecodeWorkload;
using testing::DecodeWorkloadSpec;
using testing::HostSparseCache;

constexpr int64_t kD = 128;

TEST(SparseKvFormat, CodesLevelsAndPacking) {
  EXPECT_EQ(sparse_kv::code_level(0), -1.5f);
  EXPECT_EQ(sparse_kv::code_level(1), -0.5f);
  EXPECT_EQ(sparse_kv::code_level(2), 0.5f);
  EXPECT_EQ(sparse_kv::code_level(3), 1.5f);
  // Nearest level; ties at -1, 0, 1 go up.
  EXPECT_EQ(sparse_kv::code_of(-2.0f), 0u);
  EXPECT_EQ(sparse_kv::code_of(-1.0001f), 0u);
  EXPECT_EQ(sparse_kv::code_of(-1.0f), 1u);
  EXPECT_EQ(sparse_kv::code_of(-0.0f), 2u);
  EXPECT_EQ(sparse_kv::code_of(0.0f), 2u);
  EXPECT_EQ(sparse_kv::code_of(0.99f), 2u);
  EXPECT_EQ(sparse_kv::code_of(1.0f), 3u);
  EXPECT_EQ(sparse_kv::code_of(2.0f), 3u);
  uint8_t row[kD / 4] = {};
  for (int64_t c = 0; c < kD; ++c) sparse_kv::pack_code(row, c, static_cast<uint32_t>((c * 7) % 4));
  for (int64_t c = 0; c < kD; ++c) EXPECT_EQ(sparse_kv::unpack_code(row, c), (c * 7) % 4) << c;
  // Channel 4j + i in bits 2i..2i+1 of byte j.
  EXPECT_EQ(row[0], static_cast<uint8_t>(0 | (3 << 2) | (2 << 4) | (1 << 6)));
  sparse_kv::pack_code(row, 1, 0);
  EXPECT_EQ(row[0], static_cast<uint8_t>(0 | (2 << 4) | (1 << 6)));
}

// L + R is exact in fp16 for every residual byte (int8 r, R = (r + 1/2) / 256), and s * (L + R)
// is exact in fp32 for every fp16 and bf16 scale.
TEST(SparseKvFormat, RebuildIsExact) {
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const auto r = static_cast<uint8_t>(byte);
    EXPECT_EQ(sparse_kv::residual_value(r),
              (static_cast<float>(static_cast<int8_t>(r)) + 0.5f) / 256.0f);
    for (uint32_t code = 0; code < 4; ++code) {
      const float sum = sparse_kv::code_level(code) + sparse_kv::residual_value(r);
      EXPECT_EQ(float_bits::f32_from_f16_bits(float_bits::f16_bits_from_f32(sum)), sum);
      for (const uint16_t s_bits : {uint16_t{0x0001}, uint16_t{0x03ff}, uint16_t{0x3c01},
                                    uint16_t{0x7bff}, uint16_t{0x5555}}) {
        for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
          const float s = float_bits::decode_score(s_bits, dtype);
          const double exact = static_cast<double>(s) * static_cast<double>(sum);
          EXPECT_EQ(static_cast<double>(sparse_kv::rebuild_element(s, code, r)), exact);
        }
      }
    }
  }
}

TEST(SparseKvFormat, ScaleRounding) {
  float s = -1;
  EXPECT_EQ(cpu::key_scale_bits(0.0f, DType::kFloat16, &s), 0);
  EXPECT_EQ(s, 0.0f);
  // 65504 / 1.5 = 43669.33 rounds to 43680 (fp16 spacing 32 there).
  EXPECT_EQ(cpu::key_scale_bits(65504.0f, DType::kFloat16, &s), float_bits::f16_bits_from_f32(43680.0f));
  EXPECT_EQ(s, 43680.0f);
  // The smallest fp16 subnormal: 2^-24 / 1.5 rounds up to 2^-24; below 0.75 * 2^-24 the scale
  // rounds to 0 and is raised to 2^-24.
  const float tiny = std::ldexp(1.0f, -24);
  EXPECT_EQ(cpu::key_scale_bits(tiny, DType::kFloat16, &s), 1);
  EXPECT_EQ(s, tiny);
  EXPECT_EQ(cpu::key_scale_bits(0.7f * tiny, DType::kFloat16, &s), 1);
  EXPECT_EQ(s, tiny);
  EXPECT_EQ(cpu::key_scale_bits(3.0f, DType::kBFloat16, &s), float_bits::bf16_bits_from_f32(2.0f));
  EXPECT_EQ(s, 2.0f);
}

// Quantizes one block through the CPU entry point and returns the rebuilt keys.
struct OneBlock {
  HostSparseCache cache;
  std::vector<float> rebuilt;
  explicit OneBlock(DType dtype, int64_t bs) : cache(dtype, 1, 1, bs, 1, false) {}
};

void quantize_one_block(const std::vector<uint16_t>& key_bits, DType dtype, int64_t bs,
                        OneBlock* block) {
  std::vector<uint16_t> values(key_bits.size(), 0);
  int32_t len = static_cast<int32_t>(bs);
  DenseKvCache dense;
  dense.dtype = dtype;
  dense.batch = 1;
  dense.num_kv_heads = 1;
  dense.capacity = bs;
  dense.keys = const_cast<uint16_t*>(key_bits.data());
  dense.values = values.data();
  dense.lengths = &len;
  const Status status = sparse_decode_quantize_cpu(dense, block->cache.view());
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  block->rebuilt.resize(static_cast<std::size_t>(bs * kD));
  cpu::rebuild_key_block(block->cache.key_codes.data(), block->cache.key_scales.data(),
                         block->cache.key_residuals.data(), bs, kD, dtype, block->rebuilt.data(),
                         nullptr);
}

// Keys s * (L + R) with a power-of-two scale per channel, one token at +-1.5s per channel (so
// that amax = 1.5s), the others within +-1.5s with residuals that keep the key representable:
// the rebuild is exact, but for the +-1.5s tokens (residual 0, a cell edge: within s * 2^-9).
TEST(SparseKvQuantize, RoundTripExactOnRepresentableInputs) {
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const int64_t bs : {int64_t{128}, int64_t{256}}) {
      std::mt19937_64 rng(static_cast<uint64_t>(bs) + (dtype == DType::kFloat16 ? 0u : 1u));
      std::uniform_int_distribution<int> exponent(-12, 12), code(0, 3), byte(0, 255);
      std::vector<float> keys(static_cast<std::size_t>(bs * kD));
      for (int64_t c = 0; c < kD; ++c) {
        const float s = std::ldexp(1.0f, exponent(rng));
        for (int64_t t = 0; t < bs; ++t) {
          float k = 0;
          if (t == c % bs) {
            k = (c % 2 ? 1.5f : -1.5f) * s;  // amax = 1.5s
          } else {
            for (int attempt = 0; attempt < 50; ++attempt) {
              const auto r = static_cast<uint8_t>(byte(rng));
              const float residual = sparse_kv::residual_value(r);
              const float level = sparse_kv::code_level(static_cast<uint32_t>(code(rng)));
              if (std::fabs(level + residual) > 1.5f) continue;  // would raise amax
              const float candidate = s * (level + residual);
              if (float_bits::decode_score(float_bits::encode_score(candidate, dtype), dtype) ==
                  candidate) {
                k = candidate;
                break;
              }
            }
          }
          keys[t * kD + c] = k;
        }
      }
      std::vector<uint16_t> bits(keys.size());
      for (std::size_t i = 0; i < keys.size(); ++i) {
        bits[i] = static_cast<uint16_t>(float_bits::encode_score(keys[i], dtype));
        ASSERT_EQ(float_bits::decode_score(bits[i], dtype), keys[i]);
      }
      OneBlock block(dtype, bs);
      quantize_one_block(bits, dtype, bs, &block);
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto t = static_cast<int64_t>(i) / kD, c = static_cast<int64_t>(i) % kD;
        const float tolerance = t == c % bs ? std::fabs(keys[i]) / 1.5f / 512 : 0.0f;
        ASSERT_LE(std::fabs(block.rebuilt[i] - keys[i]), tolerance)
            << dtype_name(dtype) << " BS " << bs << " element " << i;
      }
    }
  }
}

// Any finite keys: |rebuilt - k| <= s * (2^-9 + the clamp's excess max(0, |x - L| - 1/2)) plus
// fp32 rounding of x, with x = k / s; the clamp only acts at |x - L| > 1/2 (subnormal scales,
// where |x| may reach 2.24).
TEST(SparseKvQuantize, RoundTripWithinResidualPrecision) {
  for (const auto pattern : {testing::DecodePattern::kNeedles, testing::DecodePattern::kFlat,
                             testing::DecodePattern::kExtremes}) {
    for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      DecodeWorkloadSpec spec;
      spec.pattern = pattern;
      spec.dtype = dtype;
      spec.num_kv_heads = 1;
      spec.group_size = 1;
      spec.lengths = {256};
      spec.seed = 5;
      DecodeWorkload w = testing::make_decode_workload(spec);
      OneBlock block(dtype, 256);
      quantize_one_block(w.keys, dtype, 256, &block);
      double worst_relative = 0;
      for (int64_t c = 0; c < kD; ++c) {
        const float s = testing::element(block.cache.key_scales.data(), dtype, c);
        for (int64_t t = 0; t < 256; ++t) {
          const double k = testing::element(w.keys.data(), dtype, t * kD + c);
          if (s == 0) {
            ASSERT_EQ(k, 0.0);
            ASSERT_EQ(block.rebuilt[t * kD + c], 0.0f);
            continue;
          }
          const uint32_t code = sparse_kv::unpack_code(
              block.cache.key_codes.data() + t * (kD / 4), c);
          const double x = k / static_cast<double>(s);
          const double r_exact = x - static_cast<double>(sparse_kv::code_level(code));
          // The nearest level (beyond +-2, possible only with a subnormal scale, the outer one).
          ASSERT_LE(std::fabs(r_exact), std::max(0.5, std::fabs(x) - 1.5) + 1e-6)
              << "not the nearest level";
          const double bound =
              static_cast<double>(s) * (std::ldexp(1.0, -9) +
                                        std::max(0.0, std::fabs(r_exact) - 0.5) +
                                        4.0 * std::ldexp(1.0, -24));
          const double error = std::fabs(static_cast<double>(block.rebuilt[t * kD + c]) - k);
          ASSERT_LE(error, bound) << testkit::decode_pattern_name(pattern) << " "
                                  << dtype_name(dtype) << " t " << t << " c " << c << " k " << k
                                  << " s " << s;
          if (std::ldexp(1.0, -14) <= s) {
            worst_relative = std::max(worst_relative, error / static_cast<double>(s));
          }
        }
      }
      EXPECT_LE(worst_relative, 1.0 / 512 + 1.0 / 1024 + 1e-6);
    }
  }
}

// Conversion writes every full block, the tail and the values; paged and contiguous agree.
TEST(SparseKvQuantize, ConversionFullBlocksTailValuesLengths) {
  for (const int64_t bs : {int64_t{128}, int64_t{256}}) {
    DecodeWorkloadSpec spec;
    spec.num_kv_heads = 2;
    spec.group_size = 1;
    spec.lengths = {0, 1, static_cast<int32_t>(bs - 1), static_cast<int32_t>(bs),
                    static_cast<int32_t>(bs + 1), static_cast<int32_t>(3 * bs + 17)};
    spec.seed = 9;
    DecodeWorkload w = testing::make_decode_workload(spec);
    HostSparseCache contiguous(w.dtype, 0, 1, bs, 1, false), paged = contiguous;
    ASSERT_TRUE(testing::quantize_workload(&w, bs, false, &contiguous).is_ok());
    ASSERT_TRUE(testing::quantize_workload(&w, bs, true, &paged).is_ok());
    EXPECT_EQ(contiguous.lengths, w.lengths);
    EXPECT_EQ(paged.lengths, w.lengths);
    const SparseKvCache cv = contiguous.view(), pv = paged.view();
    const cpu::SparseCacheView a(cv), b(pv);
    for (int64_t s = 0; s < w.batch; ++s) {
      const int64_t len = w.lengths[s], nf = len / bs;
      for (int64_t h = 0; h < w.num_kv_heads; ++h) {
        for (int64_t j = 0; j * bs < len; ++j) {
          const int64_t sa = a.slot(s, h, j), sb = b.slot(s, h, j);
          for (int64_t i = 0; i < std::min(bs, len - j * bs); ++i) {
            for (int64_t c = 0; c < kD; ++c) {
              const uint16_t want = w.keys[((s * w.num_kv_heads + h) * w.capacity + j * bs + i) * kD + c];
              const uint16_t value = w.values[((s * w.num_kv_heads + h) * w.capacity + j * bs + i) * kD + c];
              ASSERT_EQ(contiguous.values[a.value_offset(sa, i) + c], value);
              ASSERT_EQ(paged.values[b.value_offset(sb, i) + c], value);
              if (j == nf) {  // the open block: keys verbatim in the tail
                ASSERT_EQ(contiguous.tail_keys[a.tail_offset(s, h, i) + c], want);
                ASSERT_EQ(paged.tail_keys[b.tail_offset(s, h, i) + c], want);
              }
            }
          }
          if (j < nf) {
            ASSERT_TRUE(std::equal(a.codes(sa), a.codes(sa) + bs * kD / 4, b.codes(sb)));
            ASSERT_TRUE(std::equal(a.residuals(sa), a.residuals(sa) + bs * kD, b.residuals(sb)));
            ASSERT_TRUE(std::equal(contiguous.key_scales.begin() + a.scale_offset(sa),
                                   contiguous.key_scales.begin() + a.scale_offset(sa) + kD,
                                   paged.key_scales.begin() + b.scale_offset(sb)));
          }
        }
      }
    }
    // The rebuilt dense cache: tail keys verbatim, full-block keys within the residual's bound.
    testing::RebuiltCache rebuilt;
    testing::rebuild_cache(cv, w, &rebuilt);
    EXPECT_EQ(rebuilt.lengths, w.lengths);
    for (int64_t s = 0; s < w.batch; ++s) {
      for (int64_t h = 0; h < w.num_kv_heads; ++h) {
        for (int64_t t = 0; t < w.lengths[s]; ++t) {
          for (int64_t c = 0; c < kD; ++c) {
            const float k = testing::element(
                w.keys.data(), w.dtype, ((s * w.num_kv_heads + h) * w.capacity + t) * kD + c);
            const float got = rebuilt.keys[((s * w.num_kv_heads + h) * rebuilt.cache.capacity + t) * kD + c];
            if (t >= w.lengths[s] / bs * bs) {
              ASSERT_EQ(got, k);
            } else {
              const double scale = testing::element(
                  contiguous.key_scales.data(), w.dtype, a.scale_offset(a.slot(s, h, t / bs)) + c);
              ASSERT_NEAR(got, k, scale * (1.0 / 32 + 1.0 / 1024 + 1e-6)) << s << " " << h << " " << t;
            }
          }
        }
      }
    }
  }
}

// Appending tokens one at a time gives the same cache, bit for bit, as converting the whole
// prefix; a full sequence is refused with nothing written.
TEST(SparseKvQuantize, AppendMatchesConversion) {
  for (const int64_t bs : {int64_t{128}, int64_t{256}}) {
    for (const bool paged : {false, true}) {
      DecodeWorkloadSpec spec;
      spec.num_kv_heads = 2;
      spec.group_size = 1;
      const auto total = static_cast<int32_t>(2 * bs + 5);
      spec.lengths = {total, total};
      spec.seed = 21;
      DecodeWorkload w = testing::make_decode_workload(spec);
      const int64_t max_blocks = 3;
      HostSparseCache appended(w.dtype, w.batch, w.num_kv_heads, bs, max_blocks, paged, 3);
      const SparseKvCache view = appended.view();
      std::vector<uint16_t> new_keys(static_cast<std::size_t>(w.batch * w.num_kv_heads * kD));
      std::vector<uint16_t> new_values(new_keys.size());
      for (int32_t t = 0; t < total; ++t) {
        for (int64_t s = 0; s < w.batch; ++s) {
          for (int64_t h = 0; h < w.num_kv_heads; ++h) {
            const int64_t from = ((s * w.num_kv_heads + h) * w.capacity + t) * kD;
            const int64_t to = (s * w.num_kv_heads + h) * kD;
            std::copy_n(w.keys.begin() + from, kD, new_keys.begin() + to);
            std::copy_n(w.values.begin() + from, kD, new_values.begin() + to);
          }
        }
        const Status status = sparse_kv_append_cpu(view, new_keys.data(), new_values.data());
        ASSERT_TRUE(status.is_ok()) << status.to_string();
        // Compare with a conversion of the prefix [0, t] at two points per block.
        if ((t + 1) % bs != 0 && (t + 1) % bs != 1 && t + 1 != total) continue;
        std::vector<int32_t> prefix(static_cast<std::size_t>(w.batch), t + 1);
        DenseKvCache dense = w.dense();
        dense.lengths = prefix.data();
        HostSparseCache converted(w.dtype, w.batch, w.num_kv_heads, bs, max_blocks, paged, 3);
        ASSERT_TRUE(sparse_decode_quantize_cpu(dense, converted.view()).is_ok());
        EXPECT_EQ(appended.lengths, converted.lengths);
        EXPECT_EQ(appended.key_codes, converted.key_codes) << "after " << t + 1;
        EXPECT_EQ(appended.key_scales, converted.key_scales);
        EXPECT_EQ(appended.key_residuals, converted.key_residuals);
        EXPECT_EQ(appended.values, converted.values);
        // The live rows of the tail (an append leaves the rows of a quantized block behind).
        const int64_t live = (t + 1) % bs;
        for (int64_t p = 0; p < w.batch * w.num_kv_heads; ++p) {
          const auto first = appended.tail_keys.begin() + p * bs * kD;
          EXPECT_TRUE(std::equal(first, first + live * kD,
                                 converted.tail_keys.begin() + p * bs * kD));
        }
      }
      // Capacity 3 blocks: fill up, then one more append is refused and writes nothing.
      while (appended.lengths[0] < max_blocks * bs) {
        ASSERT_TRUE(sparse_kv_append_cpu(view, new_keys.data(), new_values.data()).is_ok());
      }
      const HostSparseCache before = appended;
      const Status full = sparse_kv_append_cpu(view, new_keys.data(), new_values.data());
      EXPECT_EQ(full.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(full.message().find("lengths[0]"), std::string::npos) << full.message();
      EXPECT_NE(full.message().find("cannot append"), std::string::npos) << full.message();
      EXPECT_EQ(appended.lengths, before.lengths);
      EXPECT_EQ(appended.values, before.values);
      EXPECT_EQ(appended.tail_keys, before.tail_keys);
    }
  }
}

TEST(SparseKvQuantize, NonFiniteKeysAreRejected) {
  DecodeWorkloadSpec spec;
  spec.num_kv_heads = 1;
  spec.group_size = 1;
  spec.lengths = {130};
  DecodeWorkload w = testing::make_decode_workload(spec);
  w.keys[129 * kD + 5] = 0x7c00;  // +inf in the open block
  HostSparseCache cache(w.dtype, 0, 1, 128, 1, false);
  Status status = testing::quantize_workload(&w, 128, false, &cache);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dense.keys[0, 0, 129, 5] must be finite"), std::string::npos)
      << status.message();
  EXPECT_TRUE(std::all_of(cache.lengths.begin(), cache.lengths.end(), [](int32_t l) { return l == 0; }));

  HostSparseCache empty(DType::kFloat16, 1, 1, 128, 2, false);
  std::vector<uint16_t> key(kD, 0x3c00), value(kD, 0x3c00);
  key[3] = 0x7e00;  // NaN
  status = sparse_kv_append_cpu(empty.view(), key.data(), value.data());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("new_keys[0, 0, 3] must be finite"), std::string::npos)
      << status.message();
  EXPECT_EQ(empty.lengths[0], 0);
}

// Cache memory per token per KV head relative to fp16 K+V (4 D bytes): 418/512 at BS = 128,
// 417/512 at BS = 256; the sizes of a cache's arrays.
TEST(SparseKvQuantize, MemoryPerToken) {
  EXPECT_DOUBLE_EQ(sparse_kv_bytes_per_token(128), 32 + 128 + 256 + 2);
  EXPECT_DOUBLE_EQ(sparse_kv_bytes_per_token(256), 32 + 128 + 256 + 1);
  EXPECT_EQ(sparse_kv_bytes_per_token(64), 0.0);
  for (const int64_t bs : {int64_t{128}, int64_t{256}}) {
    const double ratio = sparse_kv_bytes_per_token(bs) / (4.0 * kD);
    EXPECT_LE(ratio, 0.85);
    std::printf("[ memory ] BS %3lld: %.0f B per token per KV head = %.4f of fp16 K+V (512 B)\n",
                static_cast<long long>(bs), sparse_kv_bytes_per_token(bs), ratio);
  }
  SparseKvCache shape;
  shape.batch = 3;
  shape.num_kv_heads = 8;
  shape.block_size = 256;
  shape.max_blocks = 10;
  SparseKvCacheBytes bytes;
  ASSERT_TRUE(sparse_kv_cache_bytes(shape, &bytes).is_ok());
  const std::size_t slots = 3 * 8 * 10;
  EXPECT_EQ(bytes.key_codes, slots * 256 * 32);
  EXPECT_EQ(bytes.key_scales, slots * 256);
  EXPECT_EQ(bytes.key_residuals, slots * 256 * 128);
  EXPECT_EQ(bytes.values, slots * 256 * 256);
  EXPECT_EQ(bytes.tail_keys, std::size_t{3 * 8} * 256 * 256);
  EXPECT_EQ(bytes.lengths, 12u);
  EXPECT_EQ(bytes.block_table, 0u);
  const int32_t table[1] = {0};
  shape.block_table = table;
  shape.num_pages = 17;
  ASSERT_TRUE(sparse_kv_cache_bytes(shape, &bytes).is_ok());
  EXPECT_EQ(bytes.key_residuals, std::size_t{17 * 8} * 256 * 128);
  EXPECT_EQ(bytes.block_table, std::size_t{3 * 10 * 4});
  shape.block_size = 64;
  const Status status = sparse_kv_cache_bytes(shape, &bytes);
  EXPECT_NE(status.message().find("block_size must be 128 or 256, got 64"), std::string::npos);
}

}  // namespace
}  // namespace litetopk
