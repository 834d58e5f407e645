// Inputs and the adversarial case list for select_topk tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/select_testing.h"

namespace litetopk {

void PrintTo(CpuSelectAlgo algo, std::ostream* os) {
  switch (algo) {
    case CpuSelectAlgo::kReference: *os << "reference"; return;
    case CpuSelectAlgo::kFast: *os << "fast"; return;
  }
  *os << "CpuSelectAlgo(" << static_cast<int>(algo) << ")";
}

void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }

}  // namespace litetopk

namespace litetopk::testing {

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::kRandomNormal: return "RandomNormal";
    case Pattern::kUniform: return "Uniform";
    case Pattern::kConstant: return "Constant";
    case Pattern::kTiesAtKth: return "TiesAtKth";
    case Pattern::kLowMantissaBits: return "LowMantissaBits";
    case Pattern::kAscending: return "Ascending";
    case Pattern::kDescending: return "Descending";
    case Pattern::kNanInfSprinkled: return "NanInfSprinkled";
    case Pattern::kAllNegInf: return "AllNegInf";
    case Pattern::kAllNan: return "AllNan";
    case Pattern::kDenormals: return "Denormals";
    case Pattern::kFewDistinct: return "FewDistinct";
    case Pattern::kMostlyTied: return "MostlyTied";
  }
  return "invalid";
}

void PrintTo(const SelectCase& c, std::ostream* os) { *os << c.name; }

SelectCase select_case(std::string name, int64_t batch, int64_t n, int64_t k, uint64_t seed) {
  SelectCase c;
  c.name = std::move(name);
  c.batch = batch;
  c.n = n;
  c.k = k;
  c.seed = seed;
  return c;
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t case_stride(const SelectCase& c) { return c.row_stride == 0 ? c.n : c.row_stride; }

int mantissa_bits(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return 7;
    case DType::kFloat16: return 10;
    case DType::kFloat32: break;
  }
  return 23;
}

uint32_t sign_bit(DType dtype) { return dtype == DType::kFloat32 ? 0x80000000u : 0x8000u; }

uint64_t uniform_int(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

// A NaN of the dtype with a random nonzero payload and a random sign.
uint32_t random_nan(std::mt19937_64& rng, DType dtype) {
  const int m = mantissa_bits(dtype);
  const uint32_t mantissa_mask = (1u << m) - 1u;
  const uint32_t exponent_mask = dtype == DType::kFloat32    ? 0x7f800000u
                                 : dtype == DType::kBFloat16 ? 0x7f80u
                                                             : 0x7c00u;
  const auto payload = static_cast<uint32_t>(uniform_int(rng, 1, mantissa_mask));
  return exponent_mask | payload | (uniform_int(rng, 0, 1) ? sign_bit(dtype) : 0u);
}

// A row of `above` entries better than a tie value, then `ties` entries equal to it, then worse
// ones, shuffled. Small integers are exact in every dtype.
void fill_tie_run(std::vector<uint32_t>& out, int64_t above, int64_t ties, bool largest, DType d,
                  std::mt19937_64& rng) {
  const float sign = largest ? 1.0f : -1.0f;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    float value = 8.0f;
    if (at < above) value = 8.0f + static_cast<float>(uniform_int(rng, 1, 100));
    if (at >= above + ties) value = 8.0f - static_cast<float>(uniform_int(rng, 1, 100));
    out[i] = encode_score(sign * value, d);
  }
  std::shuffle(out.begin(), out.end(), rng);
}

