// GPU select_topk against the CPU reference: every adversarial case with every algorithm, shapes
// that exercise the multi-block paths, compaction storms, CUDA graph capture, and bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/select_testing.h"
#include "gpu/gpu_select_runner.h"

namespace litetopk::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

struct AlgoCase {
  SelectCase c;
  SelectAlgo algo;
};

void PrintTo(const AlgoCase& a, std::ostream* os) { *os << a.c.name << "_" << select_algo_name(a.algo); }

std::string algo_tag(SelectAlgo algo) {
  switch (algo) {
    case SelectAlgo::kRadix: return "Radix";
    case SelectAlgo::kSampleFilter: return "SampleFilter";
    case SelectAlgo::kGridRadix: return "GridRadix";
    case SelectAlgo::kSieve: return "Sieve";
    case SelectAlgo::kCluster: return "Cluster";
    case SelectAlgo::kRegister: return "Register";
    case SelectAlgo::kAuto: break;
  }
  return "Auto";
}

std::vector<AlgoCase> with_algos(const std::vector<SelectCase>& cases) {
  std::vector<AlgoCase> out;
  for (const SelectCase& c : cases) {
    for (SelectAlgo algo : {SelectAlgo::kRadix, SelectAlgo::kSampleFilter, SelectAlgo::kGridRadix,
                            SelectAlgo::kSieve, SelectAlgo::kCluster, SelectAlgo::kRegister,
                            SelectAlgo::kAuto}) {
      if (algo == SelectAlgo::kSampleFilter && c.k > kSampleFilterMaxK) continue;
      // grid-radix holds every block of the call at once: few rows only.
      if (algo == SelectAlgo::kGridRadix && c.batch > 64) continue;
      out.push_back({c, algo});
    }
  }
  return out;
}

void expect_matches_reference(const SelectCase& c, SelectAlgo algo) {
  const HostRows rows = make_rows(c);
  if (algo == SelectAlgo::kSieve || algo == SelectAlgo::kCluster ||
      algo == SelectAlgo::kRegister) {
    // Sieve refuses, by design, rows whose survivors would not fit one block, the cluster
    // rows that do not fit its shared memory, register rows of more than 16K entries (select_sieve_gpu_test and select_cluster_gpu_test
    // check that they plan the shapes they are for).
    SelectOptions options;
    options.algo = algo;
    SelectPlan plan;
    const Status planned =
        select_topk_plan(make_problem(c, rows, nullptr, nullptr), options, &plan);
    if (planned.code() == StatusCode::kUnsupported) GTEST_SKIP() << planned.to_string();
  }
  EXPECT_TRUE(gpu_matches_reference(c, rows, algo));
}

std::string algo_case_name(const ::testing::TestParamInfo<AlgoCase>& param_info) {
  return param_info.param.c.name + "_" + algo_tag(param_info.param.algo);
}

class SelectGpuAdversarial : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(SelectGpuAdversarial, MatchesReference) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference(GetParam().c, GetParam().algo);
}

INSTANTIATE_TEST_SUITE_P(All, SelectGpuAdversarial, ::testing::ValuesIn(with_algos(adversarial_cases())),
                         algo_case_name);

// Small cases for compute-sanitizer (memcheck, racecheck): one block per row and several.
std::vector<SelectCase> small_cases() {
  std::vector<SelectCase> cases;
  auto add = [&](std::string name, int64_t batch, int64_t n, int64_t k, Pattern pattern,
                 bool deterministic, bool sorted, DType dtype) {
    SelectCase c = select_case(std::move(name), batch, n, k, 7);
    c.pattern = pattern;
    c.deterministic = deterministic;
    c.sorted = sorted;
    c.dtype = dtype;
    cases.push_back(c);
  };
  add("OneBlockNormal", 3, 5000, 100, Pattern::kRandomNormal, false, false, DType::kFloat32);
  add("OneBlockTiesDet", 2, 20000, 300, Pattern::kTiesAtKth, true, true, DType::kBFloat16);
  add("MultiBlockNormal", 1, 70001, 64, Pattern::kRandomNormal, false, false, DType::kFloat32);
  add("MultiBlockConstant", 1, 40000, 50, Pattern::kConstant, true, false, DType::kFloat16);
  add("MultiBlockAscending", 1, 65537, 700, Pattern::kAscending, false, true, DType::kFloat32);
  return cases;
}

