// Inputs, key ranges and the adversarial case list for indexer_topk tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/indexer_testing.h"
#include "litetopk/fp8_e4m3.h"

namespace litetopk::testing {

const char* indexer_pattern_name(IndexerPattern pattern) {
  switch (pattern) {
    case IndexerPattern::kRandom: return "Random";
    case IndexerPattern::kConcentrated: return "Concentrated";
    case IndexerPattern::kAllEqual: return "AllEqual";
    case IndexerPattern::kNegativeWeights: return "NegativeWeights";
    case IndexerPattern::kZeroKvScales: return "ZeroKvScales";
    case IndexerPattern::kNanInFp8: return "NanInFp8";
  }
  return "invalid";
}

const char* range_pattern_name(RangePattern ranges) {
  switch (ranges) {
    case RangePattern::kCausalChunk: return "CausalChunk";
    case RangePattern::kContextParallelHalves: return "ContextParallelHalves";
    case RangePattern::kRagged: return "Ragged";
    case RangePattern::kFewerThanK: return "FewerThanK";
    case RangePattern::kEmpty: return "Empty";
  }
  return "invalid";
}

void PrintTo(const IndexerCase& c, std::ostream* os) { *os << c.name; }

namespace {

using Rng = std::mt19937_64;

int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

float uniform_real(Rng& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

float normal(Rng& rng) { return std::normal_distribution<float>(0.0f, 1.0f)(rng); }

uint8_t fp8(float value) { return fp8::float_to_e4m3(value); }

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// Causal range of query t when T queries end a sequence of S keys.
std::pair<int64_t, int64_t> causal(int64_t S, int64_t T, int64_t t) {
  return {0, std::clamp<int64_t>(S - T + t + 1, 0, S)};
}

std::pair<int64_t, int64_t> ragged(int64_t S, Rng& rng) {
  int64_t a = uniform_int(rng, 0, S), b = uniform_int(rng, 0, S);
  if (a > b) std::swap(a, b);
  return {a, b};
}

void make_ranges(const IndexerCase& c, Rng& rng, HostIndexerInputs* in) {
  const int64_t T = c.T, S = c.S;
  in->ks.assign(size(T), 0);
  in->ke.assign(size(T), 0);
  const int64_t chunk = std::max<int64_t>(1, (T + 1) / 2);
  const int64_t chunks = S / chunk;
  const int64_t cp_a = chunks / 6;
  const int64_t cp_b = std::max<int64_t>(cp_a, chunks - 1 - cp_a);
  for (int64_t t = 0; t < T; ++t) {
    std::pair<int64_t, int64_t> r;
    switch (c.ranges) {
      case RangePattern::kCausalChunk: r = causal(S, T, t); break;
      case RangePattern::kContextParallelHalves: {
        const bool second = t >= chunk;
        const int64_t position = (second ? cp_b : cp_a) * chunk + (second ? t - chunk : t);
        r = {0, std::min(S, position + 1)};
        break;
      }
      case RangePattern::kRagged:
        r = t % 8 == 0 ? std::pair<int64_t, int64_t>{0, S} : ragged(S, rng);
        break;
      case RangePattern::kFewerThanK: {
        const int64_t len = uniform_int(rng, 0, std::max<int64_t>(0, std::min(c.k - 1, S)));
        const int64_t start = uniform_int(rng, 0, S - len);
        r = {start, start + len};
        break;
      }
      case RangePattern::kEmpty:
        if (t % 3 == 0) {
          const int64_t at = uniform_int(rng, 0, S);
          r = {at, at};
        } else {
          r = ragged(S, rng);
        }
        break;
    }
    in->ks[size(t)] = static_cast<int32_t>(r.first);
    in->ke[size(t)] = static_cast<int32_t>(r.second);
  }
}

// Fast N(0,1) draws for the bulk of the fp8 data: a fixed table of 4096 normal values indexed by
// 12 random bits, five draws per 64-bit random word (std::normal_distribution per byte made
// input generation slower than the scoring).
class FastNormal {
 public:
  explicit FastNormal(Rng& rng) : rng_(rng) {}
  float operator()() {
    if (left_ == 0) {
      word_ = rng_();
      left_ = 5;
    }
    const float value = table()[word_ & 4095u];
    word_ >>= 12;
    --left_;
    return value;
  }

 private:
  static const std::vector<float>& table() {
    static const std::vector<float> values = [] {
      Rng rng(4242);
      std::vector<float> v(4096);
      for (auto& x : v) x = normal(rng);
      return v;
    }();
    return values;
  }
  Rng& rng_;
  uint64_t word_ = 0;
  int left_ = 0;
};

// One row of D fp8 values ~ N(0,1) * scale.
void random_row(FastNormal& noise, float scale, uint8_t* row, int64_t D) {
  for (int64_t d = 0; d < D; ++d) row[d] = fp8(noise() * scale);
}

float power_of_two(Rng& rng) { return std::ldexp(1.0f, static_cast<int>(uniform_int(rng, -6, 4))); }

// Random +-1 per dimension in [d0, d1), 0 elsewhere.
std::vector<float> direction(Rng& rng, int64_t D, int64_t d0, int64_t d1) {
  std::vector<float> u(size(D), 0.0f);
  for (int64_t d = d0; d < d1; ++d) u[size(d)] = uniform_int(rng, 0, 1) ? 1.0f : -1.0f;
  return u;
}

void aligned_row(FastNormal& noise, const std::vector<float>& u, float along, float scale,
                 uint8_t* row) {
  for (std::size_t d = 0; d < u.size(); ++d) row[d] = fp8(along * u[d] + scale * noise());
}

// k distinct positions in [0, n), sorted.
std::vector<int64_t> distinct_positions(Rng& rng, int64_t n, int64_t count) {
  std::vector<int64_t> all(size(n));
  for (int64_t i = 0; i < n; ++i) all[size(i)] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(size(std::min(n, count)));
  std::sort(all.begin(), all.end());
  return all;
}

uint8_t nan_byte(Rng& rng) { return uniform_int(rng, 0, 1) ? 0xff : 0x7f; }

}  // namespace

HostIndexerInputs make_indexer_inputs(const IndexerCase& c) {
  Rng rng(c.seed * 0x9e3779b97f4a7c15ull + 12345);
  FastNormal noise(rng);
  HostIndexerInputs in;
  const int64_t T = c.T, H = c.H, D = c.D, S = c.S;
  make_ranges(c, rng, &in);
  in.q.assign(size(T * H * D), 0);
  in.kv.assign(size(S * D), 0);
  in.kv_scale.assign(size(S), 1.0f);
  in.weights.assign(size(T * H), 0.0f);

  switch (c.pattern) {
    case IndexerPattern::kConcentrated: {
      const std::vector<float> u = direction(rng, D, 0, D);
      for (int64_t i = 0; i < T * H; ++i) aligned_row(noise, u, 1.0f, 0.5f, &in.q[size(i * D)]);
      for (int64_t s = 0; s < S; ++s) random_row(noise, 0.5f, &in.kv[size(s * D)], D);
      for (int64_t s : distinct_positions(rng, S, std::max<int64_t>(1, S / 128))) {
        aligned_row(noise, u, 2.0f, 0.25f, &in.kv[size(s * D)]);
      }
      for (auto& w : in.weights) w = std::fabs(normal(rng)) + 0.1f;
      for (auto& scale : in.kv_scale) scale = uniform_real(rng, 0.5f, 1.5f);
      break;
    }
    case IndexerPattern::kAllEqual: {
      for (int64_t i = 0; i < T * H; ++i) random_row(noise, 1.0f, &in.q[size(i * D)], D);
      std::vector<uint8_t> row(size(D));
      random_row(noise, 1.0f, row.data(), D);
      for (int64_t s = 0; s < S; ++s) std::copy(row.begin(), row.end(), &in.kv[size(s * D)]);
      for (auto& w : in.weights) w = normal(rng);
      break;  // kv_scale stays 1
    }
    case IndexerPattern::kRandom:
    case IndexerPattern::kNegativeWeights:
    case IndexerPattern::kZeroKvScales:
    case IndexerPattern::kNanInFp8: {
      for (int64_t i = 0; i < T * H; ++i) {
        random_row(noise, power_of_two(rng), &in.q[size(i * D)], D);
      }
      for (int64_t s = 0; s < S; ++s) {
        random_row(noise, power_of_two(rng), &in.kv[size(s * D)], D);
      }
      for (auto& scale : in.kv_scale) scale = uniform_real(rng, 0.25f, 2.0f);
      for (auto& w : in.weights) w = normal(rng);
      if (c.pattern == IndexerPattern::kNegativeWeights) {
        for (auto& w : in.weights) w = -std::fabs(w) - 0.01f;
      }
      if (c.pattern == IndexerPattern::kZeroKvScales) {
        for (auto& scale : in.kv_scale) {
          if (uniform_int(rng, 0, 2) == 0) scale = 0.0f;
        }
        const int64_t run_start = uniform_int(rng, 0, S);
        const int64_t run_end = std::min(S, run_start + std::max<int64_t>(1, S / 10));
        for (int64_t s = run_start; s < run_end; ++s) in.kv_scale[size(s)] = 0.0f;
      }
      if (c.pattern == IndexerPattern::kNanInFp8) {
        for (int64_t s = 0; s < S; ++s) {
          if (uniform_int(rng, 0, 39) == 0) {
            in.kv[size(s * D + uniform_int(rng, 0, D - 1))] = nan_byte(rng);
          }
        }
        for (int64_t t = 3; t < T; t += 7) {
          in.q[size((t * H + uniform_int(rng, 0, H - 1)) * D + uniform_int(rng, 0, D - 1))] =
              nan_byte(rng);
        }
      }
      break;
    }
  }
  return in;
}

std::pair<HostIndexerInputs, HostIndexerInputs> make_chunk_pair(const IndexerCase& c,
                                                                bool disjoint_hot_keys) {
  Rng rng(c.seed * 0x9e3779b97f4a7c15ull + 777);
  const int64_t T = c.T, H = c.H, D = c.D, S = c.S;
  const int64_t S1 = std::max<int64_t>(0, S - T);
  // Keys every query of both chunks sees: [0, S1 - T + 1) (chunk 1's first query).
  const int64_t visible = std::max<int64_t>(1, S1 - T + 1);
  const int64_t hot = std::max<int64_t>(1, std::min(c.k, visible / 4));
  const std::vector<int64_t> both = distinct_positions(rng, visible, 2 * hot);
  std::vector<int64_t> hot1, hot2;
  for (std::size_t i = 0; i < both.size(); ++i) (i % 2 == 0 ? hot1 : hot2).push_back(both[i]);
  const std::vector<float> u1 = direction(rng, D, 0, D / 2);
  const std::vector<float> u2 = direction(rng, D, D / 2, D);
  FastNormal noise(rng);

  HostIndexerInputs second;
  second.kv.assign(size(S * D), 0);
  for (int64_t s = 0; s < S; ++s) random_row(noise, 0.5f, &second.kv[size(s * D)], D);
  for (int64_t s : hot1) aligned_row(noise, u1, 2.0f, 0.25f, &second.kv[size(s * D)]);
  for (int64_t s : hot2) aligned_row(noise, u2, 2.0f, 0.25f, &second.kv[size(s * D)]);
  second.kv_scale.assign(size(S), 1.0f);
  for (auto& scale : second.kv_scale) scale = uniform_real(rng, 0.5f, 1.5f);

  HostIndexerInputs first;
  first.kv.assign(second.kv.begin(), second.kv.begin() + S1 * D);
  first.kv_scale.assign(second.kv_scale.begin(), second.kv_scale.begin() + S1);

  auto fill_queries = [&](HostIndexerInputs* in, int64_t keys, const std::vector<float>& u) {
    in->q.assign(size(T * H * D), 0);
    for (int64_t i = 0; i < T * H; ++i) aligned_row(noise, u, 1.0f, 0.25f, &in->q[size(i * D)]);
    in->weights.assign(size(T * H), 0.0f);
    for (auto& w : in->weights) w = std::fabs(normal(rng)) + 0.1f;
    in->ks.assign(size(T), 0);
    in->ke.assign(size(T), 0);
    for (int64_t t = 0; t < T; ++t) {
      in->ke[size(t)] = static_cast<int32_t>(causal(keys, T, t).second);
    }
  };
  fill_queries(&first, S1, u1);
  fill_queries(&second, S, disjoint_hot_keys ? u2 : u1);
  return {std::move(first), std::move(second)};
}

IndexerProblem make_indexer_problem(const IndexerCase& c, const HostIndexerInputs& inputs,
                                    int32_t* indices, float* values) {
  IndexerProblem p;
  p.q = inputs.q.data();
  p.kv = inputs.kv.data();
  p.kv_scale = inputs.kv_scale.data();
  p.weights = inputs.weights.data();
  p.ks = inputs.ks.data();
  p.ke = inputs.ke.data();
  p.num_queries = static_cast<int64_t>(inputs.ks.size());
  p.num_heads = c.H;
  p.head_dim = c.D;
  p.num_keys = static_cast<int64_t>(inputs.kv_scale.size());
  p.k = c.k;
  p.indices = indices;
  p.values = values;
  return p;
}

IndexerCase causal_case(std::string name, int64_t T, int64_t S, int64_t H, int64_t k,
                        uint64_t seed) {
  IndexerCase c;
  c.name = std::move(name);
  c.T = T;
  c.S = S;
  c.H = H;
  c.k = k;
  c.seed = seed;
  return c;
}

std::vector<IndexerCase> indexer_cases() {
  struct Shape {
    int64_t T, S, H, k;
  };
  // Two of these per pattern x range combination, in rotation.
  static constexpr Shape kShapes[] = {
      {8, 300, 32, 7},      {16, 2500, 64, 64},  {5, 4100, 32, 2048}, {33, 1200, 64, 1},
      {12, 1500, 64, 2048}, {40, 9000, 32, 64},  {64, 6000, 32, 7},   {2, 20000, 64, 2048},
      {24, 700, 64, 64},    {9, 16000, 32, 1},
  };
  constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);
  static constexpr IndexerPattern kPatterns[] = {
      IndexerPattern::kRandom,          IndexerPattern::kConcentrated,
      IndexerPattern::kAllEqual,        IndexerPattern::kNegativeWeights,
      IndexerPattern::kZeroKvScales,    IndexerPattern::kNanInFp8,
  };
  static constexpr RangePattern kRanges[] = {
      RangePattern::kCausalChunk, RangePattern::kContextParallelHalves, RangePattern::kRagged,
      RangePattern::kFewerThanK,  RangePattern::kEmpty,
  };