// `len` raw scores of pattern for a row whose top-k (k of the case) is taken in mode `largest`.
std::vector<uint32_t> pattern_row(const SelectCase& c, int64_t len, std::mt19937_64& rng) {
  const DType d = c.dtype;
  std::vector<uint32_t> out(static_cast<std::size_t>(len));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1000.0f, 1000.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  switch (c.pattern) {
    case Pattern::kRandomNormal:
      for (auto& v : out) v = encode_score(normal(rng), d);
      break;
    case Pattern::kUniform:
      for (auto& v : out) v = encode_score(uniform(rng), d);
      break;
    case Pattern::kConstant: {
      const uint32_t value = encode_score(normal(rng), d);
      std::fill(out.begin(), out.end(), value);
      break;
    }
    case Pattern::kTiesAtKth: {
      // A run of ties that covers rank k-1 and reaches past it.
      const int64_t kk = std::min(c.k, len);
      const int64_t above = (kk - 1) - (kk - 1) / 2;
      fill_tie_run(out, above, std::min(len - above, 2 * (kk - above) + 1), c.largest, d, rng);
      break;
    }
    case Pattern::kLowMantissaBits: {
      const uint32_t low_mask = d == DType::kFloat32 ? 0x3ffu : 0x7u;
      const uint32_t base = encode_score(normal(rng), d) & ~low_mask;
      for (auto& v : out) v = base | static_cast<uint32_t>(uniform_int(rng, 0, low_mask));
      break;
    }
    case Pattern::kAscending:
    case Pattern::kDescending: {
      const float sign = c.pattern == Pattern::kAscending ? 1.0f : -1.0f;
      for (int64_t i = 0; i < len; ++i) {
        out[static_cast<std::size_t>(i)] = encode_score(sign * static_cast<float>(i - len / 2), d);
      }
      break;
    }
    case Pattern::kNanInfSprinkled:
      for (auto& v : out) {
        const float r = unit(rng);
        if (r < 0.1f) {
          v = random_nan(rng, d);
        } else if (r < 0.15f) {
          v = encode_score(kInf, d);
        } else if (r < 0.2f) {
          v = encode_score(-kInf, d);
        } else {
          v = encode_score(normal(rng), d);
        }
      }
      break;
    case Pattern::kAllNegInf: std::fill(out.begin(), out.end(), encode_score(-kInf, d)); break;
    case Pattern::kAllNan:
      for (auto& v : out) v = random_nan(rng, d);
      break;
    case Pattern::kDenormals: {
      const uint32_t mantissa_mask = (1u << mantissa_bits(d)) - 1u;
      for (auto& v : out) {
        const uint32_t sign = uniform_int(rng, 0, 1) ? sign_bit(d) : 0u;
        const bool zero = uniform_int(rng, 0, 19) == 0;
        v = sign | (zero ? 0u : static_cast<uint32_t>(uniform_int(rng, 1, mantissa_mask)));
      }
      break;
    }
    case Pattern::kFewDistinct: {
      static constexpr float kValues[] = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
      for (auto& v : out) v = encode_score(kValues[uniform_int(rng, 0, 4)], d);
      break;
    }
    case Pattern::kMostlyTied: {
      // (k - 1) / 2 better entries (most in higher radix bins), ties for 90% of the row.
      const int64_t above = (std::min(c.k, len) - 1) / 2;
      fill_tie_run(out, above, std::max<int64_t>(len * 9 / 10, std::min(len - above, c.k)),
                   c.largest, d, rng);
      break;
    }
  }
  return out;
}

// A range for row b: empty, shorter than k, full, or random, in turn.
std::pair<int64_t, int64_t> random_range(const SelectCase& c, int64_t b, std::mt19937_64& rng) {
  const auto n = static_cast<uint64_t>(c.n);
  switch ((static_cast<uint64_t>(b) + c.seed) % 5) {
    case 0: {
      const auto s = static_cast<int64_t>(uniform_int(rng, 0, n));
      return {s, s};
    }
    case 1: {
      const auto max_len = static_cast<uint64_t>(std::max<int64_t>(0, std::min(c.k - 1, c.n)));
      const uint64_t len = uniform_int(rng, 0, max_len);
      const auto s = static_cast<int64_t>(uniform_int(rng, 0, n - len));
      return {s, s + static_cast<int64_t>(len)};
    }
    case 2: return {0, c.n};
    default: {
      auto a = static_cast<int64_t>(uniform_int(rng, 0, n));
      auto e = static_cast<int64_t>(uniform_int(rng, 0, n));
      if (a > e) std::swap(a, e);
      return {a, e};
    }
  }
}

const char* dtype_short_name(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "f16";
    case DType::kFloat32: break;
  }
  return "f32";
}

}  // namespace

HostRows make_rows(const SelectCase& c) {
  HostRows rows;
  const int64_t stride = case_stride(c);
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  rows.scores.assign(static_cast<std::size_t>(c.batch * stride * esize), 0);
  std::mt19937_64 rng(c.seed);
  const uint32_t poison = encode_score(c.largest ? kInf : -kInf, c.dtype);
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t start = 0, end = c.n;
    if (c.with_ranges) {
      std::tie(start, end) = random_range(c, b, rng);
      rows.starts.push_back(static_cast<int32_t>(start));
      rows.ends.push_back(static_cast<int32_t>(end));
    }
    void* row = rows.scores.data() + b * stride * esize;
    for (int64_t i = 0; i < stride; ++i) store_score(row, c.dtype, i, poison);
    const std::vector<uint32_t> values = pattern_row(c, end - start, rng);
    for (int64_t i = start; i < end; ++i) {
      store_score(row, c.dtype, i, values[static_cast<std::size_t>(i - start)]);
    }
  }
  return rows;
}

SelectProblem make_problem(const SelectCase& c, const HostRows& rows, int32_t* indices,
                           void* values) {
  SelectProblem p;
  p.scores = rows.scores.empty() ? nullptr : rows.scores.data();
  p.dtype = c.dtype;
  p.batch = c.batch;
  p.n = c.n;
  p.row_stride = c.row_stride;
  p.row_starts = c.with_ranges && !rows.starts.empty() ? rows.starts.data() : nullptr;
  p.row_ends = c.with_ranges && !rows.ends.empty() ? rows.ends.data() : nullptr;
  p.k = c.k;
  p.largest = c.largest;
  p.sorted = c.sorted;
  p.deterministic = c.deterministic;
  p.indices = indices;
  p.values = values;
  return p;
}

