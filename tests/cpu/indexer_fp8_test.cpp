// fp8 e4m3 (torch.float8_e4m3fn) conversions of litetopk/fp8_e4m3.h, checked exhaustively: every
// byte decoded against the format's formula, every finite byte round-tripped, every rounding
// midpoint, and a sweep of float bit patterns against a nearest-value search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "litetopk/float_bits.h"
#include "litetopk/fp8_e4m3.h"

namespace litetopk {
namespace {

using fp8::e4m3_to_float;
using fp8::float_to_e4m3;
using float_bits::f32_bits;
using float_bits::f32_from_bits;

// The format's definition, in double: (-1)^s * 2^(e-7) * (1 + m/8) for e > 0, (-1)^s * 2^-6 * m/8
// for e = 0; S.1111.111 is NaN.
double formula(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -magnitude : magnitude;
}

TEST(Fp8E4m3, DecodesEveryByteByTheFormula) {
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    const double expected = formula(byte);
    const float got = e4m3_to_float(byte);
    if (std::isnan(expected)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got)) << "byte " << b;
      EXPECT_EQ(std::signbit(got), b >= 128) << "byte " << b << ": NaN keeps the sign";
      EXPECT_TRUE(fp8::e4m3_is_nan(byte));
      continue;
    }
    EXPECT_FALSE(fp8::e4m3_is_nan(byte)) << "byte " << b;
    EXPECT_EQ(static_cast<double>(got), expected) << "byte " << b;
    EXPECT_EQ(std::signbit(got), b >= 128) << "byte " << b << " (signed zero included)";
  }
  EXPECT_EQ(nans, 2);  // 0x7f and 0xff only: e4m3fn has no infinities
}

TEST(Fp8E4m3, KnownValues) {
  EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x40), 2.0f);
  EXPECT_EQ(e4m3_to_float(0xb8), -1.0f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));   // smallest normal
  EXPECT_EQ(e4m3_to_float(0x77), 240.0f);                 // 2^7 * 1.875
  EXPECT_EQ(e4m3_to_float(0x78), 256.0f);                 // exponent 15 is finite except m = 7
  EXPECT_EQ(float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3(-2.0f), 0xc0);
  EXPECT_EQ(float_to_e4m3(0.3f), 0x2a);  // 0.3 -> 0.3125 = 2^-2 * 1.25
}

TEST(Fp8E4m3, EncodeInvertsDecodeForEveryFiniteByte) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if (fp8::e4m3_is_nan(byte)) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(byte)), byte) << "byte " << b;
  }
}

TEST(Fp8E4m3, NanStaysNanWithItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float_to_e4m3(nan), 0x7f);
  EXPECT_EQ(float_to_e4m3(-nan), 0xff);
  EXPECT_EQ(float_to_e4m3(f32_from_bits(0x7f800001u)), 0x7f);  // signalling payload
  EXPECT_EQ(float_to_e4m3(f32_from_bits(0xffbfffffu)), 0xff);
}

TEST(Fp8E4m3, SaturatesToMaxFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {448.0f, 448.0001f, 463.9f, 464.0f, 480.0f, 1e6f, 3.4e38f, inf}) {
    EXPECT_EQ(float_to_e4m3(v), 0x7e) << v;
    EXPECT_EQ(float_to_e4m3(-v), 0xfe) << -v;
  }
  EXPECT_EQ(float_to_e4m3(447.99997f), 0x7e);  // rounds up to 448 (nearest)
  EXPECT_EQ(float_to_e4m3(432.0f), 0x7e);      // midpoint 416|448: ties to even (0x7e)
  EXPECT_EQ(float_to_e4m3(431.99997f), 0x7d);  // just below it: 416
}

TEST(Fp8E4m3, TinyValuesRoundToSignedZeroOrSmallestSubnormal) {
  const float half_min = std::ldexp(1.0f, -10);
  EXPECT_EQ(float_to_e4m3(half_min), 0x00);  // tie between 0 and 2^-9: even is 0
  EXPECT_EQ(float_to_e4m3(-half_min), 0x80);
  EXPECT_EQ(float_to_e4m3(std::nextafter(half_min, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(-std::nextafter(half_min, 1.0f)), 0x81);
  EXPECT_EQ(float_to_e4m3(std::nextafter(half_min, 0.0f)), 0x00);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::min()), 0x00);
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
}

