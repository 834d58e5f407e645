// kFast against kReference: every adversarial case, two large shapes, and the speed ratio on the
// DSA shape (printed, never asserted: tests are not benchmarks).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/select_testing.h"

namespace litetopk::testing {
namespace {

// Runs reference and fast (with `threads`) on the case and checks fast against reference.
void expect_fast_matches_reference(const SelectCase& c, int threads) {
  const HostRows rows = make_rows(c);
  HostResult ref, fast;
  const Status ref_status = run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref);
  ASSERT_TRUE(ref_status.is_ok()) << ref_status.to_string();
  const Status fast_status = run_cpu_select(c, rows, CpuSelectAlgo::kFast, threads, &fast);
  ASSERT_TRUE(fast_status.is_ok()) << fast_status.to_string();
  EXPECT_TRUE(check_selection(c, rows, fast.indices.data(), fast.values.data(), ref.indices.data(),
                              ref.values.data()));
}

class FastVsReference : public ::testing::TestWithParam<SelectCase> {};

TEST_P(FastVsReference, Matches) {
  // Alternate 1 and 2 threads over the cases (both paths: inline and with a worker).
  const int threads = GetParam().seed % 2 == 0 ? 2 : 1;
  expect_fast_matches_reference(GetParam(), threads);
}

INSTANTIATE_TEST_SUITE_P(Adversarial, FastVsReference, ::testing::ValuesIn(adversarial_cases()),
                         [](const ::testing::TestParamInfo<SelectCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(FastVsReferenceLarge, OneLongRow) {
  SelectCase c;
  c.name = "one_long_row";
  c.batch = 1;
  c.n = int64_t{1} << 24;
  c.k = 1024;
  c.sorted = true;
  c.seed = 24;
  expect_fast_matches_reference(c, 0);
}

TEST(FastVsReferenceLarge, ManyShortRows) {
  SelectCase c;
  c.name = "many_short_rows";
  c.batch = 16384;
  c.n = 64;
  c.k = 8;
  c.seed = 64;
  expect_fast_matches_reference(c, 0);
  c.dtype = DType::kBFloat16;
  c.largest = false;
  c.with_ranges = true;
  c.deterministic = true;
  expect_fast_matches_reference(c, 0);
}

double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Not a benchmark: prints the ratio kFast / kReference on 64 x 131072, k = 2048, fp32 random
// normal, so a regression is visible in the log. No assertion on time.
TEST(FastVsReferenceSpeed, PrintRatioDsaShape) {
  SelectCase c;
  c.name = "speed_64x131072_k2048";
  c.batch = 64;
  c.n = 131072;
  c.k = 2048;
  c.seed = 2048;
  const HostRows rows = make_rows(c);
  HostResult ref, fast1, fast_all;
  double ref_s = 0;
  double fast1_s = 1e30, fast_all_s = 1e30;
  ref_s = seconds_of(
      [&] { ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok()); });
  for (int rep = 0; rep < 3; ++rep) {
    fast1_s =
        std::min(fast1_s, seconds_of([&] {
                   ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kFast, 1, &fast1).is_ok());
                 }));
    fast_all_s =
        std::min(fast_all_s, seconds_of([&] {
                   ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kFast, 0, &fast_all).is_ok());
                 }));
  }
  EXPECT_TRUE(check_selection(c, rows, fast1.indices.data(), fast1.values.data(),
                              ref.indices.data(), ref.values.data()));
  EXPECT_TRUE(check_selection(c, rows, fast_all.indices.data(), fast_all.values.data(),
                              ref.indices.data(), ref.values.data()));
  const unsigned hw = std::thread::hardware_concurrency();
  std::printf(
      "[ speed    ] 64 x 131072 k=2048 fp32: reference %.1f ms, fast 1 thread %.2f ms (%.1fx), "
      "fast %u threads %.2f ms (%.1fx)\n",
      ref_s * 1e3, fast1_s * 1e3, ref_s / fast1_s, hw, fast_all_s * 1e3, ref_s / fast_all_s);
  RecordProperty("reference_ms", static_cast<int>(ref_s * 1e3));
  RecordProperty("fast_ratio_x10", static_cast<int>(10 * ref_s / fast_all_s));
}

}  // namespace
}  // namespace litetopk::testing
