// Cluster select (SelectAlgo::kCluster) beyond the shared case lists: it plans every row of up to
// 512K entries, from 1 to 16 rows, any k (k > n padded with -1), in every dtype and mode, and
// matches the CPU reference there; adversarial rows (ties everywhere, NaN-heavy rows, +-inf, rows
// with fewer than k non-NaN entries, short and empty ranges, rows that are not 16-byte aligned)
// at lengths that split over several CTAs; and longer rows plan or are refused as kUnsupported,
// never another error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <ostream>
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

// The case's sizes and flags planned with kCluster (no addresses).
Status plan_cluster_case(const SelectCase& c, SelectPlan* plan) {
  SelectProblem sizes;
  sizes.dtype = c.dtype;
  sizes.batch = c.batch;
  sizes.n = c.n;
  sizes.row_stride = c.row_stride;
  sizes.k = c.k;
  sizes.largest = c.largest;
  sizes.sorted = c.sorted;
  sizes.deterministic = c.deterministic;
  SelectOptions options;
  options.algo = SelectAlgo::kCluster;
  return select_topk_plan(sizes, options, plan);
}

// The case plans with kCluster (not refused) as kCluster.
::testing::AssertionResult plans_cluster(const SelectCase& c) {
  SelectPlan plan;
  const Status s = plan_cluster_case(c, &plan);
  if (!s.is_ok()) return ::testing::AssertionFailure() << c.name << ": " << s.to_string();
  if (plan.algo != SelectAlgo::kCluster) {
    return ::testing::AssertionFailure() << c.name << ": planned " << select_algo_name(plan.algo);
  }
  return ::testing::AssertionSuccess();
}

SelectCase cluster_case(std::string name, DType dtype, int64_t batch, int64_t n, int64_t k,
                        bool largest, bool sorted, bool deterministic, uint64_t seed = 31) {
  SelectCase c = select_case(std::move(name), batch, n, k, seed);
  c.dtype = dtype;
  c.largest = largest;
  c.sorted = sorted;
  c.deterministic = deterministic;
  return c;
}

// ---- (a) The shapes it is for: 1-16 rows of 1 to 512K entries, any k ----

struct Shape {
  int64_t batch, n, k;
  DType dtype;
  bool largest, sorted, deterministic;
};

// Every batch (1, 2, 7, 16), n (1 .. 524288, odd and one past a power of two), k (1, 64, 2048,
// 8192, and k > n), dtype and flag at least once, without the full product.
constexpr DType F32 = DType::kFloat32, BF16 = DType::kBFloat16, F16 = DType::kFloat16;
constexpr Shape kShapes[] = {
    {1, 1, 1, F32, true, false, false},
    {1, 1, 64, BF16, false, true, true},  // k > n
    {16, 1, 1, F16, false, true, false},
    {2, 5, 1, F16, true, true, false},
    {7, 5, 64, F32, false, false, true},  // k > n
    {16, 5, 8192, F16, true, false, true},  // k > n
    {16, 100, 64, F32, true, true, true},
    {2, 100, 2048, BF16, true, false, false},  // k > n
    {1, 2047, 1, F16, false, false, true},
    {7, 2047, 2048, F32, true, true, false},  // k > n
    {1, 2048, 2048, F32, true, false, false},  // k == n
    {16, 2048, 64, BF16, false, true, false},
    {2, 2048, 8192, F32, true, true, true},  // k > n
    {2, 4097, 2048, F16, true, false, true},
    {1, 4097, 8192, F32, false, true, true},  // k > n
    {7, 4097, 64, BF16, true, false, false},
    {16, 4097, 1, F32, true, true, true},
    {1, 32768, 8192, F32, true, true, true},
    {16, 32768, 2048, F16, false, false, false},
    {2, 32768, 1, BF16, true, true, false},
    {7, 32768, 2048, F32, true, true, false},
    {1, 131072, 2048, F32, true, false, false},
    {1, 131072, 2048, BF16, true, false, true},
    {7, 131072, 64, F16, false, true, true},
    {16, 131072, 8192, F32, true, false, true},
    {2, 131072, 1, F32, false, true, true},
    {2, 131075, 2048, F32, false, true, false},
    {1, 131075, 1, F16, true, false, false},
    {7, 131075, 8192, BF16, true, true, true},
    {1, 262144, 2048, F32, true, true, true},
    {2, 262144, 64, BF16, false, false, false},
    {16, 262144, 2048, F16, true, false, true},
    {7, 262144, 1, F32, false, false, true},
    {1, 262144, 8192, F16, true, true, false},
    {1, 524288, 2048, F32, true, false, false},
    {1, 524288, 8192, BF16, false, true, true},
    {2, 524288, 64, F16, true, true, false},
    {16, 524288, 2048, F32, true, false, true},
    {7, 524288, 1, BF16, true, false, false},
    {2, 524288, 8192, F32, false, false, false},
};