// Between every two adjacent finite values: the midpoint goes to the even byte (last mantissa bit
// 0), one float ulp either side goes to the nearer value.
TEST(Fp8E4m3, RoundsMidpointsToEvenAndNeighboursToNearest) {
  for (int b = 0; b < 0x7e; ++b) {
    for (int sign : {0, 0x80}) {
      const auto lo = static_cast<uint8_t>(b | sign);
      const auto hi = static_cast<uint8_t>((b + 1) | sign);
      const float a = e4m3_to_float(lo), c = e4m3_to_float(hi);
      const float mid = (a + c) / 2.0f;  // exact: both have few significant bits
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + c) / 2.0);
      const uint8_t even = (lo & 1) == 0 ? lo : hi;
      EXPECT_EQ(float_to_e4m3(mid), even) << "midpoint of bytes " << b << ", " << b + 1;
      const float toward_a = std::nextafter(mid, a), toward_c = std::nextafter(mid, c);
      EXPECT_EQ(float_to_e4m3(toward_a), lo) << "just below the midpoint of " << b;
      EXPECT_EQ(float_to_e4m3(toward_c), hi) << "just above the midpoint of " << b;
    }
  }
}

// Nearest finite e4m3 (ties to the even byte), saturating, by search over the sorted table.
uint8_t nearest_by_search(float x) {
  static const std::vector<float> positives = [] {
    std::vector<float> v;
    for (int b = 0; b <= 0x7e; ++b) v.push_back(e4m3_to_float(static_cast<uint8_t>(b)));
    return v;
  }();
  if (std::isnan(x)) return std::signbit(x) ? 0xff : 0x7f;
  const auto sign = static_cast<uint8_t>(std::signbit(x) ? 0x80 : 0);
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7e;
  const auto it = std::upper_bound(positives.begin(), positives.end(), a,
                                   [](double value, float entry) { return value < entry; });
  const auto hi = static_cast<int>(it - positives.begin());  // positives[hi - 1] <= a < [hi]
  const int lo = hi - 1;
  const double below = a - positives[static_cast<std::size_t>(lo)];
  const double above = positives[static_cast<std::size_t>(hi)] - a;
  int pick = below < above ? lo : hi;
  if (below == above) pick = (lo & 1) == 0 ? lo : hi;
  return static_cast<uint8_t>(sign | pick);
}

TEST(Fp8E4m3, EncodeMatchesNearestValueSearchOverFloatBitPatterns) {
  // Every 257th bit pattern of all 2^32 (about 16.7M floats), which covers every binade densely.
  int64_t checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 257) {
    const float x = f32_from_bits(static_cast<uint32_t>(bits));
    const uint8_t expected = nearest_by_search(x);
    const uint8_t got = float_to_e4m3(x);
    if (got != expected) {
      FAIL() << "float bits 0x" << std::hex << bits << " (" << x << "): expected byte 0x"
             << int{expected} << ", got 0x" << int{got};
    }
    ++checked;
  }
  EXPECT_GT(checked, 16000000);
}

TEST(Fp8E4m3, EncodeMatchesSearchNearEveryRepresentableValue) {
  // +-4 ulps around every finite value and every midpoint.
  for (int b = 0; b <= 0x7e; ++b) {
    const float v = e4m3_to_float(static_cast<uint8_t>(b));
    const float next = b < 0x7e ? e4m3_to_float(static_cast<uint8_t>(b + 1)) : 512.0f;
    for (float center : {v, (v + next) / 2.0f}) {
      for (int sign : {1, -1}) {
        const uint32_t base = f32_bits(static_cast<float>(sign) * center);
        for (int d = -4; d <= 4; ++d) {
          const auto candidate = static_cast<uint32_t>(static_cast<int64_t>(base) + d);
          const float x = f32_from_bits(candidate);
          if (std::signbit(x) != (sign < 0)) continue;  // crossed zero
          EXPECT_EQ(float_to_e4m3(x), nearest_by_search(x)) << "x = " << x;
        }
      }
    }
  }
}

}  // namespace
}  // namespace litetopk