Status run_cpu_select(const SelectCase& c, const HostRows& rows, CpuSelectAlgo algo,
                      int num_threads, HostResult* result) {
  const auto slots = static_cast<std::size_t>(std::max<int64_t>(0, c.batch * c.k));
  result->indices.assign(slots, 0x5a5a5a5a);
  result->values.assign(slots * dtype_size(c.dtype), 0x5a);
  const SelectProblem p = make_problem(c, rows, result->indices.data(), result->values.data());
  return select_topk_cpu(p, algo, num_threads);
}

std::vector<SelectCase> adversarial_cases() {
  struct Shape {
    int64_t batch, n, row_stride, k;
    bool with_ranges;
  };
  static constexpr Shape kShapes[] = {
      {1, 1, 0, 1, false},           // the smallest problem
      {3, 17, 0, 17, false},         // k = n
      {2, 33, 0, 50, false},         // k > n
      {4, 1001, 1013, 1, false},     // row_stride > n, k = 1
      {8, 4097, 0, 64, true},        // ranges
      {2, 70001, 0, 2048, false},    // long odd rows, the DSA k
      {5, 257, 300, 256, true},      // ranges and row_stride > n
      {16, 999, 0, 100, true},       // many short rows
      {1, 65536, 0, 4096, false},    // large k
      {3, 12345, 12350, 777, true},  // odd everything
      {64, 128, 0, 8, false},        // a wide batch of short rows
      {2, 5000, 0, 5000, true},      // k = n with ranges
      {7, 3, 5, 2, true},            // tiny rows with ranges
      {1, 20000, 0, 1, true},        // k = 1 with a range
  };
  constexpr int kNumShapes = static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]));
  static constexpr Pattern kPatterns[] = {
      Pattern::kRandomNormal, Pattern::kUniform,         Pattern::kConstant,
      Pattern::kTiesAtKth,    Pattern::kLowMantissaBits, Pattern::kAscending,
      Pattern::kDescending,   Pattern::kNanInfSprinkled, Pattern::kAllNegInf,
      Pattern::kAllNan,       Pattern::kDenormals,       Pattern::kFewDistinct,
      Pattern::kMostlyTied,
  };
  static constexpr DType kDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  struct Mode {
    const char* name;
    bool sorted, deterministic;
  };
  static constexpr Mode kModes[] = {
      {"unsorted", false, false},
      {"sorted", true, false},
      {"det", false, true},
      {"sorteddet", true, true},
  };

  std::vector<SelectCase> cases;
  int combo = 0;
  for (Pattern pattern : kPatterns) {
    for (DType dtype : kDTypes) {
      for (bool largest : {true, false}) {
        for (const Mode& mode : kModes) {
          const int first = combo % kNumShapes;
          int second = (combo * 5 + 7) % kNumShapes;
          if (second == first) second = (second + 1) % kNumShapes;
          for (int s : {first, second}) {
            const Shape& shape = kShapes[s];
            SelectCase c;
            c.name = std::string(pattern_name(pattern)) + "_" + dtype_short_name(dtype) + "_" +
                     (largest ? "largest" : "smallest") + "_" + mode.name + "_s" +
                     std::to_string(s);
            c.dtype = dtype;
            c.batch = shape.batch;
            c.n = shape.n;
            c.row_stride = shape.row_stride;
            c.k = shape.k;
            c.largest = largest;
            c.sorted = mode.sorted;
            c.deterministic = mode.deterministic;
            c.pattern = pattern;
            c.with_ranges = shape.with_ranges;
            c.seed = 0x5eed0000u + static_cast<uint64_t>(cases.size());
            cases.push_back(std::move(c));
          }
          ++combo;
        }
      }
    }
  }
  // Degenerate shapes: no rows, and rows with no elements.
  for (DType dtype : kDTypes) {
    SelectCase c;
    c.dtype = dtype;
    c.batch = 0;
    c.n = 100;
    c.k = 5;
    c.name = std::string("Batch0_") + dtype_short_name(dtype);
    c.seed = 0x5eed0000u + static_cast<uint64_t>(cases.size());
    cases.push_back(c);
    c.batch = 3;
    c.n = 0;
    c.k = 3;
    c.with_ranges = true;
    c.sorted = true;
    c.name = std::string("N0_") + dtype_short_name(dtype);
    c.seed = 0x5eed0000u + static_cast<uint64_t>(cases.size());
    cases.push_back(c);
  }
  return cases;
}

std::string dtype_tag(DType dtype) {
  return dtype == DType::kFloat32 ? "F32" : dtype == DType::kBFloat16 ? "Bf16" : "F16";
}

std::string flags_tag(bool largest, bool sorted, bool deterministic) {
  return std::string(largest ? "Largest" : "Smallest") + (sorted ? "Sorted" : "") +
         (deterministic ? "Det" : "");
}

void set_score(const SelectCase& c, HostRows* rows, int64_t r, int64_t e, float value) {
  const int64_t stride = c.row_stride == 0 ? c.n : c.row_stride;
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  store_score(rows->scores.data() + r * stride * esize, c.dtype, e, encode_score(value, c.dtype));
}

}  // namespace litetopk::testing
