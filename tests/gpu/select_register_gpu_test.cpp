// Register select (SelectAlgo::kRegister) beyond the shared case lists: it plans every row of up to
// 16384 entries (8, 16 or 32 keys a thread: lengths around 4096, 8192 and 16384), any k (k > n
// padded with -1), every dtype and mode, and matches the CPU reference there; adversarial rows
// (every testkit pattern, k-th bins crowded at every digit, +-inf and signed zeros, rows with
// fewer than k non-NaN entries, short, empty and misaligned ranges); longer rows are refused as
// kUnsupported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr DType kDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

SelectCase register_case(std::string name, DType dtype, int64_t batch, int64_t n, int64_t k,
                         bool largest, bool det, uint64_t seed = 41) {
  SelectCase c = select_case(std::move(name), batch, n, k, seed);
  c.dtype = dtype;
  c.largest = largest;
  c.sorted = det;
  c.deterministic = det;
  return c;
}

Status plan_register_case(const SelectCase& c, SelectPlan* plan) {
  SelectProblem sizes;
  sizes.dtype = c.dtype;
  sizes.batch = c.batch;
  sizes.n = c.n;
  sizes.row_stride = c.row_stride;
  sizes.k = c.k;
  sizes.sorted = c.sorted;
  sizes.deterministic = c.deterministic;
  SelectOptions options;
  options.algo = SelectAlgo::kRegister;
  return select_topk_plan(sizes, options, plan);
}

::testing::AssertionResult runs_register(const SelectCase& c, const HostRows& rows) {
  SelectPlan plan;
  const Status s = plan_register_case(c, &plan);
  if (!s.is_ok()) return ::testing::AssertionFailure() << c.name << ": " << s.to_string();
  if (plan.algo != SelectAlgo::kRegister) {
    return ::testing::AssertionFailure() << c.name << ": planned " << select_algo_name(plan.algo);
  }
  return gpu_matches_reference(c, rows, SelectAlgo::kRegister);
}

TEST(SelectRegisterGpu, EveryLengthClassDTypeAndMode) {
  SKIP_WITHOUT_GPU();
  // Lengths at each end of the 8, 16 and 32 keys a thread (4096, 8192, 16384) and odd ones;
  // k from 1 to above n; batches from 1 to 300 rows.
  struct Len {
    int64_t batch, n, k;
  };
  const Len kLens[] = {{1, 1, 1},       {3, 5, 64},       {2, 100, 7},      {7, 2047, 2048},
                       {16, 4095, 2048}, {5, 4096, 4096},  {2, 4097, 1},     {300, 4097, 2048},
                       {9, 8191, 512},   {4, 8192, 2048},  {33, 8193, 2048}, {3, 12345, 8192},
                       {128, 16383, 2048}, {2, 16384, 16384}, {6, 16384, 20000}};
  for (const Len& len : kLens) {
    for (DType dtype : kDTypes) {
      for (bool largest : {true, false}) {
        for (bool det : {false, true}) {
          const SelectCase c = register_case(
              "Len" + std::to_string(len.batch) + "x" + std::to_string(len.n) + "K" +
                  std::to_string(len.k) + dtype_tag(dtype) + flags_tag(largest, det, det),
              dtype, len.batch, len.n, len.k, largest, det);
          EXPECT_TRUE(runs_register(c, make_rows(c)));
        }
      }
    }
  }
}

TEST(SelectRegisterGpu, EveryPattern) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kUniform, Pattern::kConstant,
                                Pattern::kTiesAtKth, Pattern::kLowMantissaBits,
                                Pattern::kAscending, Pattern::kDescending,
                                Pattern::kNanInfSprinkled, Pattern::kAllNegInf, Pattern::kAllNan,
                                Pattern::kDenormals, Pattern::kFewDistinct,
                                Pattern::kMostlyTied}) {
          for (int64_t n : {int64_t{4000}, int64_t{16384}}) {
            SelectCase c = register_case(std::string("Pattern") + pattern_name(pattern) +
                                             dtype_tag(dtype) + flags_tag(largest, det, det) +
                                             "N" + std::to_string(n),
                                         dtype, 3, n, 2048, largest, det);
            c.pattern = pattern;
            EXPECT_TRUE(runs_register(c, make_rows(c)));
          }
        }
      }
    }
  }
}

TEST(SelectRegisterGpu, CrowdedBinsAtEveryDigit) {
  SKIP_WITHOUT_GPU();
  // Row r: 500 keys well above, then m keys in [1, 1 + span) with `distinct` values, the rest 0.5:
  // the k-th key's first-digit bin holds m keys, refined by the second (and third) digit, or
  // resolved to ties of equal keys (distinct 1 and 3) that the smallest indices win.
  struct BinRow {
    int64_t m;
    int distinct;
  };
  const BinRow kRows[] = {{15000, 15000}, {6000, 3}, {1549, 1}, {9000, 2048}};
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        SelectCase c = register_case("Crowded" + dtype_tag(dtype) + flags_tag(largest, det, det),
                                     dtype, 4, 16384, 2048, largest, det);
        HostRows rows = make_rows(c);
        const float sign = largest ? 1.0f : -1.0f;
        const float span = dtype == DType::kFloat16 ? 0.03f : 0.2f;
        for (int64_t r = 0; r < c.batch; ++r) {
          const BinRow& b = kRows[r];
          for (int64_t e = 0; e < c.n; ++e) set_score(c, &rows, r, e, sign * 0.5f);
          const float step = span / static_cast<float>(b.distinct);
          for (int64_t j = 0; j < b.m; ++j) {
            const float v = 1.0f + static_cast<float>((j * 7919) % b.distinct) * step;
            set_score(c, &rows, r, (j * 3 + 1) % c.n, sign * v);
          }
          for (int64_t j = 0; j < 500; ++j) {
            set_score(c, &rows, r, (j * 31) % c.n, sign * (8.0f + static_cast<float>(j)));
          }
        }
        EXPECT_TRUE(runs_register(c, rows));
      }
    }
  }
}

