// Sieve select beyond the shared case lists: it plans the few-row shapes it is for, and rows whose
// best entries crowd into one segment (its cutoff above the row's pivot, so the last block must
// select over the whole row) or tie at a segment's cutoff still give the exact top k.
#include <gtest/gtest.h>

#include <cstring>
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
  SelectCase c;
  c.name = std::move(name);
  c.batch = batch;
  c.n = n;
  c.k = k;
  c.deterministic = deterministic;
  c.seed = 23;
  return c;
}

void expect_sieve_matches_reference(const SelectCase& c, const HostRows& rows) {
  HostResult ref, got;
  ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok());
  GpuRunOptions options;
  options.algo = SelectAlgo::kSieve;
  const Status s = run_gpu_select(c, rows, options, &got);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(check_selection(c, rows, got.indices.data(), got.values.data(), ref.indices.data(),
                              ref.values.data()));
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
    expect_sieve_matches_reference(c, rows);
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
        expect_sieve_matches_reference(c, rows);
      }
    }
  }
}

TEST(SelectSieveGpu, ShortRangesAndRowsOfNan) {
  SKIP_WITHOUT_GPU();
  SelectCase c = fp32_case("Ranges", 8, 131072, 2048, false);
  c.with_ranges = true;
  expect_sieve_matches_reference(c, make_rows(c));
  c = fp32_case("NanRows", 3, 65536, 1024, true);
  c.pattern = Pattern::kNanInfSprinkled;
  HostRows rows = make_rows(c);
  auto* row = reinterpret_cast<float*>(rows.scores.data()) + c.n;  // row 1: all NaN but 10
  for (int64_t e = 0; e < c.n; ++e) row[e] = e % 6553 == 0 ? static_cast<float>(e) : NAN;
  expect_sieve_matches_reference(c, rows);
}

}  // namespace
}  // namespace litetopk::testing
