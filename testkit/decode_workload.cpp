// Synthetic decode workloads, host sparse-cache storage, and the delta trade-off table
// (testkit/decode_workload.h).
#include "testkit/decode_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "litetopk/float_bits.h"
#include "testkit/parallel_for.h"

namespace litetopk::testkit {

const char* decode_pattern_name(DecodePattern pattern) {
  switch (pattern) {
    case DecodePattern::kNeedles: return "needles";
    case DecodePattern::kFlat: return "flat";
    case DecodePattern::kExtremes: return "extremes";
    case DecodePattern::kSpread: return "spread";
    case DecodePattern::kPassages: return "passages";
    case DecodePattern::kRope: return "rope";
  }
  return "invalid";
}

namespace {

constexpr int64_t kD = kSparseDecodeHeadDim;

// kNeedles parameters (documented in the header).
constexpr double kBulkLogitStd = 1.5;
constexpr double kQueryNoise = 0.25;
constexpr double kSinkOffsets[] = {16.0, 15.0, 14.0, 13.5};
constexpr int64_t kLocalWindow = 64;
constexpr double kLocalNewest = 14.0, kLocalOldest = 9.0;
constexpr int64_t kNeedles = 6;
constexpr double kNeedleLow = 14.5, kNeedleHigh = 16.5;
constexpr double kHeavyRate = 1.0 / 32.0, kHeavyMean = 2.5, kHeavyCap = 13.0;
constexpr int kOutlierChannels = 4;
constexpr double kOutlierFactor = 5.0;
// kSpread parameters.
constexpr double kSpreadSinkOffsets[] = {8.0, 7.5, 7.0, 6.5};
constexpr double kSpreadLocalNewest = 6.0, kSpreadLocalOldest = 3.0;
constexpr double kWarmRate = 0.25, kWarmLow = 2.0, kWarmHigh = 6.0;
// kPassages parameters.
constexpr double kPassageSinkOffsets[] = {11.0, 10.0, 9.0, 9.0};
constexpr double kPassageLocalNewest = 10.0, kPassageLocalOldest = 6.0;
constexpr int64_t kPassages = 8, kPassageTokens = 512;
constexpr double kPassageMean = 8.0, kPassageStd = 1.0;
// kRope parameters.
constexpr double kRopeTheta = 500000.0;
constexpr int64_t kRopeRelevantPairs = 16;  // the lowest-frequency rotary pairs carry u
// kFlat: logit std.
constexpr double kFlatLogitStd = 1.0;
// kExtremes: query std.
constexpr double kExtremeQueryStd = 1.2e-4;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

uint16_t to_bits(double value, DType dtype) {
  return static_cast<uint16_t>(float_bits::encode_score(static_cast<float>(value), dtype));
}

// Element i of a host array of dtype, exactly as a float.
float load_float(const void* base, DType dtype, int64_t i) {
  return float_bits::decode_score(float_bits::load_score(base, dtype, i), dtype);
}

uint16_t nan_bits(DType dtype) { return dtype == DType::kFloat16 ? 0x7e00 : 0x7fc0; }

std::vector<double> normal_vector(std::mt19937_64& rng, int64_t n, double std = 1.0) {
  std::normal_distribution<double> normal(0.0, std);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

void normalize(std::vector<double>* v) {
  const double n = norm(*v);
  for (double& x : *v) x /= n;
}

// Per-channel key scales: log-normal with a few outlier channels.
std::vector<double> channel_scales(std::mt19937_64& rng) {
  std::vector<double> c = normal_vector(rng, kD, 0.5);
  for (double& x : c) x = std::exp(x);
  std::uniform_int_distribution<int64_t> channel(0, kD - 1);
  for (int i = 0; i < kOutlierChannels; ++i) c[channel(rng)] *= kOutlierFactor;
  return c;
}

// beta such that scale * q . (c (.) n) ~ N(0, std^2) for q = beta * dir.
double query_gain(const std::vector<double>& dir, const std::vector<double>& c, double scale,
                  double std) {
  double s = 0;
  for (int64_t i = 0; i < kD; ++i) s += dir[i] * dir[i] * c[i] * c[i];
  return std / (scale * std::sqrt(s));
}

struct PairOut {
  uint16_t* q;       // [group, D]
  uint16_t* keys;    // [capacity, D]
  uint16_t* values;  // [capacity, D]
  TokenKind* kinds;  // [capacity]
};

// Rotates x [D] by RoPE at `position` (pairs (i, i + D/2), theta_i = kRopeTheta^(-2i/D)).
void rotate(std::vector<double>* x, double position) {
  for (int64_t i = 0; i < kD / 2; ++i) {
    const double angle =
        position * std::pow(kRopeTheta, -2.0 * static_cast<double>(i) / static_cast<double>(kD));
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = (*x)[i], b = (*x)[i + kD / 2];
    (*x)[i] = a * c - b * s;
    (*x)[i + kD / 2] = a * s + b * c;
  }
}

// The logit offsets of kSpread and kPassages (header) over the tokens after the sinks.
void structured_offsets(std::mt19937_64& rng, DecodePattern pattern, int64_t len,
                        std::vector<double>* offset, std::vector<TokenKind>* kind) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const bool spread = pattern == DecodePattern::kSpread;
  const double* sinks = spread ? kSpreadSinkOffsets : kPassageSinkOffsets;
  const double newest = spread ? kSpreadLocalNewest : kPassageLocalNewest;
  const double oldest = spread ? kSpreadLocalOldest : kPassageLocalOldest;
  if (spread) {
    for (int64_t t = 0; t < len; ++t) {
      if (uniform(rng) < kWarmRate) {
        (*kind)[t] = TokenKind::kHeavy;
        (*offset)[t] = kWarmLow + (kWarmHigh - kWarmLow) * uniform(rng);
      }
    }
  } else {
    std::normal_distribution<double> normal(kPassageMean, kPassageStd);
    const int64_t span = std::min(kPassageTokens, len / (4 * kPassages));
    for (int64_t i = 0; i < kPassages && span > 0; ++i) {
      std::uniform_int_distribution<int64_t> start(0, len - span);
      const int64_t first = start(rng);
      for (int64_t t = first; t < first + span; ++t) {
        (*kind)[t] = TokenKind::kNeedle;
        (*offset)[t] = normal(rng);
      }
    }
  }
  const int64_t local_begin = std::max<int64_t>(std::min<int64_t>(4, len), len - kLocalWindow);
  for (int64_t t = local_begin; t < len; ++t) {
    (*kind)[t] = TokenKind::kLocal;
    const double age = static_cast<double>(len - 1 - t) / static_cast<double>(kLocalWindow - 1);
    (*offset)[t] = newest - (newest - oldest) * age;
  }
  for (int64_t t = 0; t < std::min<int64_t>(4, len); ++t) {
    (*kind)[t] = TokenKind::kSink;
    (*offset)[t] = sinks[t];
  }
}

// The logit offsets of kNeedles and kRope (header).
void needle_offsets(std::mt19937_64& rng, int64_t len, std::vector<double>* offset_out,
                    std::vector<TokenKind>* kind_out) {
  std::vector<double>& offset = *offset_out;
  std::vector<TokenKind>& kind = *kind_out;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::exponential_distribution<double> heavy(1.0 / kHeavyMean);
  for (int64_t t = 0; t < len; ++t) {
    if (uniform(rng) < kHeavyRate) {
      kind[t] = TokenKind::kHeavy;
      offset[t] = std::min(heavy(rng), kHeavyCap);
    }
  }
  const int64_t sinks = std::min<int64_t>(4, len);
  const int64_t local_begin = std::max(sinks, len - kLocalWindow);
  const int64_t middle = local_begin - sinks;  // room for needles
  const int64_t needles = std::min(kNeedles, middle / 16);
  std::uniform_int_distribution<int64_t> position(sinks, std::max(sinks, local_begin - 1));
  for (int64_t i = 0; i < needles; ++i) {
    const int64_t t = position(rng);
    kind[t] = TokenKind::kNeedle;
    offset[t] = kNeedleLow + (kNeedleHigh - kNeedleLow) * uniform(rng);
  }
  for (int64_t t = local_begin; t < len; ++t) {
    kind[t] = TokenKind::kLocal;
    const double age = static_cast<double>(len - 1 - t) / static_cast<double>(kLocalWindow - 1);
    offset[t] = kLocalNewest - (kLocalNewest - kLocalOldest) * age;
  }
  for (int64_t t = 0; t < sinks; ++t) {
    kind[t] = TokenKind::kSink;
    offset[t] = kSinkOffsets[t];
  }
}

// kNeedles, kSpread, kPassages and kRope: keys c (.) n_t + a_t u with the pattern's offsets.
void fill_needles(std::mt19937_64& rng, const DecodeWorkloadSpec& spec, int64_t len,
                  double scale, const PairOut& out) {
  const DType dtype = spec.dtype;
  const int64_t group = spec.group_size;
  const bool rope = spec.pattern == DecodePattern::kRope;
  const std::vector<double> c = channel_scales(rng);
  std::vector<double> u = normal_vector(rng, kD);
  if (rope) {
    for (int64_t i = 0; i < kD / 2 - kRopeRelevantPairs; ++i) u[i] = u[i + kD / 2] = 0.0;
  }
  normalize(&u);
  // Queries.
  double gain_along_u = 0;
  std::vector<double> eps = normal_vector(rng, kD, 1.0 / std::sqrt(static_cast<double>(kD)));
  for (int64_t g = 0; g < group; ++g) {
    if (!spec.identical_heads && g > 0) {
      eps = normal_vector(rng, kD, 1.0 / std::sqrt(static_cast<double>(kD)));
    }
    std::vector<double> dir(static_cast<std::size_t>(kD));
    for (int64_t i = 0; i < kD; ++i) dir[i] = u[i] + kQueryNoise * eps[i];
    normalize(&dir);
    const double beta = query_gain(dir, c, scale, kBulkLogitStd);
    double along = 0;
    for (int64_t i = 0; i < kD; ++i) {
      out.q[g * kD + i] = to_bits(beta * dir[i], dtype);
      along += dir[i] * u[i];
    }
    gain_along_u += scale * beta * along / static_cast<double>(group);
  }
  if (rope) {  // the query at position len
    for (int64_t g = 0; g < group; ++g) {
      std::vector<double> qg(static_cast<std::size_t>(kD));
      for (int64_t i = 0; i < kD; ++i) qg[i] = static_cast<double>(load_float(out.q, dtype, g * kD + i));
      rotate(&qg, static_cast<double>(len));
      for (int64_t i = 0; i < kD; ++i) out.q[g * kD + i] = to_bits(qg[i], dtype);
    }
  }
  // Token kinds and logit offsets.
  std::vector<double> offset(static_cast<std::size_t>(len), 0.0);
  std::vector<TokenKind> kind(static_cast<std::size_t>(len), TokenKind::kBulk);
  if (spec.pattern == DecodePattern::kSpread || spec.pattern == DecodePattern::kPassages) {
    structured_offsets(rng, spec.pattern, len, &offset, &kind);
  } else {
    needle_offsets(rng, len, &offset, &kind);
  }
  // Keys and values.
  std::vector<double> key(static_cast<std::size_t>(kD));
  for (int64_t t = 0; t < len; ++t) {
    const std::vector<double> n = normal_vector(rng, kD);
    const std::vector<double> v = normal_vector(rng, kD);
    const double a = offset[t] / gain_along_u;
    for (int64_t i = 0; i < kD; ++i) key[i] = c[i] * n[i] + a * u[i];
    if (rope) rotate(&key, static_cast<double>(t));
    for (int64_t i = 0; i < kD; ++i) {
      out.keys[t * kD + i] = to_bits(key[i], dtype);
      out.values[t * kD + i] = to_bits(v[i], dtype);
    }
    out.kinds[t] = kind[t];
  }
}

void fill_flat(std::mt19937_64& rng, const DecodeWorkloadSpec& spec, int64_t len, double scale,
               const PairOut& out) {
  const DType dtype = spec.dtype;
  const std::vector<double> c = channel_scales(rng);
  std::vector<double> dir = normal_vector(rng, kD);
  for (int64_t g = 0; g < spec.group_size; ++g) {
    if (!spec.identical_heads && g > 0) dir = normal_vector(rng, kD);
    normalize(&dir);
    const double beta = query_gain(dir, c, scale, kFlatLogitStd);
    for (int64_t i = 0; i < kD; ++i) out.q[g * kD + i] = to_bits(beta * dir[i], dtype);
  }
  for (int64_t t = 0; t < len; ++t) {
    const std::vector<double> n = normal_vector(rng, kD);
    const std::vector<double> v = normal_vector(rng, kD);
    for (int64_t i = 0; i < kD; ++i) {
      out.keys[t * kD + i] = to_bits(c[i] * n[i], dtype);
      out.values[t * kD + i] = to_bits(v[i], dtype);
    }
    out.kinds[t] = TokenKind::kBulk;
  }
}

void fill_extremes(std::mt19937_64& rng, const DecodeWorkloadSpec& spec, int64_t len,
                   const PairOut& out) {
  const DType dtype = spec.dtype;
  constexpr double kMax = 65504.0;
  const double subnormal = std::ldexp(1.0, -24);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::uniform_int_distribution<int> mantissa(1, 1023);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto sign = [&] { return uniform(rng) < 0.5 ? -1.0 : 1.0; };
  std::vector<double> q = normal_vector(rng, kD, kExtremeQueryStd);
  for (int64_t g = 0; g < spec.group_size; ++g) {
    if (!spec.identical_heads && g > 0) q = normal_vector(rng, kD, kExtremeQueryStd);
    for (int64_t i = 0; i < kD; ++i) out.q[g * kD + i] = to_bits(q[i], dtype);
  }
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t i = 0; i < kD; ++i) {
      double k = 0;
      switch (i % 4) {
        case 0:
          k = sign() * (uniform(rng) < 1.0 / 16 ? kMax : 30000.0 + (kMax - 30000.0) * uniform(rng));
          break;
        case 1: k = sign() * subnormal * mantissa(rng); break;
        case 2: k = sign() * 0.0; break;
        default: k = normal(rng); break;
      }
      const double r = uniform(rng);
      const double v = r < 0.125  ? sign() * kMax
                       : r < 0.25 ? sign() * subnormal * mantissa(rng)
                                  : 1000.0 * normal(rng);
      out.keys[t * kD + i] = to_bits(k, dtype);
      out.values[t * kD + i] = to_bits(v, dtype);
    }
    out.kinds[t] = TokenKind::kBulk;
  }
}

}  // namespace

