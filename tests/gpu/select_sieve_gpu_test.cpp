// Sieve select beyond the shared case lists: it plans the few-row shapes it is for, and rows whose
// best entries crowd into one segment (its cutoff above the row's pivot, so the last block must
// select over the whole row) or tie at a segment's cutoff still give the exact top k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

SelectPlan sieve_plan(const SelectCase& c) {
  SelectProblem sizes;
  sizes.dtype = c.dtype;
  sizes.batch = c.batch;
  sizes.n = c.n;
  sizes.k = c.k;
  sizes.deterministic = c.deterministic;
  SelectOptions options;
  options.algo = SelectAlgo::kSieve;
  SelectPlan plan;
  const Status s = select_topk_plan(sizes, options, &plan);
  EXPECT_TRUE(s.is_ok()) << c.name << ": " << s.to_string();
  return plan;
}

SelectCase fp32_case(std::string name, int64_t batch, int64_t n, int64_t k, bool deterministic) {
  SelectCase c = select_case(std::move(name), batch, n, k, 23);
  c.deterministic = deterministic;
  return c;
}

// Sets every element of the row's 128-byte chunks c with c % segments == 0 (segment 0's) to
// value(i), i counting those elements.
template <typename Value>
void crowd_segment_zero(const SelectCase& c, int32_t segments, HostRows* rows, Value&& value) {
  constexpr int64_t kChunk = 32;  // fp32 elements per 128-byte chunk
  for (int64_t r = 0; r < c.batch; ++r) {
    auto* row = reinterpret_cast<float*>(rows->scores.data()) + r * c.n;
    int64_t i = 0;
    for (int64_t chunk = 0; chunk * kChunk < c.n; chunk += segments) {
      for (int64_t e = chunk * kChunk; e < std::min(c.n, (chunk + 1) * kChunk); ++e) {
        row[e] = value(i++);
      }
    }
  }
}

// Row r's range as the kernel cuts it (device buffers are 256-byte aligned): the start, the head
// (elements before the first 16-byte-aligned one, read by the last segment) and the end of the
// body of whole 16-byte vectors.
struct RangeCut {
  int64_t start, head, body_end;
};
RangeCut range_cut(const SelectCase& c, const HostRows& rows, int64_t r) {
  const int64_t stride = c.row_stride == 0 ? c.n : c.row_stride;
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t start = c.with_ranges ? rows.starts[static_cast<std::size_t>(r)] : 0;
  const int64_t end = c.with_ranges ? rows.ends[static_cast<std::size_t>(r)] : c.n;
  const int64_t misalign = ((16 - ((r * stride + start) * esize) % 16) % 16) / esize;
  const int64_t head = std::min(misalign, end - start);
  const int64_t per_vector = 16 / esize;
  return {start, head, start + head + (end - start - head) / per_vector * per_vector};
}

// crowd_segment_zero for any dtype, ranges and misaligned rows: every element of segment 0's
// 128-byte chunks of each row's body (chunks counted from the first 16-byte-aligned element of the
// range) becomes value(i) (a float, rounded to the dtype), i counting those elements of the row.
template <typename Value>
void crowd_segment_zero_of_ranges(const SelectCase& c, int32_t segments, HostRows* rows,
                                  Value&& value) {
  const int64_t stride = c.row_stride == 0 ? c.n : c.row_stride;
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t chunk = 128 / esize;
  for (int64_t r = 0; r < c.batch; ++r) {
    const RangeCut cut = range_cut(c, *rows, r);
    void* row = rows->scores.data() + r * stride * esize;
    int64_t i = 0;
    for (int64_t first = cut.start + cut.head; first < cut.body_end; first += segments * chunk) {
      for (int64_t e = first; e < std::min(cut.body_end, first + chunk); ++e) {
        store_score(row, c.dtype, e, encode_score(value(i++), c.dtype));
      }
    }
  }
}

