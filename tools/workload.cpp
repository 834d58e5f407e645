#include "workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

namespace litetopk::tools {

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

// SplitMix64's finalizer: a counter-based generator, so every element is generated independently
// (in parallel, identically for any thread count).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform in (0, 1) from 32 random bits.
double unit(uint32_t bits) { return (bits + 0.5) * 0x1p-32; }

double normal(uint64_t h) {  // Box-Muller on the two halves of h
  constexpr double kTwoPi = 6.283185307179586;
  const double radius = std::sqrt(-2.0 * std::log(unit(static_cast<uint32_t>(h))));
  return radius * std::cos(kTwoPi * unit(static_cast<uint32_t>(h >> 32)));
}

float pattern_value(Pattern pattern, uint64_t h, int64_t index, int64_t n) {
  switch (pattern) {
    case Pattern::kNormal: return static_cast<float>(normal(h));
    case Pattern::kUniform: return static_cast<float>(unit(static_cast<uint32_t>(h)));
    case Pattern::kAscending: return static_cast<float>(index) / static_cast<float>(n);
    case Pattern::kDescending: return static_cast<float>(n - index) / static_cast<float>(n);
    case Pattern::kTies: return static_cast<float>(h % 16);
    case Pattern::kConstant: return 1.0f;
    case Pattern::kSpecial: {
      const uint64_t lottery = h & 255;  // 0: +inf, 1: -inf, 2..5: NaN
      if (lottery == 0) return std::numeric_limits<float>::infinity();
      if (lottery == 1) return -std::numeric_limits<float>::infinity();
      if (lottery < 6) return std::numeric_limits<float>::quiet_NaN();
      return static_cast<float>(normal(mix(h)));
    }
  }
  return 0.0f;
}

uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN stays NaN.
uint16_t float_to_bf16(float f) {
  const uint32_t bits = float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

uint16_t float_to_fp16(float f) {
  const uint32_t bits = float_bits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24
    const auto units = static_cast<uint32_t>(std::nearbyint(std::fabs(f) * 0x1p24f));
    return static_cast<uint16_t>(sign | units);
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));  // rebias 127 -> 15
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

void store(void* scores, DType dtype, int64_t offset, float value) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(scores)[offset] = value; return;
    case DType::kBFloat16: static_cast<uint16_t*>(scores)[offset] = float_to_bf16(value); return;
    case DType::kFloat16: static_cast<uint16_t*>(scores)[offset] = float_to_fp16(value); return;
  }
}

// Calls body(begin, end) on disjoint chunks of [0, count), one per hardware thread.
template <typename Body>
void parallel_for(int64_t count, Body body) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, count);
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back(body, count * t / threads, count * (t + 1) / threads);
  }
  for (std::thread& thread : pool) thread.join();
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
  const uint64_t base = mix(spec.seed);
  if (elements > 0) {
    parallel_for(elements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float value =
            pattern_value(spec.pattern, mix(base + static_cast<uint64_t>(i)), i % spec.n, spec.n);
        store(w.scores.data(), spec.dtype, i, value);
      }
    });
  }
  if (spec.ranges) {
    const uint64_t range_base = mix(~spec.seed);
    const int64_t slack = spec.n / 8 + 1;
    for (int64_t b = 0; b < spec.batch; ++b) {
      const uint64_t h = mix(range_base + static_cast<uint64_t>(b));
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
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(scores)[offset];
    case DType::kBFloat16:
      return bits_float(uint32_t{static_cast<const uint16_t*>(scores)[offset]} << 16);
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(scores)[offset]);
  }
  return 0.0f;
}

}  // namespace litetopk::tools