std::string shape_name(const Shape& s) {
  return "B" + std::to_string(s.batch) + "N" + std::to_string(s.n) + "K" + std::to_string(s.k) +
         dtype_tag(s.dtype) + flags_tag(s.largest, s.sorted, s.deterministic);
}

// So that gtest prints a shape by its name.
void PrintTo(const Shape& s, std::ostream* os) { *os << shape_name(s); }

class SelectClusterShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(SelectClusterShapes, PlansAndMatchesReference) {
  SKIP_WITHOUT_GPU();
  const Shape& s = GetParam();
  const SelectCase c = cluster_case(shape_name(s), s.dtype, s.batch, s.n, s.k, s.largest,
                                    s.sorted, s.deterministic);
  ASSERT_TRUE(plans_cluster(c));
  EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
}

std::string shape_case_name(const ::testing::TestParamInfo<Shape>& param_info) {
  return shape_name(param_info.param);
}

INSTANTIATE_TEST_SUITE_P(Cluster, SelectClusterShapes, ::testing::ValuesIn(kShapes),
                         shape_case_name);

TEST(SelectClusterGpu, EmptyBatchPlansAndRuns) {
  SKIP_WITHOUT_GPU();
  const SelectCase c = cluster_case("ClusterBatch0", F32, 0, 131072, 2048, true, false, false);
  ASSERT_TRUE(plans_cluster(c));
  EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
}

TEST(SelectClusterGpu, MoreRowsThanAGridHoldsAreRefused) {
  SKIP_WITHOUT_GPU();
  // A row of one entry is one CTA: 2^31 rows are one block past a grid's x dimension (planned
  // only, nothing is allocated).
  SelectPlan plan;
  const SelectCase fits = cluster_case("GridFull", F32, (int64_t{1} << 31) - 1, 1, 1, true, false,
                                       false);
  EXPECT_TRUE(plan_cluster_case(fits, &plan).is_ok());
  const SelectCase past = cluster_case("GridPast", F32, int64_t{1} << 31, 1, 1, true, false, false);
  EXPECT_EQ(plan_cluster_case(past, &plan).code(), StatusCode::kUnsupported);
}

// ---- (b) Adversarial rows ----

TEST(SelectClusterGpu, EveryPatternEveryDType) {
  SKIP_WITHOUT_GPU();
  // The testkit's patterns (ties everywhere, constant and mostly tied rows, NaN-heavy rows, +-inf,
  // subnormals, ...) at a row of several CTAs with an odd tail, in both directions, unsorted and
  // sorted + deterministic.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kUniform, Pattern::kConstant,
                                Pattern::kTiesAtKth, Pattern::kLowMantissaBits,
                                Pattern::kAscending, Pattern::kDescending,
                                Pattern::kNanInfSprinkled, Pattern::kAllNegInf, Pattern::kAllNan,
                                Pattern::kDenormals, Pattern::kFewDistinct,
                                Pattern::kMostlyTied}) {
          SelectCase c = cluster_case(std::string("Pattern") + pattern_name(pattern) +
                                          dtype_tag(dtype) + flags_tag(largest, det, det),
                                      dtype, 2, 131075, 2048, largest, det, det);
          c.pattern = pattern;
          ASSERT_TRUE(plans_cluster(c));
          EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
        }
      }
    }
  }
}

TEST(SelectClusterGpu, TiedPatternsAtTheLongestRows) {
  SKIP_WITHOUT_GPU();
  // The patterns whose k-th bin is crowded, at the cluster's widest rows and its largest k.
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (bool det : {false, true}) {
      for (Pattern pattern : {Pattern::kConstant, Pattern::kTiesAtKth, Pattern::kMostlyTied,
                              Pattern::kFewDistinct, Pattern::kLowMantissaBits,
                              Pattern::kNanInfSprinkled, Pattern::kAllNan, Pattern::kAllNegInf}) {
        const bool largest = !det;
        SelectCase c = cluster_case(std::string("Long") + pattern_name(pattern) +
                                        dtype_tag(dtype) + flags_tag(largest, det, det),
                                    dtype, 2, 524288, 8192, largest, det, det);
        c.pattern = pattern;
        ASSERT_TRUE(plans_cluster(c));
        EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
      }
    }
  }
}