SelectCase sieve_case(std::string name, DType dtype, int64_t batch, int64_t n, int64_t k,
                      bool largest, bool sorted, bool deterministic) {
  SelectCase c = fp32_case(std::move(name), batch, n, k, deterministic);
  c.dtype = dtype;
  c.largest = largest;
  c.sorted = sorted;
  return c;
}

constexpr DType kDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

TEST(SelectSieveGpu, PlansTheFewRowShapes) {
  SKIP_WITHOUT_GPU();
  for (const SelectCase& c : {fp32_case("OneRow128K", 1, 131072, 2048, false),
                              fp32_case("Rows64x128K", 64, 131072, 2048, false),
                              fp32_case("Rows8x1M", 8, 1 << 20, 2048, false),
                              fp32_case("OneRow32K", 1, 32768, 2048, true),
                              fp32_case("Rows32x256KK4096", 32, 262144, 4096, false)}) {
    const SelectPlan plan = sieve_plan(c);
    EXPECT_EQ(plan.algo, SelectAlgo::kSieve) << c.name;
    EXPECT_GT(plan.segments, 1) << c.name;
  }
}

TEST(SelectSieveGpu, BestEntriesInOneSegmentFallBackToTheRow) {
  SKIP_WITHOUT_GPU();
  for (bool deterministic : {false, true}) {
    SelectCase c = fp32_case(deterministic ? "CrowdedDet" : "Crowded", 2, 131072, 2048,
                             deterministic);
    const SelectPlan plan = sieve_plan(c);
    ASSERT_GT(plan.segments, 1);
    HostRows rows = make_rows(c);
    crowd_segment_zero(c, plan.segments, &rows,
                       [](int64_t i) { return 100.0f + static_cast<float>(i % 977); });
    EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
  }
}

TEST(SelectSieveGpu, TiesAtOneSegmentsCutoff) {
  SKIP_WITHOUT_GPU();
  // Segment 0 holds far more copies of one value than it keeps, and 32 entries elsewhere are
  // better (or worse). With k = 32 the survivors decide (k-th best at or above the ties); with
  // k = 512 segment 0's cutoff lies above the survivors' pivot and the row is selected again.
  for (bool deterministic : {false, true}) {
    for (float other : {50.0f, 200.0f}) {
      for (int64_t k : {32, 512}) {
        SelectCase c = fp32_case(std::string(deterministic ? "TiedDet" : "Tied") +
                                     (other > 100.0f ? "Above" : "Below") + std::to_string(k),
                                 1, 131072, k, deterministic);
        const SelectPlan plan = sieve_plan(c);
        ASSERT_GT(plan.segments, 1);
        HostRows rows = make_rows(c);
        crowd_segment_zero(c, plan.segments, &rows, [](int64_t) { return 100.0f; });
        auto* row = reinterpret_cast<float*>(rows.scores.data());
        for (int64_t e = 1000; e < c.n; e += 4099) row[e] = other;  // outside segment 0
        EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
      }
    }
  }
}

TEST(SelectSieveGpu, ShortRangesAndRowsOfNan) {
  SKIP_WITHOUT_GPU();
  SelectCase c = fp32_case("Ranges", 8, 131072, 2048, false);
  c.with_ranges = true;
  EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kSieve));
  c = fp32_case("NanRows", 3, 65536, 1024, true);
  c.pattern = Pattern::kNanInfSprinkled;
  HostRows rows = make_rows(c);
  auto* row = reinterpret_cast<float*>(rows.scores.data()) + c.n;  // row 1: all NaN but 10
  for (int64_t e = 0; e < c.n; ++e) row[e] = e % 6553 == 0 ? static_cast<float>(e) : NAN;
  EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
}

