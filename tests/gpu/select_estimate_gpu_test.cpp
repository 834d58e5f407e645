// Sample-filter's estimated gate and its barrier-free stream against the CPU reference: shapes
// that give a block per row or long split segments (so that the first tile's estimate is taken),
// with inputs that make the estimate land on ties (signed zeros, few distinct values, constant
// rows), overflow the stream (ascending rows, zeros everywhere: the second pass), leave fewer
// than k at or above it (the second pass), unaligned ranges (the head and tail after the
// stream), and split rows whose hot run misleads one segment's estimate (the row again).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/float_bits.h"
#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

// Rows above the device's block slots (two per SM) get a (narrow) block each; rows up to one per
// SM a wide block each.
constexpr int64_t kManyRows = 280;
constexpr int64_t kOneWave = 96;

SelectCase make_case(std::string name, int64_t batch, int64_t n, int64_t k, Pattern pattern,
                     DType dtype, bool largest, bool deterministic) {
  SelectCase c = select_case(std::move(name), batch, n, k, 23);
  c.pattern = pattern;
  c.dtype = dtype;
  c.largest = largest;
  c.deterministic = deterministic;
  return c;
}

TEST(SelectGpuEstimate, PatternsThroughTheEstimateAndTheSecondPass) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<SelectCase> cases = {
      make_case("ConstantBf16", kManyRows, 14000, 500, Pattern::kConstant, DType::kBFloat16, true,
                false),
      make_case("AscendingLargestBf16", kManyRows, 14000, 500, Pattern::kAscending,
                DType::kBFloat16, true, false),
      make_case("FewDistinctF16Det", kManyRows, 14000, 500, Pattern::kFewDistinct,
                DType::kFloat16, true, true),
      make_case("DenormalsF16SmallestDet", kManyRows, 14000, 500, Pattern::kDenormals,
                DType::kFloat16, false, true),
      make_case("DenormalsBf16", kManyRows, 14000, 300, Pattern::kDenormals, DType::kBFloat16,
                true, false),
      make_case("SplitFewDistinctBf16Det", 8, 400000, 1024, Pattern::kFewDistinct,
                DType::kBFloat16, true, true),
      make_case("SplitAscendingF32", 8, 400000, 1024, Pattern::kAscending, DType::kFloat32, true,
                false),
      make_case("K8192TiesDetF16", 140, 40000, 8192, Pattern::kTiesAtKth, DType::kFloat16, true,
                true),
  };
  SelectCase ranges = make_case("RangesStrideBf16", kManyRows, 20011, 700, Pattern::kRandomNormal,
                                DType::kBFloat16, true, false);
  ranges.row_stride = 20019;
  ranges.with_ranges = true;
  cases.push_back(ranges);
  SelectCase ranges_det = make_case("RangesStrideF32SmallestDet", kManyRows, 20003, 700,
                                    Pattern::kNanInfSprinkled, DType::kFloat32, false, true);
  ranges_det.row_stride = 20005;
  ranges_det.with_ranges = true;
  cases.push_back(ranges_det);
  for (const SelectCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kSampleFilter));
  }
}

// The special values of a dtype as raw bits.
struct SpecialBits {
  uint32_t pos_zero, neg_zero, pos_denormal, neg_denormal, one, neg_one, pos_inf, neg_inf, nan,
      neg_nan;
};

SpecialBits special_bits(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x3f80u, 0xbf80u, 0x7f80u, 0xff80u, 0x7fc0u,
              0xffc1u};
    case DType::kFloat16:
      return {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x3c00u, 0xbc00u, 0x7c00u, 0xfc00u, 0x7e00u,
              0xfe01u};
    case DType::kFloat32: break;
  }
  return {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x3f800000u, 0xbf800000u,
          0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u};
}