class SelectGpuSmall : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(SelectGpuSmall, MatchesReference) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference(GetParam().c, GetParam().algo);
}

INSTANTIATE_TEST_SUITE_P(Sanitizer, SelectGpuSmall, ::testing::ValuesIn(with_algos(small_cases())),
                         algo_case_name);

// Large shapes: many rows, huge rows, k at the buffer limits, compaction storms.
std::vector<SelectCase> large_cases() {
  std::vector<SelectCase> cases;
  auto add = [&](std::string name, int64_t batch, int64_t n, int64_t k, Pattern pattern,
                 bool deterministic, DType dtype = DType::kFloat32, bool largest = true) {
    SelectCase c = select_case(std::move(name), batch, n, k, 11);
    c.pattern = pattern;
    c.deterministic = deterministic;
    c.dtype = dtype;
    c.largest = largest;
    cases.push_back(c);
  };
  add("Row2Pow24", 1, int64_t{1} << 24, 1024, Pattern::kRandomNormal, false);
  add("Row2Pow24Det", 1, int64_t{1} << 24, 1024, Pattern::kFewDistinct, true);
  add("Batch16384", 16384, 64, 8, Pattern::kRandomNormal, false);
  add("Batch16384Ties", 16384, 333, 17, Pattern::kTiesAtKth, true);
  add("K8192Multi", 8, 1 << 20, 8192, Pattern::kRandomNormal, false);
  add("K8192Ascending", 2, 300000, 8192, Pattern::kAscending, true);
  add("K2048Ascending", 4, 262144, 2048, Pattern::kAscending, false);
  add("K2048Descending", 4, 262144, 2048, Pattern::kDescending, false);
  add("K2048LowMantissa", 64, 131072, 2048, Pattern::kLowMantissaBits, false);
  add("KBeyondBuffer", 2, 100000, 20000, Pattern::kRandomNormal, false);
  add("KEqualsN", 3, 9000, 9000, Pattern::kUniform, true);
  // The k-th best's radix bin larger than grid-radix's candidate buffer, with better entries in
  // higher bins: the bin is refined from the rows themselves.
  add("MostlyTiedRows", 2, 1 << 20, 64, Pattern::kMostlyTied, false);
  add("MostlyTiedRowDet", 1, 1 << 21, 8, Pattern::kMostlyTied, true, DType::kFloat32, false);
  add("MostlyTiedRowBf16", 1, 300000, 2048, Pattern::kMostlyTied, true, DType::kBFloat16);
  // A block per row (batch above the device's slots): sample-filter's estimated gate, and its
  // second pass when the estimate leaves fewer than k candidates (descending rows, NaN rows).
  add("ManyRowsNormal", 300, 30000, 1024, Pattern::kRandomNormal, false);
  add("ManyRowsNormalBf16", 300, 30001, 2048, Pattern::kRandomNormal, false, DType::kBFloat16);
  add("ManyRowsDescendingF16", 300, 20000, 512, Pattern::kDescending, false, DType::kFloat16);
  add("ManyRowsAscendingSmallest", 300, 30000, 700, Pattern::kAscending, true, DType::kFloat32,
      false);
  add("ManyRowsTiesDet", 300, 30000, 1000, Pattern::kTiesAtKth, true, DType::kBFloat16);
  add("ManyRowsNanInf", 300, 30000, 900, Pattern::kNanInfSprinkled, false, DType::kFloat32,
      false);
  add("ManyRowsLowMantissa", 300, 40000, 2048, Pattern::kLowMantissaBits, false);
  add("ManyRowsK8192", 140, 60000, 8192, Pattern::kRandomNormal, false, DType::kBFloat16);
  return cases;
}

