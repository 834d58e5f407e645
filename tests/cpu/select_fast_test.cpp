// kFast against kReference: every adversarial case and three large shapes (the DSA shape among
// them). No timing here: see the DsaShape test for the CLI commands that measure the speed.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/select_testing.h"

namespace litetopk::testing {
namespace {

// Runs reference once and fast with each of `thread_counts` on the case and checks fast against
// reference.
void expect_fast_matches_reference(const SelectCase& c, std::initializer_list<int> thread_counts) {
  const HostRows rows = make_rows(c);
  HostResult ref;
  const Status ref_status = run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref);
  ASSERT_TRUE(ref_status.is_ok()) << ref_status.to_string();
  for (int threads : thread_counts) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    HostResult fast;
    const Status fast_status = run_cpu_select(c, rows, CpuSelectAlgo::kFast, threads, &fast);
    ASSERT_TRUE(fast_status.is_ok()) << fast_status.to_string();
    EXPECT_TRUE(check_selection(c, rows, fast.indices.data(), fast.values.data(),
                                ref.indices.data(), ref.values.data()));
  }
}

class FastVsReference : public ::testing::TestWithParam<SelectCase> {};

TEST_P(FastVsReference, Matches) {
  // Alternate 1 and 2 threads over the cases (both paths: inline and with a worker).
  const int threads = GetParam().seed % 2 == 0 ? 2 : 1;
  expect_fast_matches_reference(GetParam(), {threads});
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
  expect_fast_matches_reference(c, {0});
}

// Fewer rows than threads: each row is split into segments filtered in parallel and merged. Every
// pattern and mode, with ranges (segments of uneven rows) and a k that spans several segments.
TEST(FastVsReferenceLarge, SplitRowsEveryPatternAndMode) {
  for (Pattern pattern : {Pattern::kRandomNormal, Pattern::kTiesAtKth, Pattern::kAscending,
                          Pattern::kDescending, Pattern::kConstant, Pattern::kNanInfSprinkled,
                          Pattern::kFewDistinct}) {
    for (int mode = 0; mode < 8; ++mode) {  // bits: smallest, sorted, deterministic
      SelectCase c;
      c.name = std::string("split_") + pattern_name(pattern) + "_" + std::to_string(mode);
      c.batch = 2;
      c.n = 300001;
      c.k = mode % 2 == 0 ? 1000 : 70000;
      c.pattern = pattern;
      c.largest = (mode & 1) == 0;
      c.sorted = (mode & 2) != 0;
      c.deterministic = (mode & 4) != 0;
      c.with_ranges = mode >= 4;
      c.seed = static_cast<uint64_t>(mode) + 100;
      SCOPED_TRACE(c.name);
      expect_fast_matches_reference(c, {8});
    }
  }
}

TEST(FastVsReferenceLarge, ManyShortRows) {
  SelectCase c;
  c.name = "many_short_rows";
  c.batch = 16384;
  c.n = 64;
  c.k = 8;
  c.seed = 64;
  expect_fast_matches_reference(c, {0});
  c.dtype = DType::kBFloat16;
  c.largest = false;
  c.with_ranges = true;
  c.deterministic = true;
  expect_fast_matches_reference(c, {0});
}

// The DSA shape, 64 x 131072, k = 2048, fp32 random normal, with 1 thread and with every hardware
// thread. Correctness only: tests are not benchmarks (DESIGN.md: no timed tests). The speed of
// fast vs reference on this shape comes from the CLI (median of --iters runs, in ms):
//   build/release/litetopk select --device cpu --algo cpu --batch 64 --n 131072 --k 2048 --bench
//   build/release/litetopk select --device cpu --algo cpu-reference --batch 64 --n 131072
//       --k 2048 --bench --iters 5
// and side by side, with the ratio, from `build/release/litetopk demo --device cpu`.
TEST(FastVsReferenceLarge, DsaShape) {
  SelectCase c;
  c.name = "dsa_64x131072_k2048";
  c.batch = 64;
  c.n = 131072;
  c.k = 2048;
  c.seed = 2048;
  expect_fast_matches_reference(c, {1, 0});
}

}  // namespace
}  // namespace litetopk::testing