  std::vector<IndexerCase> cases;
  auto add = [&](IndexerPattern pattern, RangePattern ranges, const Shape& shape) {
    IndexerCase c = causal_case(
        std::string(indexer_pattern_name(pattern)) + "_" + range_pattern_name(ranges) + "_T" +
            std::to_string(shape.T) + "_S" + std::to_string(shape.S) + "_H" +
            std::to_string(shape.H) + "_k" + std::to_string(shape.k),
        shape.T, shape.S, shape.H, shape.k, 1000 + cases.size());
    c.pattern = pattern;
    c.ranges = ranges;
    cases.push_back(c);
  };
  int rotation = 0;
  for (IndexerPattern pattern : kPatterns) {
    for (RangePattern ranges : kRanges) {
      add(pattern, ranges, kShapes[rotation % kNumShapes]);
      add(pattern, ranges, kShapes[(rotation + 3) % kNumShapes]);
      ++rotation;
    }
  }
  // Larger causal and context-parallel cases at the top of the size range.
  add(IndexerPattern::kRandom, RangePattern::kCausalChunk, {64, 20000, 64, 2048});
  add(IndexerPattern::kConcentrated, RangePattern::kContextParallelHalves, {64, 20000, 64, 2048});
  add(IndexerPattern::kZeroKvScales, RangePattern::kCausalChunk, {48, 12000, 32, 2048});
  // Degenerate shapes.
  add(IndexerPattern::kRandom, RangePattern::kCausalChunk, {0, 100, 64, 7});
  add(IndexerPattern::kRandom, RangePattern::kRagged, {6, 0, 32, 7});
  add(IndexerPattern::kRandom, RangePattern::kCausalChunk, {1, 1, 64, 1});
  add(IndexerPattern::kRandom, RangePattern::kCausalChunk, {3, 17, 32, 8192});
  return cases;
}

}  // namespace litetopk::testing
