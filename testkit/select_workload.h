// Inputs for the tool's selections: rows of scores generated on the host from a pattern and a
// seed (the same spec always gives the same bytes), with optional per-row ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/select.h"

namespace litetopk::testkit {

enum class Pattern {
  kNormal,      // N(0, 1)
  kUniform,     // U[0, 1)
  kAscending,   // index / n: the best entries are at the end of the row
  kDescending,  // (n - index) / n: the best entries are at the start
  kTies,        // integers 0..15: every value is tied many times
  kConstant,    // all 1.0
  kSpecial,     // N(0, 1) with NaN (1/64) and +-inf (1/256 each) mixed in
};

const char* pattern_name(Pattern pattern);
bool parse_pattern(const std::string& name, Pattern* pattern);
// "normal|uniform|...", for help texts.
std::string pattern_choices();

struct WorkloadSpec {
  int64_t batch = 0;
  int64_t n = 0;
  int64_t k = 0;
  DType dtype = DType::kFloat32;
  Pattern pattern = Pattern::kNormal;
  uint64_t seed = 0;
  // Random half-open ranges: rows keep most of [0, n); every 8th row is shorter than k.
  bool ranges = false;
};

struct Workload {
  WorkloadSpec spec;
  std::vector<unsigned char> scores;  // [batch, n] of spec.dtype, row stride n
  std::vector<int32_t> row_starts;    // [batch] when spec.ranges, else empty
  std::vector<int32_t> row_ends;      // [batch] when spec.ranges, else empty

  // The bytes a selection must read: the elements inside the rows' ranges.
  std::size_t bytes_read() const;
  // A problem over this host data with the spec's shape and the default options; the caller sets
  // indices and the flags (largest, sorted, deterministic).
  SelectProblem host_problem() const;
};

// Generates the rows in parallel over all hardware threads.
Workload make_workload(const WorkloadSpec& spec);

// The score at element `offset` of `scores`, widened to float.
float score_as_float(const void* scores, DType dtype, int64_t offset);

}  // namespace litetopk::testkit