DenseKvCache DecodeWorkload::dense() {
  DenseKvCache c;
  c.dtype = dtype;
  c.batch = batch;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim;
  c.capacity = capacity;
  c.keys = keys.data();
  c.values = values.data();
  c.lengths = lengths.data();
  return c;
}

DenseDecodeProblem DecodeWorkload::dense_problem(void* out, DType out_dtype) {
  DenseDecodeProblem p;
  p.cache = dense();
  p.q = q.data();
  p.num_q_heads = num_q_heads;
  p.softmax_scale = softmax_scale;
  p.out = out;
  p.out_dtype = out_dtype;
  return p;
}

SparseDecodeProblem DecodeWorkload::sparse_problem(const SparseKvCache& cache, float delta,
                                                   float* out, uint8_t* kept_mask) {
  SparseDecodeProblem p;
  p.cache = cache;
  p.q = q.data();
  p.num_q_heads = num_q_heads;
  p.softmax_scale = softmax_scale;
  p.delta = delta;
  p.out = out;
  p.out_dtype = DType::kFloat32;
  p.kept_mask = kept_mask;
  return p;
}

DecodeFidelityProblem DecodeWorkload::fidelity_problem(const float* out, const uint8_t* kept_mask,
                                                       int64_t block_size, int64_t mask_blocks) {
  DecodeFidelityProblem f;
  f.reference = dense_problem(nullptr, DType::kFloat32);
  f.out = out;
  f.out_dtype = DType::kFloat32;
  f.kept_mask = kept_mask;
  f.block_size = block_size;
  f.mask_blocks = mask_blocks;
  return f;
}

