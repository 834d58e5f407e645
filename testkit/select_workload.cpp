#include "testkit/select_workload.h"

#include <algorithm>
#include <limits>

#include "litetopk/float_bits.h"
#include "testkit/counter_random.h"

namespace litetopk::testkit {

namespace {

struct PatternName {
  Pattern pattern;
  const char* name;
};
constexpr PatternName kPatternNames[] = {
    {Pattern::kNormal, "normal"},       {Pattern::kUniform, "uniform"},
    {Pattern::kAscending, "ascending"}, {Pattern::kDescending, "descending"},
    {Pattern::kTies, "ties"},           {Pattern::kConstant, "constant"},
    {Pattern::kSpecial, "special"},
};

float pattern_value(Pattern pattern, uint64_t h, int64_t index, int64_t n) {
  switch (pattern) {
    case Pattern::kNormal: return static_cast<float>(standard_normal(h));
    case Pattern::kUniform: return static_cast<float>(uniform01(static_cast<uint32_t>(h)));
    case Pattern::kAscending: return static_cast<float>(index) / static_cast<float>(n);
    case Pattern::kDescending: return static_cast<float>(n - index) / static_cast<float>(n);
    case Pattern::kTies: return static_cast<float>(h % 16);
    case Pattern::kConstant: return 1.0f;
    case Pattern::kSpecial: {
      const uint64_t lottery = h & 255;  // 0: +inf, 1: -inf, 2..5: NaN
      if (lottery == 0) return std::numeric_limits<float>::infinity();
      if (lottery == 1) return -std::numeric_limits<float>::infinity();
      if (lottery < 6) return std::numeric_limits<float>::quiet_NaN();
      return static_cast<float>(standard_normal(hash64(h)));
    }
  }
  return 0.0f;
}

}  // namespace

const char* pattern_name(Pattern pattern) {
  for (const PatternName& entry : kPatternNames) {
    if (entry.pattern == pattern) return entry.name;
  }
  return "invalid";
}

bool parse_pattern(const std::string& name, Pattern* pattern) {
  for (const PatternName& entry : kPatternNames) {
    if (name == entry.name) {
      *pattern = entry.pattern;
      return true;
    }
  }
  return false;
}

std::string pattern_choices() {
  std::string choices;
  for (const PatternName& entry : kPatternNames) {
    if (!choices.empty()) choices += '|';
    choices += entry.name;
  }
  return choices;
}

std::size_t Workload::bytes_read() const {
  int64_t elements = spec.batch * spec.n;
  if (spec.ranges) {
    elements = 0;
    for (int64_t b = 0; b < spec.batch; ++b) elements += row_ends[b] - row_starts[b];
  }
  return static_cast<std::size_t>(elements) * dtype_size(spec.dtype);
}

SelectProblem Workload::host_problem() const {
  SelectProblem problem;
  problem.scores = scores.data();
  problem.dtype = spec.dtype;
  problem.batch = spec.batch;
  problem.n = spec.n;
  problem.k = spec.k;
  if (spec.ranges) {
    problem.row_starts = row_starts.data();
    problem.row_ends = row_ends.data();
  }
  return problem;
}

Workload make_workload(const WorkloadSpec& spec) {
  Workload w;
  w.spec = spec;
  const int64_t elements = spec.batch * spec.n;
  w.scores.resize(static_cast<std::size_t>(elements) * dtype_size(spec.dtype));
  const uint64_t base = hash64(spec.seed);
  if (elements > 0) {
    parallel_fill(elements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float value = pattern_value(spec.pattern, hash64(base + static_cast<uint64_t>(i)),
                                          i % spec.n, spec.n);
        float_bits::store_score(w.scores.data(), spec.dtype, i,
                                float_bits::encode_score(value, spec.dtype));
      }
    });
  }
  if (spec.ranges) {
    const uint64_t range_base = hash64(~spec.seed);
    const int64_t slack = spec.n / 8 + 1;
    for (int64_t b = 0; b < spec.batch; ++b) {
      const uint64_t h = hash64(range_base + static_cast<uint64_t>(b));
      const int64_t start = static_cast<int64_t>((h & 0xffffffffu) % static_cast<uint64_t>(slack));
      int64_t end = spec.n - static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(slack));
      if (b % 8 == 7) end = std::min(spec.n, start + spec.k / 2);
      w.row_starts.push_back(static_cast<int32_t>(start));
      w.row_ends.push_back(static_cast<int32_t>(end));
    }
  }
  return w;
}

float score_as_float(const void* scores, DType dtype, int64_t offset) {
  return float_bits::decode_score(float_bits::load_score(scores, dtype, offset), dtype);
}

}  // namespace litetopk::testkit
