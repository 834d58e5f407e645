// Shared test support for select_topk (CPU and GPU suites): input patterns, the adversarial case
// list, and check_selection, which verifies one result against the reference result.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/float_bits.h"
#include "litetopk/select.h"

namespace litetopk {
// So that gtest prints these parameters by name.
void PrintTo(CpuSelectAlgo algo, std::ostream* os);
void PrintTo(DType dtype, std::ostream* os);
}  // namespace litetopk

namespace litetopk::testing {

enum class Pattern {
  kRandomNormal,     // N(0, 1)
  kUniform,          // uniform in [-1000, 1000)
  kConstant,         // one value per row
  kTiesAtKth,        // many entries equal to the k-th best value, straddling position k
  kLowMantissaBits,  // one sign/exponent/high mantissa per row; only the lowest 10 mantissa bits
                     // (3 for 16-bit dtypes) vary
  kAscending,        // i - len/2
  kDescending,       // len/2 - i
  kNanInfSprinkled,  // random normal with NaN (random payloads and signs), +inf, -inf mixed in
  kAllNegInf,
  kAllNan,       // NaN with random payloads and signs
  kDenormals,    // subnormals of the dtype, a few +-0
  kFewDistinct,  // five distinct values
  kMostlyTied,   // fewer than k entries better than one value that 90% of the row holds (the
                 // k-th best's radix bin larger than any candidate buffer), the rest worse
};
const char* pattern_name(Pattern pattern);

struct SelectCase {
  std::string name;  // unique, gtest-safe ([A-Za-z0-9_])
  DType dtype = DType::kFloat32;
  int64_t batch = 1, n = 1, row_stride = 0, k = 1;
  bool largest = true, sorted = false, deterministic = false;
  Pattern pattern = Pattern::kRandomNormal;
  bool with_ranges = false;  // random [start,end) per row incl. empty ranges and ranges shorter
                             // than k
  uint64_t seed = 1;
};
// So that gtest prints a case by its name.
void PrintTo(const SelectCase& c, std::ostream* os);
// A case of `batch` rows of n scores, the top k, from `seed`; the other fields at their defaults.
SelectCase select_case(std::string name, int64_t batch, int64_t n, int64_t k, uint64_t seed);

// The case's input, host side. Positions outside a row's range and the stride padding hold the
// best value of the mode (+inf for largest, -inf for smallest), so reading them shows up as a
// wrong answer.
struct HostRows {
  std::vector<uint8_t> scores;        // batch * stride elements of dtype (stride = row_stride or n)
  std::vector<int32_t> starts, ends;  // empty when !with_ranges
};
HostRows make_rows(const SelectCase& c);

// Problem over host pointers (ranges null when !with_ranges); indices/values supplied by caller.
SelectProblem make_problem(const SelectCase& c, const HostRows& rows, int32_t* indices,
                           void* values);

// A result on the host: indices [batch * k], values [batch * k] of dtype (bytes).
struct HostResult {
  std::vector<int32_t> indices;
  std::vector<uint8_t> values;
};
// Runs select_topk_cpu on the case. The output buffers are filled with a sentinel first (indices
// 0x5a5a5a5a, value bytes 0x5a) so that an unwritten slot fails check_selection.
Status run_cpu_select(const SelectCase& c, const HostRows& rows, CpuSelectAlgo algo,
                      int num_threads, HostResult* result);

// Every pattern x dtype x {largest, smallest} x {unsorted, sorted, deterministic,
// sorted+deterministic}, each at two shapes from a list covering n = 1 .. 70001, odd n, k = 1,
// k = n, k > n, ranges, row_stride > n; plus batch 0 and n 0. Fixed seeds.
std::vector<SelectCase> adversarial_cases();

// Test-name tags: "F32", "Bf16" or "F16"; "Largest"/"Smallest" + "Sorted" + "Det".
std::string dtype_tag(DType dtype);
std::string flags_tag(bool largest, bool sorted, bool deterministic);
// Element e of row r of the case's rows, set to `value` rounded to the dtype.
void set_score(const SelectCase& c, HostRows* rows, int64_t r, int64_t e, float value);

// Verifies one result against the reference result (both host arrays of batch*k; either values
// pointer may be null) with testkit::compare_topk (testkit/select_verify.h), after checking the
// reference the same way against itself: per row, valid count == min(k, number of non-NaN
// entries in range); slots >= count are -1 (and NaN values); indices in [0, len) and no
// duplicates; if values given, values[i] is bitwise the score at that index; the selected values
// equal the reference's bit for bit; deterministic => same index set as the reference; sorted =>
// best first with ties by ascending index. Fails with a message naming the case, row and slot of
// the first problem.
::testing::AssertionResult check_selection(const SelectCase& c, const HostRows& rows,
                                           const int32_t* indices, const void* values,
                                           const int32_t* ref_indices, const void* ref_values);

}  // namespace litetopk::testing