Status DecodeWorkload::dense_over_rebuilt(const SparseKvCache& cache,
                                          std::vector<float>* out) const {
  // An fp32 cache and an fp32 copy of the queries (the same values): a dense cache's queries
  // have its dtype.
  DenseKvCache rebuilt;
  rebuilt.dtype = DType::kFloat32;
  rebuilt.batch = batch;
  rebuilt.num_kv_heads = num_kv_heads;
  rebuilt.capacity = cache.max_blocks * cache.block_size;
  std::vector<float> rebuilt_keys(
      static_cast<std::size_t>(batch * num_kv_heads * rebuilt.capacity * kD));
  std::vector<float> rebuilt_values(rebuilt_keys.size());
  std::vector<int32_t> rebuilt_lengths(static_cast<std::size_t>(batch));
  rebuilt.keys = rebuilt_keys.data();
  rebuilt.values = rebuilt_values.data();
  rebuilt.lengths = rebuilt_lengths.data();
  if (Status status = sparse_kv_rebuild_cpu(cache, rebuilt); !status) return status;
  std::vector<float> q32(q.size());
  for (std::size_t i = 0; i < q32.size(); ++i) {
    q32[i] = load_float(q.data(), dtype, static_cast<int64_t>(i));
  }
  out->assign(static_cast<std::size_t>(batch * num_q_heads * kD), 0.0f);
  DenseDecodeProblem p;
  p.cache = rebuilt;
  p.q = q32.data();
  p.num_q_heads = num_q_heads;
  p.softmax_scale = softmax_scale;
  p.out = out->data();
  p.out_dtype = DType::kFloat32;
  return dense_decode_cpu(p);
}