TEST(SelectSieveGpu, MisalignedRangesWithCrowdedSegmentAndBestHeads) {
  SKIP_WITHOUT_GPU();
  // Ranges that start 1, 2, 3, 5 elements into a row (heads read by the last segment) and end
  // before a whole vector (tails), segment 0's chunks crowded, and row 0's head elements the best
  // of the row, in every dtype and both directions.
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool deterministic : {false, true}) {
        for (int64_t pad : {0, 3}) {  // row_stride n + 3: every row starts misaligned too
          SelectCase c = sieve_case("Misaligned" + dtype_tag(dtype) +
                                        flags_tag(largest, false, deterministic) + "Pad" +
                                        std::to_string(pad),
                                    dtype, 4, 131072, 2048, largest, false, deterministic);
          c.row_stride = pad == 0 ? 0 : c.n + pad;
          const SelectPlan plan = sieve_plan(c);
          ASSERT_GT(plan.segments, 1) << c.name;
          HostRows rows = make_rows(c);
          const auto n = static_cast<int32_t>(c.n);
          restrict_to_ranges(&c, &rows, {1, 2, 3, 5}, {n, n - 1, n - 7, n - 3});
          const float sign = largest ? 1.0f : -1.0f;
          crowd_segment_zero_of_ranges(c, plan.segments, &rows, [&](int64_t i) {
            return sign * (100.0f + static_cast<float>(i % 97));
          });
          const RangeCut cut = range_cut(c, rows, 0);
          ASSERT_GT(cut.head, 0) << c.name;
          for (int64_t e = cut.start; e < cut.start + cut.head; ++e) {
            store_score(rows.scores.data(), dtype, e, encode_score(sign * 1000.0f, dtype));
          }
          EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
        }
      }
    }
  }
}

TEST(SelectSieveGpu, TiesAtOneSegmentsCutoffEveryDTypeSorted) {
  SKIP_WITHOUT_GPU();
  // TiesAtOneSegmentsCutoff in every dtype and direction, unsorted and sorted (sorted +
  // deterministic: the ties kept below the cutoff must be the lowest indices).
  for (DType dtype : kDTypes) {
    for (bool largest : {true, false}) {
      for (bool sorted : {false, true}) {
        for (bool deterministic : {false, true}) {
          for (float other : {50.0f, 200.0f}) {
            for (int64_t k : {32, 512}) {
              SelectCase c = sieve_case("Tied" + dtype_tag(dtype) +
                                            flags_tag(largest, sorted, deterministic) +
                                            (other > 100.0f ? "Above" : "Below") +
                                            std::to_string(k),
                                        dtype, 1, 131072, k, largest, sorted, deterministic);
              const SelectPlan plan = sieve_plan(c);
              ASSERT_GT(plan.segments, 1) << c.name;
              HostRows rows = make_rows(c);
              const float sign = largest ? 1.0f : -1.0f;
              crowd_segment_zero_of_ranges(c, plan.segments, &rows,
                                           [&](int64_t) { return sign * 100.0f; });
              for (int64_t e = 1000; e < c.n; e += 4099) {  // outside segment 0
                store_score(rows.scores.data(), dtype, e, encode_score(sign * other, dtype));
              }
              EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
            }
          }
        }
      }
    }
  }
}

TEST(SelectSieveGpu, KNearTheSurvivorLimit) {
  SKIP_WITHOUT_GPU();
  // Shapes whose survivors (segments x capacity) nearly fill the last block's 12288 slots, with
  // random, crowded and tied rows.
  struct Shape {
    int64_t batch, n, k;
  };
  for (const Shape& shape :
       {Shape{1, 65536, 4096}, Shape{1, 131072, 4500}, Shape{2, 262144, 4096}}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (bool deterministic : {false, true}) {
        for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth}) {
          for (bool crowded : {false, true}) {
            SelectCase c = sieve_case("NearLimit" + std::to_string(shape.n) + "K" +
                                          std::to_string(shape.k) + dtype_tag(dtype) +
                                          pattern_name(pattern) + (crowded ? "Crowded" : "") +
                                          (deterministic ? "Det" : ""),
                                      dtype, shape.batch, shape.n, shape.k, true, false,
                                      deterministic);
            c.pattern = pattern;
            const SelectPlan plan = sieve_plan(c);
            ASSERT_GT(plan.segments, 1) << c.name;
            EXPECT_LE(int64_t{plan.segments} * plan.sieve_capacity, 12288) << c.name;
            EXPECT_GE(int64_t{plan.sieve_keep} * plan.segments, shape.k) << c.name;
            HostRows rows = make_rows(c);
            if (crowded) {
              crowd_segment_zero_of_ranges(c, plan.segments, &rows, [](int64_t i) {
                return 100.0f + static_cast<float>(i % 97);
              });
            }
            EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
          }
        }
      }
    }
  }
}