// Rows whose k-th best lies among +0 and -0 (which rank apart: -0 below +0): per mille `zeros`
// of each zero, and 1% each of +inf, 1, the smallest positive denormal, its negative, NaN of
// either sign and -inf, the rest -1 (all mirrored for smallest-first). With few zeros the
// estimate lands on a zero and the float test admits the other zero too (extras below the
// estimate that its count must not take); with many the stream overflows.
HostRows signed_zero_rows(const SelectCase& c, int zeros) {
  HostRows rows = make_rows(c);
  const SpecialBits b = special_bits(c.dtype);
  const std::size_t size = dtype_size(c.dtype);
  const int64_t stride = c.row_stride > 0 ? c.row_stride : c.n;
  std::mt19937_64 rng(c.seed * 977 + static_cast<uint64_t>(zeros));
  for (int64_t i = 0; i < c.batch * stride; ++i) {
    const int u = static_cast<int>(rng() % 1000);
    uint32_t v = b.neg_one;
    if (u < 10) {
      v = b.pos_inf;
    } else if (u < 20) {
      v = b.one;
    } else if (u < 30) {
      v = b.pos_denormal;
    } else if (u < 30 + zeros) {
      v = b.pos_zero;
    } else if (u < 30 + 2 * zeros) {
      v = b.neg_zero;
    } else if (u < 40 + 2 * zeros) {
      v = b.neg_denormal;
    } else if (u < 50 + 2 * zeros) {
      v = b.nan;
    } else if (u < 60 + 2 * zeros) {
      v = b.neg_nan;
    } else if (u < 70 + 2 * zeros) {
      v = b.neg_inf;
    }
    const bool is_nan = v == b.nan || v == b.neg_nan;
    if (!c.largest && !is_nan) v ^= b.neg_zero;  // the sign bit: mirrored
    std::memcpy(rows.scores.data() + static_cast<std::size_t>(i) * size, &v, size);
  }
  return rows;
}

TEST(SelectGpuEstimate, SignedZerosAtTheEstimate) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  struct Variant {
    DType dtype;
    int zeros;  // per mille of each sign
    bool largest, deterministic;
  };
  const Variant variants[] = {
      {DType::kBFloat16, 80, true, false},  {DType::kBFloat16, 80, false, true},
      {DType::kBFloat16, 300, true, true},  {DType::kBFloat16, 300, false, false},
      {DType::kFloat16, 80, true, true},    {DType::kFloat16, 80, false, false},
      {DType::kFloat32, 80, true, false},   {DType::kFloat32, 300, false, true},
  };
  for (const Variant& v : variants) {
    const SelectCase c =
        make_case(std::string("SignedZeros") + dtype_tag(v.dtype) +
                      std::to_string(v.zeros) + (v.largest ? "Largest" : "Smallest") +
                      (v.deterministic ? "Det" : ""),
                  kManyRows, 12000, 400, Pattern::kRandomNormal, v.dtype, v.largest,
                  v.deterministic);
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(gpu_matches_reference(c, signed_zero_rows(c, v.zeros), SelectAlgo::kSampleFilter));
  }
}

// The estimate comes from the first tile alone: rows where that tile misleads it or gives none.
// Descending rows put the row's best entries in it (the estimate is too high: fewer than k reach
// it, the second pass), ascending rows its worst (too low: the stream overflows); a finite range
// wider than the largest float (no estimate, the exact path), and a first tile mostly of NaN
// (its few numbers set the estimate, or are fewer than its rank: none) follow.
HostRows first_tile_rows(const SelectCase& c, int variant) {
  HostRows rows = make_rows(c);
  if (c.dtype != DType::kFloat32) return rows;
  const int64_t stride = c.row_stride > 0 ? c.row_stride : c.n;
  auto* values = reinterpret_cast<float*>(rows.scores.data());
  std::mt19937_64 rng(c.seed * 31 + static_cast<uint64_t>(variant));
  for (int64_t r = 0; r < c.batch; ++r) {
    for (int64_t i = 0; i < 8192 && i < c.n; ++i) {  // the first tile of either block shape
      float& v = values[r * stride + i];
      if (variant == 0) {
        v = (i % 2 == 0 ? 3.0e38f : -3.0e38f) * static_cast<float>(rng() % 1000) / 1000.0f;
      } else if (rng() % 100 < 97) {
        v = std::nanf("");
      }
    }
  }
  return rows;
}

