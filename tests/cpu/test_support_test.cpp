// The test support itself: dtype conversions, the input patterns, the case list, and that
// check_selection catches broken results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "common/select_testing.h"

namespace litetopk::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FloatBits, Float16KnownValues) {
  EXPECT_EQ(f16_bits_from_f32(1.0f), 0x3c00);
  EXPECT_EQ(f16_bits_from_f32(-2.0f), 0xc000);
  EXPECT_EQ(f16_bits_from_f32(0.1f), 0x2e66);
  EXPECT_EQ(f16_bits_from_f32(65504.0f), 0x7bff);
  EXPECT_EQ(f16_bits_from_f32(65519.0f), 0x7bff);
  EXPECT_EQ(f16_bits_from_f32(65520.0f), 0x7c00);  // half an ulp past the max: rounds to inf
  EXPECT_EQ(f16_bits_from_f32(kInf), 0x7c00);
  EXPECT_EQ(f16_bits_from_f32(-kInf), 0xfc00);
  EXPECT_EQ(f16_bits_from_f32(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(f16_bits_from_f32(std::ldexp(1.0f, -25)), 0x0000);         // tie, to even (zero)
  EXPECT_EQ(f16_bits_from_f32(std::ldexp(3.0f, -25)), 0x0002);         // tie, to even
  EXPECT_EQ(f16_bits_from_f32(std::ldexp(1023.0f, -24)), 0x03ff);      // largest subnormal
  EXPECT_EQ(f16_bits_from_f32(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(f16_bits_from_f32(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, to even
  EXPECT_EQ(f16_bits_from_f32(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, to even (up)
  EXPECT_EQ(f16_bits_from_f32(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(decode_score(f16_bits_from_f32(std::nanf("")), DType::kFloat16)));
}

TEST(FloatBits, BFloat16KnownValues) {
  EXPECT_EQ(bf16_bits_from_f32(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits_from_f32(-3.0f), 0xc040);
  EXPECT_EQ(bf16_bits_from_f32(f32_from_bits(0x3f808000u)), 0x3f80);  // tie, to even
  EXPECT_EQ(bf16_bits_from_f32(f32_from_bits(0x3f818000u)), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(bf16_bits_from_f32(f32_from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_bits_from_f32(f32_from_bits(0x7f7fffffu)), 0x7f80);  // float max rounds to inf
  EXPECT_EQ(bf16_bits_from_f32(kInf), 0x7f80);
  EXPECT_TRUE(
      std::isnan(decode_score(bf16_bits_from_f32(f32_from_bits(0x7f800001u)), DType::kBFloat16)));
}

TEST(FloatBits, Every16BitValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if (!std::isnan(decode_score(bits, DType::kFloat16))) {
      ASSERT_EQ(f16_bits_from_f32(f32_from_f16_bits(h)), h) << bits;
    } else {
      ASSERT_TRUE(std::isnan(f32_from_f16_bits(h))) << bits;
    }
    if (!std::isnan(decode_score(bits, DType::kBFloat16))) {
      ASSERT_EQ(bf16_bits_from_f32(f32_from_bf16_bits(h)), h) << bits;
    } else {
      ASSERT_TRUE(std::isnan(f32_from_bf16_bits(h))) << bits;
    }
  }
}

TEST(Cases, NamesAreUniqueAndGtestSafe) {
  const std::vector<SelectCase> cases = adversarial_cases();
  std::set<std::string> names;
  std::set<int> patterns_seen;
  for (const SelectCase& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_FALSE(c.name.empty());
    for (char ch : c.name) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name;
    }
    patterns_seen.insert(static_cast<int>(c.pattern));
  }
  EXPECT_EQ(patterns_seen.size(), 13u);
  EXPECT_GT(cases.size(), 13u * 3 * 2 * 4);
}

TEST(Cases, CoverTheRequiredShapes) {
  bool k1 = false, k_eq_n = false, k_gt_n = false, ranges = false, stride = false, odd = false;
  int64_t max_n = 0;
  for (const SelectCase& c : adversarial_cases()) {
    k1 |= c.k == 1;
    k_eq_n |= c.k == c.n;
    k_gt_n |= c.k > c.n && c.n > 0;
    ranges |= c.with_ranges;
    stride |= c.row_stride > c.n;
    odd |= c.n % 2 == 1 && c.n > 1000;
    max_n = std::max(max_n, c.n);
  }
  EXPECT_TRUE(k1 && k_eq_n && k_gt_n && ranges && stride && odd);
  EXPECT_GE(max_n, 65536);
}

// Counts (NaN, subnormal or zero, +inf, -inf) over the in-range part of every row.
struct Census {
  int64_t total = 0, nan = 0, subnormal_or_zero = 0, zero = 0, pos_inf = 0, neg_inf = 0;
};

Census census(const SelectCase& c, const HostRows& rows) {
  Census out;
  const int64_t stride = c.row_stride == 0 ? c.n : c.row_stride;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t start = c.with_ranges ? rows.starts[b] : 0;
    const int64_t end = c.with_ranges ? rows.ends[b] : c.n;
    for (int64_t i = start; i < end; ++i) {
      const uint32_t raw = load_score(rows.scores.data(), c.dtype, b * stride + i);
      const float v = decode_score(raw, c.dtype);
      ++out.total;
      out.nan += std::isnan(v);
      // A zero exponent field: subnormal or zero in the dtype's own format.
      const uint32_t exponent_mask = c.dtype == DType::kFloat32    ? 0x7f800000u
                                     : c.dtype == DType::kBFloat16 ? 0x7f80u
                                                                   : 0x7c00u;
      out.subnormal_or_zero += (raw & exponent_mask) == 0;
      out.zero += v == 0.0f;
      out.pos_inf += v == kInf;
      out.neg_inf += v == -kInf;
    }
  }
  return out;
}

SelectCase simple_case(Pattern pattern, DType dtype) {
  SelectCase c;
  c.name = "census";
  c.dtype = dtype;
  c.batch = 3;
  c.n = 2000;
  c.k = 50;
  c.pattern = pattern;
  return c;
}

TEST(Patterns, HaveTheirAdvertisedContent) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Census s = census(simple_case(Pattern::kAllNan, dtype),
                      make_rows(simple_case(Pattern::kAllNan, dtype)));
    EXPECT_EQ(s.nan, s.total);
    s = census(simple_case(Pattern::kAllNegInf, dtype),
               make_rows(simple_case(Pattern::kAllNegInf, dtype)));
    EXPECT_EQ(s.neg_inf, s.total);
    s = census(simple_case(Pattern::kDenormals, dtype),
               make_rows(simple_case(Pattern::kDenormals, dtype)));
    EXPECT_EQ(s.subnormal_or_zero, s.total);
    EXPECT_LT(s.zero, s.total / 5);
    s = census(simple_case(Pattern::kNanInfSprinkled, dtype),
               make_rows(simple_case(Pattern::kNanInfSprinkled, dtype)));
    EXPECT_GT(s.nan, s.total / 20);
    EXPECT_GT(s.pos_inf, s.total / 50);
    EXPECT_GT(s.neg_inf, s.total / 50);

    // Low mantissa bits: per row, all entries share everything above the low bits.
    const SelectCase low = simple_case(Pattern::kLowMantissaBits, dtype);
    const HostRows low_rows = make_rows(low);
    const uint32_t high_mask = dtype == DType::kFloat32 ? ~0x3ffu : (0xffffu & ~0x7u);
    for (int64_t b = 0; b < low.batch; ++b) {
      const uint32_t first = load_score(low_rows.scores.data(), dtype, b * low.n) & high_mask;
      std::set<uint32_t> distinct;
      for (int64_t i = 0; i < low.n; ++i) {
        const uint32_t raw = load_score(low_rows.scores.data(), dtype, b * low.n + i);
        ASSERT_EQ(raw & high_mask, first);
        distinct.insert(raw);
      }
      EXPECT_GT(distinct.size(), 4u);
    }

    // Ties at the k-th: the k-th best value occurs both inside and outside the top k.
    const SelectCase ties = simple_case(Pattern::kTiesAtKth, dtype);
    const HostRows tie_rows = make_rows(ties);
    for (int64_t b = 0; b < ties.batch; ++b) {
      std::vector<float> row;
      for (int64_t i = 0; i < ties.n; ++i) {
        row.push_back(
            decode_score(load_score(tie_rows.scores.data(), dtype, b * ties.n + i), dtype));
      }
      std::sort(row.rbegin(), row.rend());
      EXPECT_EQ(row[ties.k - 1], row[ties.k]);
      EXPECT_EQ(row[ties.k - 1], row[ties.k / 2 + 1]);
      EXPECT_GT(row[0], row[ties.k - 1]);
    }
  }
}

TEST(Patterns, RangesIncludeEmptyShortAndFull) {
  SelectCase c = simple_case(Pattern::kRandomNormal, DType::kFloat32);
  c.batch = 50;
  c.with_ranges = true;
  const HostRows rows = make_rows(c);
  ASSERT_EQ(rows.starts.size(), 50u);
  int empty = 0, shorter_than_k = 0, full = 0;
  for (std::size_t b = 0; b < 50; ++b) {
    ASSERT_LE(0, rows.starts[b]);
    ASSERT_LE(rows.starts[b], rows.ends[b]);
    ASSERT_LE(rows.ends[b], c.n);
    const int32_t len = rows.ends[b] - rows.starts[b];
    empty += len == 0;
    shorter_than_k += len > 0 && len < c.k;
    full += len == c.n;
  }
  EXPECT_GT(empty, 0);
  EXPECT_GT(shorter_than_k, 0);
  EXPECT_GT(full, 0);
}

// kMostlyTied: the k-th best is the tie value, 90% of the row holds it, fewer than k are better.
TEST(Patterns, MostlyTiedHidesTheKthInOneValue) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (bool largest : {true, false}) {
      SelectCase c = simple_case(Pattern::kMostlyTied, dtype);
      c.largest = largest;
      const HostRows rows = make_rows(c);
      const float tie = largest ? 8.0f : -8.0f;
      for (int64_t b = 0; b < c.batch; ++b) {
        int64_t ties = 0, better = 0;
        for (int64_t i = 0; i < c.n; ++i) {
          const float v = decode_score(load_score(rows.scores.data(), dtype, b * c.n + i), dtype);
          ties += v == tie;
          better += largest ? v > tie : v < tie;
        }
        EXPECT_GE(ties, c.n * 9 / 10) << dtype_name(dtype);
        EXPECT_EQ(better, (c.k - 1) / 2) << dtype_name(dtype);
      }
    }
  }
}

TEST(Patterns, SameSeedSameRows) {
  SelectCase c = simple_case(Pattern::kNanInfSprinkled, DType::kBFloat16);
  c.with_ranges = true;
  const HostRows a = make_rows(c), b = make_rows(c);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.starts, b.starts);
  c.seed = 2;
  EXPECT_NE(make_rows(c).scores, a.scores);
}

// check_selection must reject each kind of broken result.
class CheckSelectionCatches : public ::testing::Test {
 protected:
  void SetUp() override {
    c.name = "catch";
    c.batch = 2;
    c.n = 300;
    c.k = 20;
    c.pattern = Pattern::kFewDistinct;  // many ties
    c.sorted = true;
    rows = make_rows(c);
    ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok());
    got = ref;
    ASSERT_TRUE(check_ok());
  }
  ::testing::AssertionResult check_ok() {
    return check_selection(c, rows, got.indices.data(), got.values.data(), ref.indices.data(),
                           ref.values.data());
  }
  // Index of a row-0 entry with the same key as slot `slot` that the reference did not pick.
  int32_t unpicked_tie(int64_t slot) {
    const uint32_t raw = load_score(rows.scores.data(), c.dtype, ref.indices[slot]);
    for (int32_t i = 0; i < c.n; ++i) {
      if (load_score(rows.scores.data(), c.dtype, i) == raw &&
          std::find(ref.indices.begin(), ref.indices.begin() + c.k, i) ==
              ref.indices.begin() + c.k) {
        return i;
      }
    }
    return -1;
  }

  SelectCase c;
  HostRows rows;
  HostResult ref, got;
};

TEST_F(CheckSelectionCatches, Duplicate) {
  got.indices[1] = got.indices[0];
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, MissingPadding) {
  got.indices[c.k - 1] = -1;
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, OutOfRange) {
  got.indices[0] = static_cast<int32_t>(c.n);
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, WrongValue) {
  store_score(got.values.data(), c.dtype, 3, f32_bits(1234.5f));
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, WorseEntry) {
  // Replace the last slot of row 0 with the row's worst entry.
  int32_t worst = 0;
  for (int32_t i = 0; i < c.n; ++i) {
    if (decode_score(load_score(rows.scores.data(), c.dtype, i), c.dtype) <
        decode_score(load_score(rows.scores.data(), c.dtype, worst), c.dtype)) {
      worst = i;
    }
  }
  got.indices[c.k - 1] = worst;
  store_score(got.values.data(), c.dtype, c.k - 1, load_score(rows.scores.data(), c.dtype, worst));
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, TieSwapOnlyMattersWhenDeterministic) {
  const int32_t other = unpicked_tie(c.k - 1);
  ASSERT_GE(other, 0);
  got.indices[c.k - 1] = other;
  c.sorted = false;
  EXPECT_TRUE(check_ok());  // any member of the tie is fine
  c.deterministic = true;
  EXPECT_FALSE(check_ok());
}

TEST_F(CheckSelectionCatches, Unsorted) {
  std::reverse(got.indices.begin(), got.indices.begin() + c.k);
  std::vector<uint8_t> values = got.values;
  for (int64_t s = 0; s < c.k; ++s) {
    store_score(got.values.data(), c.dtype, s, load_score(values.data(), c.dtype, c.k - 1 - s));
  }
  EXPECT_FALSE(check_ok());
  c.sorted = false;
  EXPECT_TRUE(check_ok());
}

TEST_F(CheckSelectionCatches, PaddingValueNotNan) {
  SelectCase few = c;
  few.k = 400;  // more than n: padding
  HostResult a;
  ASSERT_TRUE(run_cpu_select(few, rows, CpuSelectAlgo::kReference, 1, &a).is_ok());
  HostResult b = a;
  store_score(b.values.data(), c.dtype, few.k - 1, f32_bits(0.0f));
  EXPECT_TRUE(check_selection(few, rows, a.indices.data(), a.values.data(), a.indices.data(),
                              a.values.data()));
  EXPECT_FALSE(check_selection(few, rows, b.indices.data(), b.values.data(), a.indices.data(),
                               a.values.data()));
}

}  // namespace
}  // namespace litetopk::testing