TEST(SelectSieveGpu, RefusesSurvivorsBeyondOneBlock) {
  SKIP_WITHOUT_GPU();
  for (int64_t k : {5000, 8192, 20000}) {
    SelectProblem sizes;
    sizes.batch = 1;
    sizes.n = 131072;
    sizes.k = k;
    SelectOptions options;
    options.algo = SelectAlgo::kSieve;
    SelectPlan plan;
    const Status s = select_topk_plan(sizes, options, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << "k " << k << ": " << s.to_string();
  }
}

TEST(SelectSieveGpu, EmptyBatchPlansAndRuns) {
  SKIP_WITHOUT_GPU();
  // No rows: nothing to keep, so nothing to refuse (grid-radix plans batch 0 the same way).
  SelectCase c = fp32_case("SieveBatch0", 0, 131072, 2048, false);
  const SelectPlan plan = sieve_plan(c);
  EXPECT_EQ(plan.algo, SelectAlgo::kSieve);
  EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kSieve));
}

TEST(SelectSieveGpu, ShortAndLongRangesInOneBatch) {
  SKIP_WITHOUT_GPU();
  // One batch of ranges from empty to whole: rows shorter than one chunk per segment (the last
  // segments hold nothing, or only the head and tail), shorter than k, and long misaligned rows,
  // also with segment 0 crowded.
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (int64_t k : {64, 2048}) {
      for (bool deterministic : {false, true}) {
        for (bool crowded : {false, true}) {
          SelectCase c = sieve_case("Mixed" + dtype_tag(dtype) + "K" + std::to_string(k) +
                                        (crowded ? "Crowded" : "") +
                                        (deterministic ? "Det" : ""),
                                    dtype, 8, 131072, k, true, false, deterministic);
          const SelectPlan plan = sieve_plan(c);
          ASSERT_GT(plan.segments, 1) << c.name;
          HostRows rows = make_rows(c);
          restrict_to_ranges(&c, &rows, {0, 7, 3, 1000, 1, 2, 333, 0},
                     {0, 8, 34, 1100, 4096, 4099, 65869, 131072});
          if (crowded) {
            crowd_segment_zero_of_ranges(c, plan.segments, &rows, [](int64_t i) {
              return 100.0f + static_cast<float>(i % 97);
            });
          }
          EXPECT_TRUE(gpu_matches_reference(c, rows, SelectAlgo::kSieve));
        }
      }
    }
  }
}

TEST(SelectSieveGpu, LongRowPatterns) {
  SKIP_WITHOUT_GPU();
  // The shared patterns at a row long enough for 128 segments (the shared case lists stop at
  // 70001 elements): constant and mostly tied rows tie at every segment's cutoff.
  for (DType dtype : kDTypes) {
    for (bool deterministic : {false, true}) {
      for (Pattern pattern : {Pattern::kTiesAtKth, Pattern::kMostlyTied, Pattern::kConstant,
                              Pattern::kFewDistinct, Pattern::kAscending, Pattern::kDescending,
                              Pattern::kLowMantissaBits, Pattern::kNanInfSprinkled,
                              Pattern::kAllNegInf, Pattern::kDenormals}) {
        SelectCase c = sieve_case(std::string("Long") + pattern_name(pattern) + dtype_tag(dtype) +
                                      (deterministic ? "SortedDet" : ""),
                                  dtype, 1, 131072, 2048, true, deterministic, deterministic);
        c.pattern = pattern;
        const SelectPlan plan = sieve_plan(c);
        ASSERT_GT(plan.segments, 1) << c.name;
        EXPECT_TRUE(gpu_matches_reference(c, make_rows(c), SelectAlgo::kSieve));
      }
    }
  }
}

}  // namespace
}  // namespace litetopk::testing