TEST(SelectGpuEstimate, FirstTilesThatMisleadTheEstimate) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t batch : {kManyRows, kOneWave}) {
    const std::string rows = batch == kManyRows ? "Narrow" : "Wide";
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (Pattern pattern : {Pattern::kDescending, Pattern::kAscending}) {
        const SelectCase c = make_case(rows + pattern_name(pattern) + dtype_tag(dtype), batch,
                                       70000, 2048, pattern, dtype, true, false);
        SCOPED_TRACE(c.name);
        EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kSampleFilter));
      }
    }
    for (int variant : {0, 1}) {
      for (bool largest : {true, false}) {
        const SelectCase c = make_case(rows + (variant == 0 ? "HugeSpread" : "MostlyNan") +
                                           (largest ? "Largest" : "Smallest"),
                                       batch, 70000, 1000, Pattern::kRandomNormal,
                                       DType::kFloat32, largest, !largest);
        SCOPED_TRACE(c.name);
        EXPECT_TRUE(
            gpu_matches_reference(c, first_tile_rows(c, variant), SelectAlgo::kSampleFilter));
      }
    }
    // The k = 8192 buffer of each block shape, ties at the k-th.
    const SelectCase large = make_case(rows + "K8192TiesF32", batch, 60000, 8192,
                                       Pattern::kTiesAtKth, DType::kFloat32, true, false);
    SCOPED_TRACE(large.name);
    EXPECT_TRUE(gpu_matches_reference(large, make_rows(large), SelectAlgo::kSampleFilter));
  }
}

// Split rows (1, 16 and 32 rows of 131072 in wide blocks: 8, 8 and 4 segments) whose hot run
// of scores lies in a different 8192-score tile of each row: the segment that samples that tile
// first sets an estimate far above the row's k-th, drops what lies below it, and the row's last
// block must find fewer than k at or above that cut and stream the row again. A run of 1024
// (fewer than k) and a run of 16384 (more) above the rest, in fp32 (the run's values distinct)
// and bf16 (ties at the k-th), on whole rows and on ranges (rows that fill only some segments),
// and at k = 8192.
HostRows hot_run_rows(const SelectCase& c, int64_t run) {
  HostRows rows = make_rows(c);
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  for (int64_t r = 0; r < c.batch; ++r) {
    void* row = rows.scores.data() + r * c.n * esize;
    const int64_t begin = c.with_ranges ? rows.starts[static_cast<std::size_t>(r)] : 0;
    const int64_t end = c.with_ranges ? rows.ends[static_cast<std::size_t>(r)] : c.n;
    const int64_t start = (r * 8192 + 4096) % (c.n - run);
    for (int64_t i = std::max(start, begin); i < std::min(start + run, end); ++i) {
      const float v = decode_score(load_score(row, c.dtype, i), c.dtype);
      store_score(row, c.dtype, i, encode_score(v + (c.largest ? 8.0f : -8.0f), c.dtype));
    }
  }
  return rows;
}

TEST(SelectGpuEstimate, SplitRowsWithAHotRunInOneSegment) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t batch : {1, 16, 32}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (bool ranges : {false, true}) {
        if (ranges && batch != 16) continue;
        for (int64_t run : {1024, 16384}) {
          for (bool largest : {true, false}) {
            SelectCase c = make_case("HotRun" + std::to_string(batch) + "x" + std::to_string(run) +
                                         dtype_tag(dtype) + (ranges ? "Ranges" : "") +
                                         (largest ? "Largest" : "Smallest"),
                                     batch, 131072, 2048, Pattern::kRandomNormal, dtype, largest,
                                     false);
            c.with_ranges = ranges;
            SCOPED_TRACE(c.name);
            const HostRows rows = hot_run_rows(c, run);
            EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSampleFilter));
            EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kAuto));
          }
        }
      }
    }
  }
  // The k = 8192 buffer: a run of 16384 in 16 rows, the row read again through the large buffer.
  const SelectCase large = make_case("HotRun16x16384K8192", 16, 131072, 8192,
                                     Pattern::kRandomNormal, DType::kFloat32, true, false);
  SCOPED_TRACE(large.name);
  EXPECT_TRUE(gpu_matches_reference(large, hot_run_rows(large, 16384), SelectAlgo::kSampleFilter));
}

}  // namespace
}  // namespace litetopk::testing