DecodeWorkload make_decode_workload(const DecodeWorkloadSpec& spec) {
  if (spec.dtype != DType::kFloat16 && spec.dtype != DType::kBFloat16) {
    throw std::invalid_argument("make_decode_workload: dtype must be float16 or bfloat16");
  }
  if (spec.group_size < 1 || spec.group_size > kSparseDecodeMaxGroupSize) {
    throw std::invalid_argument("make_decode_workload: group_size must be in [1, 16]");
  }
  if (spec.num_kv_heads < 1) throw std::invalid_argument("make_decode_workload: num_kv_heads < 1");
  int64_t longest = 0;
  for (int32_t len : spec.lengths) {
    if (len < 0) throw std::invalid_argument("make_decode_workload: negative length");
    longest = std::max<int64_t>(longest, len);
  }
  DecodeWorkload w;
  w.dtype = spec.dtype;
  w.batch = static_cast<int64_t>(spec.lengths.size());
  w.num_kv_heads = spec.num_kv_heads;
  w.num_q_heads = spec.num_kv_heads * spec.group_size;
  w.capacity = spec.capacity > 0 ? spec.capacity : std::max<int64_t>(1, longest);
  if (longest > w.capacity) {
    throw std::invalid_argument("make_decode_workload: a length exceeds the capacity");
  }
  w.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)));
  w.lengths = spec.lengths;
  const auto tokens = static_cast<std::size_t>(w.batch * w.num_kv_heads * w.capacity);
  // Tokens past a sequence's length hold NaN: a reader that strays there shows it.
  w.keys.assign(tokens * kD, nan_bits(spec.dtype));
  w.values.assign(tokens * kD, nan_bits(spec.dtype));
  w.kinds.assign(tokens, TokenKind::kBulk);
  w.q.assign(static_cast<std::size_t>(w.batch * w.num_q_heads * kD), 0);
  const double scale = static_cast<double>(w.softmax_scale);
  // Every (sequence, KV head) pair draws from its own generator and writes its own rows, so the
  // pairs run in parallel and the result does not depend on the thread count.
  parallel_for(w.batch * w.num_kv_heads, [&](int64_t pair) {
    const int64_t b = pair / w.num_kv_heads, h = pair % w.num_kv_heads;
    std::mt19937_64 rng(mix(mix(spec.seed, static_cast<uint64_t>(b)),
                            spec.identical_heads ? 0u : static_cast<uint64_t>(h) + 1));
    const PairOut out{&w.q[(b * w.num_q_heads + h * spec.group_size) * kD],
                      &w.keys[pair * w.capacity * kD], &w.values[pair * w.capacity * kD],
                      &w.kinds[pair * w.capacity]};
    const int64_t len = spec.lengths[b];
    switch (spec.pattern) {
      case DecodePattern::kNeedles:
      case DecodePattern::kSpread:
      case DecodePattern::kPassages:
      case DecodePattern::kRope: fill_needles(rng, spec, len, scale, out); break;
      case DecodePattern::kFlat: fill_flat(rng, spec, len, scale, out); break;
      case DecodePattern::kExtremes: fill_extremes(rng, spec, len, out); break;
    }
  });
  return w;
}