TEST(SelectClusterGpu, GatheredBinAroundItsCapacity) {
  SKIP_WITHOUT_GPU();
  // Rows whose k-th key sits in one first-digit bin (in [1, 1.2) or [1, 1.03), negated
  // smallest-first) of m keys, with 1000 keys above it (8 and up) and the rest below (0.5 or
  // NaN): the cluster gathers the bin's keys when m <= 6144 and merges digit by digit beyond.
  // Row 0: m = 6144 spread over every CTA; row 1: m = 6145 (no gather); row 2: m = 6144 inside
  // one CTA's slice; row 3: m = 3000 of 8 distinct values (ties at the pivot); row 4: m = 1049,
  // the bin all but taken; row 5: m = 5000 with a NaN every 7 entries.
  struct BinRow {
    int64_t m;
    bool one_slice;
    int distinct;
    bool nans;
  };
  const BinRow kRows[] = {{6144, false, 4096, false}, {6145, false, 4096, false},
                          {6144, true, 4096, false},  {3000, false, 8, false},
                          {1049, false, 4096, false}, {5000, false, 4096, true}};
  constexpr int64_t kAbove = 1000;
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        const int64_t batch = static_cast<int64_t>(std::size(kRows));
        SelectCase c = cluster_case("GatherBin" + dtype_tag(dtype) + flags_tag(largest, det, det),
                                    dtype, batch, 131072, 2048, largest, det, det);
        ASSERT_TRUE(plans_cluster(c));
        HostRows rows = make_rows(c);
        const float sign = largest ? 1.0f : -1.0f;
        // A first digit spans [1, 1.25) of fp32 and bf16 keys, [1, 1 + 1/32) of fp16 ones.
        const float span = dtype == DType::kFloat16 ? 0.03f : 0.2f;
        for (int64_t r = 0; r < batch; ++r) {
          const BinRow& b = kRows[r];
          for (int64_t e = 0; e < c.n; ++e) {
            set_score(c, &rows, r, e, b.nans && e % 7 == 3 ? NAN : sign * 0.5f);
          }
          // The bin's keys: at a stride over the row, or packed into the slice at 5/16 of it.
          const int64_t stride = b.one_slice ? 1 : (c.n - 1) / b.m;
          const int64_t start = b.one_slice ? c.n * 5 / 16 : 0;
          const float step = span / static_cast<float>(b.distinct);
          for (int64_t j = 0; j < b.m; ++j) {
            const float v = 1.0f + static_cast<float>(j % b.distinct) * step;
            set_score(c, &rows, r, start + j * stride, sign * v);
          }
          // The keys above: past the packed ones, or one after the spread ones.
          for (int64_t j = 0; j < kAbove; ++j) {
            set_score(c, &rows, r, b.one_slice ? start + b.m + j : j * stride + 1,
                      sign * (8.0f + static_cast<float>(j)));
          }
        }
        EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kCluster));
      }
    }
  }
}

TEST(SelectClusterGpu, InfinitiesAndSignedZeros) {
  SKIP_WITHOUT_GPU();
  // Row 0 all +inf, row 1 alternating +inf / -inf, row 2 all -inf but 100 +inf, row 3 +-inf and
  // NaN in thirds, row 4 +0 and -0 alternating: ties at the extremes of the key space.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        SelectCase c = cluster_case("Inf" + dtype_tag(dtype) + flags_tag(largest, det, det),
                                    dtype, 5, 131072, 2048, largest, det, det);
        HostRows rows = make_rows(c);
        for (int64_t e = 0; e < c.n; ++e) {
          set_score(c, &rows, 0, e, kInf);
          set_score(c, &rows, 1, e, e % 2 == 0 ? kInf : -kInf);
          set_score(c, &rows, 2, e, e % 1297 == 0 && e / 1297 < 100 ? kInf : -kInf);
          set_score(c, &rows, 3, e, e % 3 == 0 ? kInf : e % 3 == 1 ? -kInf : NAN);
          set_score(c, &rows, 4, e, e % 2 == 0 ? 0.0f : -0.0f);
        }
        EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kCluster));
      }
    }
  }
}

TEST(SelectClusterGpu, FewerThanKEntriesAreNotNan) {
  SKIP_WITHOUT_GPU();
  // Row 0 all NaN but 10 entries, row 1 all NaN, row 2 NaN but k - 1 entries, row 3 NaN but k:
  // the result is the non-NaN entries, then -1.
  for (DType dtype : kDTypes) {
    for (bool det : {false, true}) {
      for (int64_t n : {int64_t{4097}, int64_t{131072}, int64_t{524288}}) {
        const int64_t k = 2048;
        SelectCase c = cluster_case("NanRows" + dtype_tag(dtype) + "N" + std::to_string(n) +
                                        (det ? "SortedDet" : ""),
                                    dtype, 4, n, k, true, det, det);
        HostRows rows = make_rows(c);
        const int64_t spacing = n / k;
        for (int64_t e = 0; e < n; ++e) {
          const float value = static_cast<float>(e % 1000) - 500.0f;
          set_score(c, &rows, 0, e, e % (n / 10) == 0 && e / (n / 10) < 10 ? value : NAN);
          set_score(c, &rows, 1, e, e % 2 == 0 ? NAN : -NAN);
          set_score(c, &rows, 2, e, e % spacing == 0 && e / spacing < k - 1 ? value : NAN);
          set_score(c, &rows, 3, e, e % spacing == 0 && e / spacing < k ? value : NAN);
        }
        EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kCluster));
      }
    }
  }
}