TEST(SelectRegisterGpu, InfinitiesSignedZerosAndNan) {
  SKIP_WITHOUT_GPU();
  // Row 0 all +inf, row 1 +inf / -inf alternating, row 2 -inf but 100 +inf, row 3 +-inf and NaN
  // in thirds, row 4 +0 and -0 alternating, row 5 NaN but 10 entries, row 6 NaN but k - 1.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        const int64_t k = 1024;
        SelectCase c = register_case("Special" + dtype_tag(dtype) + flags_tag(largest, det, det),
                                     dtype, 7, 9000, k, largest, det);
        HostRows rows = make_rows(c);
        for (int64_t e = 0; e < c.n; ++e) {
          const float value = static_cast<float>(e % 1000) - 500.0f;
          set_score(c, &rows, 0, e, kInf);
          set_score(c, &rows, 1, e, e % 2 == 0 ? kInf : -kInf);
          set_score(c, &rows, 2, e, e % 89 == 0 && e / 89 < 100 ? kInf : -kInf);
          set_score(c, &rows, 3, e, e % 3 == 0 ? kInf : e % 3 == 1 ? -kInf : NAN);
          set_score(c, &rows, 4, e, e % 2 == 0 ? 0.0f : -0.0f);
          set_score(c, &rows, 5, e, e % 900 == 0 ? value : NAN);
          set_score(c, &rows, 6, e, e % 8 == 0 && e / 8 < k - 1 ? value : NAN);
        }
        EXPECT_TRUE(runs_register(c, rows));
      }
    }
  }
}

TEST(SelectRegisterGpu, ShortEmptyAndMisalignedRanges) {
  SKIP_WITHOUT_GPU();
  // Empty ranges (at the start, the middle and the end), ranges shorter than k, ranges that start
  // 1, 2, 3, 5 elements in (loaded element by element) and end short of a vector, whole rows; with
  // row_stride n + 3 no row after the first starts on 16 bytes. The best entries of each range
  // sit at its ends.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        for (int64_t pad : {0, 3}) {
          SelectCase c = register_case("Ranges" + dtype_tag(dtype) + flags_tag(largest, det, det) +
                                           "Pad" + std::to_string(pad),
                                       dtype, 10, 16384, 2048, largest, det);
          c.row_stride = pad == 0 ? 0 : c.n + pad;
          HostRows rows = make_rows(c);
          const auto n = static_cast<int32_t>(c.n);
          const std::vector<int32_t> starts = {0, 7, 3, n, 1, 2, 3, 5, 333, 0};
          const std::vector<int32_t> ends = {0, 7, 34, n, 4096, n - 1, n - 7, n - 3, 9869, n};
          restrict_to_ranges(&c, &rows, starts, ends);
          const float sign = largest ? 1.0f : -1.0f;
          for (int64_t r = 0; r < c.batch; ++r) {
            const int32_t start = starts[static_cast<std::size_t>(r)];
            const int32_t end = ends[static_cast<std::size_t>(r)];
            for (int32_t e = start; e < end && e < start + 3; ++e) {
              set_score(c, &rows, r, e, sign * 1000.0f);
            }
            for (int32_t e = end - 1; e >= start && e >= end - 3; --e) {
              set_score(c, &rows, r, e, sign * 999.0f);
            }
          }
          EXPECT_TRUE(runs_register(c, rows));
        }
      }
    }
  }
}

TEST(SelectRegisterGpu, RandomRanges) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kDTypes) {
    for (bool det : {false, true}) {
      for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth, Pattern::kConstant}) {
        SelectCase c = register_case(std::string("RandomRanges") + pattern_name(pattern) +
                                         dtype_tag(dtype) + (det ? "SortedDet" : ""),
                                     dtype, 64, 12000, 2048, true, det);
        c.pattern = pattern;
        c.with_ranges = true;
        EXPECT_TRUE(runs_register(c, make_rows(c)));
      }
    }
  }
}

TEST(SelectRegisterGpu, LongerRowsAreUnsupported) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kDTypes) {
    for (int64_t n : {int64_t{16385}, int64_t{1} << 20}) {
      const SelectCase c = register_case("Longer" + dtype_tag(dtype) + "N" + std::to_string(n),
                                         dtype, 1, n, 2048, true, false);
      SelectPlan plan;
      EXPECT_EQ(plan_register_case(c, &plan).code(), StatusCode::kUnsupported) << c.name;
    }
  }
}

}  // namespace
}  // namespace litetopk::testing