HostSparseCache::HostSparseCache(DType dtype, int64_t batch, int64_t num_kv_heads,
                                 int64_t block_size, int64_t max_blocks, bool paged,
                                 uint64_t seed) {
  shape.dtype = dtype;
  shape.batch = batch;
  shape.num_kv_heads = num_kv_heads;
  shape.head_dim = kD;
  shape.block_size = block_size;
  shape.max_blocks = max_blocks;
  int64_t pages = 0;
  if (paged) {
    pages = batch * max_blocks + 3;
    std::vector<int32_t> order(static_cast<std::size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    block_table.assign(order.begin(), order.begin() + batch * max_blocks);
    shape.num_pages = pages;
  }
  const auto slots =
      static_cast<std::size_t>(paged ? pages * num_kv_heads : batch * num_kv_heads * max_blocks);
  const auto bs = static_cast<std::size_t>(block_size);
  const uint16_t nan = nan_bits(dtype);
  // Unwritten entries hold NaN (scales, values, tail) or bytes no writer produces (residual
  // 0x80, the int8 -128): reading one shows.
  key_codes.assign(slots * bs * kD / 4, 0xa5);
  key_residuals.assign(slots * bs * kD, 0x80);
  key_scales.assign(slots * kD, nan);
  values.assign(slots * bs * kD, nan);
  tail_keys.assign(static_cast<std::size_t>(batch * num_kv_heads) * bs * kD, nan);
  lengths.assign(static_cast<std::size_t>(batch), 0);
}

SparseKvCache HostSparseCache::view() {
  SparseKvCache c = shape;
  c.block_table = block_table.empty() ? nullptr : block_table.data();
  c.lengths = lengths.data();
  c.key_codes = key_codes.data();
  c.key_scales = key_scales.data();
  c.key_residuals = key_residuals.data();
  c.values = values.data();
  c.tail_keys = tail_keys.data();
  return c;
}

Status quantize_workload(DecodeWorkload* w, int64_t block_size, bool paged, HostSparseCache* out,
                         bool append_headroom) {
  if (block_size != 128 && block_size != 256) {
    return Status(StatusCode::kInvalidArgument,
                  "block_size must be 128 or 256, got " + std::to_string(block_size));
  }
  return run_guarded("quantize_workload", [&] {
    const int64_t max_blocks = (w->capacity + block_size - 1) / block_size + (append_headroom ? 1 : 0);
    *out = HostSparseCache(w->dtype, w->batch, w->num_kv_heads, block_size,
                           std::max<int64_t>(1, max_blocks), paged);
    return sparse_decode_quantize_cpu(w->dense(), out->view());
  });
}

namespace {

double rel_l2(const std::vector<float>& out, const std::vector<float>& ref) {
  double err = 0, norm2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double e = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    err += e * e;
    norm2 += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return norm2 > 0 ? std::sqrt(err / norm2) : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
}

}  // namespace

Status sparse_decode_tradeoff_cpu(const DecodeWorkloadSpec& spec, int64_t block_size,
                                  const std::vector<float>& deltas,
                                  std::vector<TradeoffRow>* rows) {
  std::vector<DecodeSelection> selections;
  for (float delta : deltas) selections.push_back({SparseSelection::kDelta, delta});
  return sparse_decode_tradeoff_cpu(spec, block_size, selections, rows);
}

Status sparse_decode_tradeoff_cpu(const DecodeWorkloadSpec& spec, int64_t block_size,
                                  const std::vector<DecodeSelection>& selections,
                                  std::vector<TradeoffRow>* rows) {
  if (rows == nullptr) return Status(StatusCode::kInvalidArgument, "rows must not be null");
  return run_guarded("sparse_decode_tradeoff_cpu", [&]() -> Status {
    DecodeWorkload w = make_decode_workload(spec);
    HostSparseCache cache(w.dtype, 0, 1, block_size, 1, false);
    Status status = quantize_workload(&w, block_size, false, &cache);
    if (!status) return status;
    const SparseKvCache view = cache.view();

    std::vector<float> rebuilt_out;
    if (!(status = w.dense_over_rebuilt(view, &rebuilt_out))) return status;
    const std::size_t out_size = rebuilt_out.size();

    rows->clear();
    std::vector<float> out(out_size);
    std::vector<uint8_t> mask(static_cast<std::size_t>(w.batch * w.num_kv_heads * view.max_blocks));
    for (const DecodeSelection& selection : selections) {
      SparseDecodeProblem problem = w.sparse_problem(view, selection.value, out.data(), mask.data());
      problem.selection = selection.rule;
      problem.mass_target = selection.value;
      if (!(status = sparse_decode_cpu(problem))) return status;
      TradeoffRow row;
      row.delta = selection.value;
      row.rule = selection.rule;
      status = decode_fidelity_cpu(
          w.fidelity_problem(out.data(), mask.data(), block_size, view.max_blocks),
          &row.vs_original);
      if (!status) return status;
      row.rel_l2_vs_rebuilt = rel_l2(out, rebuilt_out);
      rows->push_back(row);
    }
    return Status::ok();
  });
}

std::string format_tradeoff_table(const std::string& title, const std::vector<TradeoffRow>& rows) {
  std::string s = title + "\n\n";
  s += "| delta | kept blocks | read bytes vs dense | kept mass (mean / min) | "
       "top-1% tokens' blocks recall (mean / min) | top-1% blocks recall (mean / min) | "
       "rel L2 vs fp64 dense (all / worst head) | rel L2 vs dense on rebuilt keys |\n";
  s += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  char line[512];
  for (const TradeoffRow& r : rows) {
    const DecodeFidelity& f = r.vs_original;
    char delta[32];
    if (std::isinf(r.delta)) {
      std::snprintf(delta, sizeof(delta), "inf");
    } else {
      std::snprintf(delta, sizeof(delta), "%g", static_cast<double>(r.delta));
    }
    std::snprintf(line, sizeof(line),
                  "| %s | %.3f | %.3f | %.5f / %.5f | %.3f / %.3f | %.3f / %.3f | %.2e / %.2e | "
                  "%.2e |\n",
                  delta, f.kept_fraction, f.read_fraction, f.kept_mass_mean, f.kept_mass_min,
                  f.top1_recall, f.top1_recall_min, f.top1_block_recall, f.top1_block_recall_min,
                  f.rel_l2, f.max_head_rel_l2, r.rel_l2_vs_rebuilt);
    s += line;
  }
  return s;
}

Status mass_by_token_kind(DecodeWorkload* w, std::vector<double>* shares) {
  if (shares == nullptr) return Status(StatusCode::kInvalidArgument, "shares must not be null");
  return run_guarded("mass_by_token_kind", [&] {
    shares->assign(kNumTokenKinds, 0.0);
    const DenseKvCache c = w->dense();
    const int64_t group = w->num_q_heads / w->num_kv_heads;
    const double scale = static_cast<double>(w->softmax_scale);
    int64_t heads = 0;
    std::vector<double> q(kD), logits;
    for (int64_t b = 0; b < w->batch; ++b) {
      const int64_t len = w->lengths[b];
      if (len == 0) continue;
      logits.resize(static_cast<std::size_t>(len));
      for (int64_t hq = 0; hq < w->num_q_heads; ++hq) {
        const int64_t h = hq / group;
        for (int64_t i = 0; i < kD; ++i) {
          q[i] = static_cast<double>(load_float(w->q.data(), w->dtype, (b * w->num_q_heads + hq) * kD + i));
        }
        for (int64_t t = 0; t < len; ++t) {
          const int64_t at = ((b * w->num_kv_heads + h) * w->capacity + t) * kD;  // dense()'s layout
          double logit = 0;
          for (int64_t i = 0; i < kD; ++i) {
            logit += q[i] * static_cast<double>(load_float(c.keys, c.dtype, at + i));
          }
          logits[t] = scale * logit;
        }
        const double max = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (double& l : logits) sum += (l = std::exp(l - max));
        const TokenKind* kinds = &w->kinds[(b * w->num_kv_heads + h) * w->capacity];
        for (int64_t t = 0; t < len; ++t) {
          (*shares)[static_cast<int>(kinds[t])] += logits[t] / sum;
        }
        ++heads;
      }
    }
    if (heads > 0) {
      for (double& s : *shares) s /= static_cast<double>(heads);
    }
    return Status::ok();
  });
}

Status run_guarded(const char* what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal, std::string(what) + ": out of host memory");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string(what) + ": " + e.what());
  }
}

}  // namespace litetopk::testkit
