// The order-preserving keys of formats/score_keys.h: round trips and order, for every 16-bit pattern
// and many float32 ones.
//
// Note on zeros: -0.0 and +0.0 compare equal as floats but get different keys, with -0.0 < +0.0
// (one below the other). Selection therefore treats them as distinct values: with `largest`, +0.0
// is preferred over -0.0 regardless of index. This is acceptable (both are correct answers under
// IEEE equality, and the order is a fixed, documented total order) and keeps keys a bijection on
// non-NaN bit patterns, so values are rebuilt exactly from keys.
#include "formats/score_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/float_bits.h"

namespace litetopk::testing {
namespace {

struct Format16 {
  const char* name;
  bool (*is_nan)(uint32_t);
  uint32_t (*key)(uint32_t, bool);
  float (*to_float)(uint16_t);
};

const Format16 kFormats16[] = {
    {"float16", [](uint32_t b) { return (b & 0x7fffu) > 0x7c00u; }, keys::key_from_f16_bits,
     f32_from_f16_bits},
    {"bfloat16", [](uint32_t b) { return (b & 0x7fffu) > 0x7f80u; }, keys::key_from_bf16_bits,
     f32_from_bf16_bits},
};

TEST(ScoreKeys, Every16BitPatternRoundTripsAndOrders) {
  for (const Format16& f : kFormats16) {
    SCOPED_TRACE(f.name);
    std::vector<uint32_t> valid;
    for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
      const uint32_t largest_key = f.key(bits, true);
      const uint32_t smallest_key = f.key(bits, false);
      if (f.is_nan(bits)) {
        ASSERT_EQ(largest_key, 0u) << bits;
        ASSERT_EQ(smallest_key, 0u) << bits;
        continue;
      }
      ASSERT_GE(largest_key, 1u) << bits;
      ASSERT_LE(largest_key, 0xffffu) << bits;
      ASSERT_GE(smallest_key, 1u) << bits;
      ASSERT_LE(smallest_key, 0xffffu) << bits;
      ASSERT_EQ(keys::bits16_from_key(largest_key, true), bits);
      ASSERT_EQ(keys::bits16_from_key(smallest_key, false), bits);
      // Smallest-first is exactly the reversed order.
      ASSERT_EQ(smallest_key, ~largest_key & 0xffffu) << bits;
      valid.push_back(bits);
    }
    std::sort(valid.begin(), valid.end(),
              [&](uint32_t a, uint32_t b) { return f.key(a, true) < f.key(b, true); });
    for (std::size_t i = 1; i < valid.size(); ++i) {
      const uint32_t lo = valid[i - 1], hi = valid[i];
      ASSERT_LT(f.key(lo, true), f.key(hi, true));  // distinct keys
      const float a = f.to_float(static_cast<uint16_t>(lo));
      const float b = f.to_float(static_cast<uint16_t>(hi));
      if (a == b) {
        // Only the two zeros compare equal: -0.0 gets the smaller key.
        ASSERT_EQ(a, 0.0f);
        ASSERT_TRUE(std::signbit(a)) << lo;
        ASSERT_FALSE(std::signbit(b)) << hi;
      } else {
        ASSERT_LT(a, b) << lo << " " << hi;
      }
    }
    // Every non-NaN pattern has a key, and -inf/+inf are the extremes.
    EXPECT_TRUE(std::isinf(f.to_float(static_cast<uint16_t>(valid.front()))));
    EXPECT_LT(f.to_float(static_cast<uint16_t>(valid.front())), 0.0f);
    EXPECT_TRUE(std::isinf(f.to_float(static_cast<uint16_t>(valid.back()))));
    EXPECT_GT(f.to_float(static_cast<uint16_t>(valid.back())), 0.0f);
  }
}

TEST(ScoreKeys, Float32RoundTripAndOrder) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> bits = {
      f32_bits(0.0f),  f32_bits(-0.0f), f32_bits(kInf), f32_bits(-kInf), f32_bits(1.0f),
      f32_bits(-1.0f), 0x00000001u,     0x80000001u,    0x007fffffu,     0x807fffffu,
      0x00800000u,     0x80800000u,     0x7f7fffffu,    0xff7fffffu,     0x7f800001u,
      0xff800001u,     0x7fc00000u,     0xffc00000u,    0x7fffffffu,     0xffffffffu,
  };
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  for (int i = 0; i < 200000; ++i) bits.push_back(f32_bits(normal(rng)));