TEST(SelectClusterGpu, RandomRanges) {
  SKIP_WITHOUT_GPU();
  // The testkit's random ranges (empty ones, ones shorter than k) over rows of several CTAs.
  for (DType dtype : kDTypes) {
    for (bool det : {false, true}) {
      for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth, Pattern::kConstant}) {
        SelectCase c = cluster_case(std::string("Ranges") + pattern_name(pattern) +
                                        dtype_tag(dtype) + (det ? "SortedDet" : ""),
                                    dtype, 16, 262144, 2048, true, det, det);
        c.pattern = pattern;
        c.with_ranges = true;
        EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
      }
    }
  }
}

TEST(SelectClusterGpu, ShortEmptyAndMisalignedRanges) {
  SKIP_WITHOUT_GPU();
  // One batch of ranges from empty to whole: empty ones (at the start, the middle and the end of
  // the row), ranges shorter than k, ranges that start 1, 2, 3, 5 elements in and end short of a
  // 16-byte vector, and ones that span the row; with row_stride n + 3 every row also starts
  // misaligned. The best entries of each range sit at its first and last positions.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool det : {false, true}) {
        for (int64_t pad : {0, 3}) {
          for (int64_t k : {64, 2048}) {
            SelectCase c = cluster_case("Short" + dtype_tag(dtype) + flags_tag(largest, det, det) +
                                            "Pad" + std::to_string(pad) + "K" + std::to_string(k),
                                        dtype, 10, 131072, k, largest, det, det);
            c.row_stride = pad == 0 ? 0 : c.n + pad;
            ASSERT_TRUE(plans_cluster(c));
            HostRows rows = make_rows(c);
            const auto n = static_cast<int32_t>(c.n);
            const std::vector<int32_t> starts = {0, 7, 3, n, 1, 2, 3, 5, 333, 0};
            const std::vector<int32_t> ends = {0, 7, 34, n, 4096, n - 1, n - 7, n - 3, 65869, n};
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
            EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kCluster));
          }
        }
      }
    }
  }
}

TEST(SelectClusterGpu, UnalignedStrideEveryLength) {
  SKIP_WITHOUT_GPU();
  // row_stride n + 3: no row after the first starts 16-byte aligned, at lengths from one CTA's
  // slice to the whole cluster, k from 1 to above n.
  struct Len {
    int64_t n, k;
  };
  for (DType dtype : kDTypes) {
    for (const Len& len : {Len{5, 64}, Len{2047, 2048}, Len{4097, 64}, Len{131075, 2048},
                           Len{524285, 8192}}) {
      for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth}) {
        const bool det = pattern == Pattern::kTiesAtKth;
        SelectCase c = cluster_case(std::string("Stride") + dtype_tag(dtype) + "N" +
                                        std::to_string(len.n) + pattern_name(pattern),
                                    dtype, 3, len.n, len.k, true, det, det);
        c.row_stride = c.n + 3;
        c.pattern = pattern;
        ASSERT_TRUE(plans_cluster(c));
        EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
      }
    }
  }
}

// ---- (c) Longer rows: planned, or refused as kUnsupported; never another error ----

TEST(SelectClusterGpu, LongerRowsPlanOrAreUnsupported) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kDTypes) {
    for (int64_t n : {int64_t{524289}, int64_t{1} << 20}) {
      const SelectCase c = cluster_case("Longer" + dtype_tag(dtype) + "N" + std::to_string(n),
                                        dtype, 1, n, 2048, true, false, false);
      SelectPlan plan;
      const Status s = plan_cluster_case(c, &plan);
      if (s.code() == StatusCode::kUnsupported) continue;
      ASSERT_TRUE(s.is_ok()) << c.name << ": " << s.to_string();
      // Planned: then it must run it exactly.
      EXPECT_EQ(plan.algo, SelectAlgo::kCluster) << c.name;
      EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kCluster));
    }
  }
}

}  // namespace
}  // namespace litetopk::testing