class SelectGpuLarge : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(SelectGpuLarge, MatchesReference) {
  SKIP_WITHOUT_GPU();
  expect_matches_reference(GetParam().c, GetParam().algo);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SelectGpuLarge, ::testing::ValuesIn(with_algos(large_cases())),
                         algo_case_name);

// ---- bad input on the GPU entry points ----

SelectProblem tiny_problem(int32_t* indices, const float* scores) {
  SelectProblem p;
  p.scores = scores;
  p.batch = 1;
  p.n = 16;
  p.k = 4;
  p.indices = indices;
  return p;
}

TEST(SelectGpuErrors, WorkspaceTooSmallAndNull) {
  SKIP_WITHOUT_GPU();
  testkit::DeviceBuffer scores, indices, workspace;
  ASSERT_TRUE(scores.allocate(16 * sizeof(float)).is_ok());
  ASSERT_TRUE(indices.allocate(4 * sizeof(int32_t)).is_ok());
  SelectProblem p = tiny_problem(indices.as<int32_t>(), scores.as<float>());
  // Auto runs this row in registers, which needs no workspace; radix always needs some.
  SelectOptions radix;
  radix.algo = SelectAlgo::kRadix;
  std::size_t bytes = 0;
  ASSERT_TRUE(select_topk_workspace_size(p, &bytes, radix).is_ok());
  ASSERT_GT(bytes, 0u);
  ASSERT_TRUE(workspace.allocate(bytes).is_ok());
  Status s = select_topk(p, workspace.data(), bytes - 1, nullptr, radix);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  EXPECT_NE(s.message().find("workspace_bytes"), std::string::npos);
  s = select_topk(p, nullptr, bytes, nullptr, radix);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("workspace"), std::string::npos);
}

TEST(SelectGpuErrors, SampleFilterRejectsLargeK) {
  SKIP_WITHOUT_GPU();
  SelectProblem p;
  p.scores = reinterpret_cast<const void*>(256);
  p.indices = reinterpret_cast<int32_t*>(256);
  p.batch = 1;
  p.n = 100000;
  p.k = kSampleFilterMaxK + 1;
  std::size_t bytes = 0;
  SelectOptions o;
  o.algo = SelectAlgo::kSampleFilter;
  const Status s = select_topk_workspace_size(p, &bytes, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k must be"), std::string::npos) << s.to_string();
}

TEST(SelectGpuErrors, ValidateRangesNamesTheRow) {
  SKIP_WITHOUT_GPU();
  SelectCase c;
  c.name = "BadRange";
  c.batch = 3;
  c.n = 100;
  c.k = 5;
  c.with_ranges = true;
  HostRows rows = make_rows(c);
  rows.starts = {0, 10, 50};
  rows.ends = {100, 5, 60};  // row 1: start > end
  GpuRunOptions options;
  options.validate_ranges = true;
  HostResult got;
  Status s = run_gpu_select(c, rows, options, &got);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("row_starts[1]"), std::string::npos) << s.to_string();
  rows.ends = {101, 20, 60};  // row 0: end > n
  s = run_gpu_select(c, rows, options, &got);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("row_ends[0]"), std::string::npos) << s.to_string();
}

TEST(SelectGpuErrors, UnvalidatedBadRangesAreClampedNotOutOfBounds) {
  SKIP_WITHOUT_GPU();
  SelectCase c;
  c.name = "ClampedRange";
  c.batch = 3;
  c.n = 1000;
  c.k = 5;
  c.with_ranges = true;
  HostRows rows = make_rows(c);
  rows.starts = {-50, 900, 10};
  rows.ends = {5000, 100, 20};
  HostResult got;
  const Status s = run_gpu_select(c, rows, GpuRunOptions{}, &got);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int64_t slot = 0; slot < c.k; ++slot) {
    EXPECT_EQ(got.indices[static_cast<std::size_t>(c.k + slot)], -1) << "row 1 is empty";
  }
}

}  // namespace
}  // namespace litetopk::testing