  std::vector<uint32_t> valid;
  for (uint32_t b : bits) {
    const float value = f32_from_bits(b);
    const uint32_t largest_key = keys::key_from_f32_bits(b, true);
    const uint32_t smallest_key = keys::key_from_f32_bits(b, false);
    if (std::isnan(value)) {
      ASSERT_EQ(largest_key, 0u) << b;
      ASSERT_EQ(smallest_key, 0u) << b;
      continue;
    }
    ASSERT_GE(largest_key, 1u) << b;
    ASSERT_GE(smallest_key, 1u) << b;
    ASSERT_EQ(keys::f32_bits_from_key(largest_key, true), b);
    ASSERT_EQ(keys::f32_bits_from_key(smallest_key, false), b);
    ASSERT_EQ(smallest_key, ~largest_key) << b;
    valid.push_back(b);
  }
  std::sort(valid.begin(), valid.end(), [](uint32_t a, uint32_t b) {
    return keys::key_from_f32_bits(a, true) < keys::key_from_f32_bits(b, true);
  });
  for (std::size_t i = 1; i < valid.size(); ++i) {
    const float a = f32_from_bits(valid[i - 1]);
    const float b = f32_from_bits(valid[i]);
    if (valid[i - 1] == valid[i]) continue;  // duplicates among the random patterns
    ASSERT_LT(keys::key_from_f32_bits(valid[i - 1], true), keys::key_from_f32_bits(valid[i], true));
    if (a == b) {
      ASSERT_EQ(a, 0.0f);
      ASSERT_TRUE(std::signbit(a));
      ASSERT_FALSE(std::signbit(b));
    } else {
      ASSERT_LT(a, b) << valid[i - 1] << " " << valid[i];
    }
  }
  // -0.0 < +0.0 in key order (see the note at the top of this file).
  EXPECT_LT(keys::key_from_f32_bits(f32_bits(-0.0f), true),
            keys::key_from_f32_bits(f32_bits(0.0f), true));
  EXPECT_GT(keys::key_from_f32_bits(f32_bits(-0.0f), false),
            keys::key_from_f32_bits(f32_bits(0.0f), false));
  // The gate that admits every valid score drops NaN and keeps -inf (largest) / +inf (smallest).
  EXPECT_LT(keys::make_composite(keys::key_from_f32_bits(0x7fc00000u, true), 0),
            keys::kAdmitAllValid);
  EXPECT_GE(keys::make_composite(keys::key_from_f32_bits(f32_bits(-kInf), true), 0x7fffffffu),
            keys::kAdmitAllValid);
  EXPECT_GE(keys::make_composite(keys::key_from_f32_bits(f32_bits(kInf), false), 0x7fffffffu),
            keys::kAdmitAllValid);
}

TEST(ScoreKeys, CompositeOrderAndIndex) {
  EXPECT_EQ(keys::composite_index(keys::kEmptyComposite), -1);
  for (uint32_t index : {0u, 1u, 17u, 65535u, 0x7fffffffu}) {
    for (uint32_t key : {1u, 2u, 0x8000u, 0xff800000u}) {
      const uint64_t c = keys::make_composite(key, index);
      EXPECT_EQ(keys::composite_index(c), static_cast<int32_t>(index));
      EXPECT_EQ(keys::composite_key(c), key);
      EXPECT_NE(c, keys::kEmptyComposite);
    }
  }
  // Same key: the smaller index is the larger (better) composite; a better key always wins.
  EXPECT_GT(keys::make_composite(5, 3), keys::make_composite(5, 4));
  EXPECT_GT(keys::make_composite(6, 0x7fffffffu), keys::make_composite(5, 0));
}

}  // namespace
}  // namespace litetopk::testing
