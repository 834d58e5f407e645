// make_sparse_attention_workload and the group-union metric (see sparse_attention_workload.h).
#include "testkit/sparse_attention_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "litetopk/float_bits.h"
#include "testkit/counter_random.h"
#include "testkit/indexer_generators.h"

namespace litetopk::testkit {

namespace {

// Independent streams of one seed, one per array.
enum Stream : uint64_t { kQ = 1, kKv, kTokens, kOutOfRange, kShuffle };

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMinInt32 = std::numeric_limits<int32_t>::min();

// Random numbers of one generation unit (a query or a group): a counter over hash64.
class UnitRandom {
 public:
  UnitRandom(uint64_t base, int64_t unit) : state_(hash64(base + static_cast<uint64_t>(unit))) {}
  uint64_t next() { return hash64(state_++); }
  // Uniform in [0, n) for n >= 1.
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

int64_t rounded_count(double fraction, int64_t n) {
  return static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
}

struct RowCounts {
  int64_t padding = 0, out_of_range = 0, valid = 0, shared = 0;
};

RowCounts row_counts(const SparseAttentionSpec& spec) {
  RowCounts c;
  c.padding = rounded_count(spec.padding_fraction, spec.topk);
  c.out_of_range = rounded_count(spec.out_of_range_fraction, spec.topk);
  c.valid = spec.topk - c.padding - c.out_of_range;
  if (spec.pattern == IndexPattern::kGroupShared) {
    c.shared = rounded_count(spec.shared_fraction, c.valid);
  }
  return c;
}

// Queries per group (the first group's size: min(G, s_q)).
int64_t group_size(const SparseAttentionSpec& spec) {
  return spec.pattern == IndexPattern::kGroupShared ? spec.group : 1;
}

// Distinct tokens one unit draws: a query's valid tokens (kRandom) or a full group's union.
int64_t tokens_per_unit(const RowCounts& c, int64_t members) {
  return c.shared + members * (c.valid - c.shared);
}

bool fraction_ok(double f) { return std::isfinite(f) && f >= 0.0 && f <= 1.0; }

// `count` distinct tokens of [0, s_kv) in a random order (Floyd's algorithm, then a shuffle).
// `taken` is s_kv flags, all false on entry and on return.
std::vector<int32_t> distinct_tokens(int64_t count, int64_t s_kv, UnitRandom& random,
                                     std::vector<uint8_t>& taken) {
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<std::size_t>(count));
  for (int64_t j = s_kv - count; j < s_kv; ++j) {
    int64_t t = random.below(j + 1);
    if (taken[t]) t = j;
    taken[t] = 1;
    tokens.push_back(static_cast<int32_t>(t));
  }
  for (int32_t t : tokens) taken[t] = 0;
  for (int64_t i = count - 1; i > 0; --i) std::swap(tokens[i], tokens[random.below(i + 1)]);
  return tokens;
}

// An index outside [0, s_kv) other than -1.
int32_t out_of_range_index(int64_t s_kv, UnitRandom& random) {
  switch (random.below(6)) {
    case 0:
      return static_cast<int32_t>(s_kv);
    case 1: {  // in (s_kv, INT32_MAX]
      const int64_t above = s_kv + 1 + random.below(std::max<int64_t>(kMaxInt32 - s_kv, 1));
      return static_cast<int32_t>(std::min(kMaxInt32, above));
    }
    case 2:
      return std::numeric_limits<int32_t>::max();
    case 3:
      return -2;
    case 4:
      return static_cast<int32_t>(-2 - random.below(kMaxInt32 - 1));
    default:
      return kMinInt32;
  }
}

void fill_bf16_normal(std::vector<uint16_t>* out, int64_t count, double stddev, uint64_t base) {
  out->resize(static_cast<std::size_t>(count));
  uint16_t* data = out->data();
  parallel_fill(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double x = standard_normal(hash64(base + static_cast<uint64_t>(i))) * stddev;
      data[i] = float_bits::bf16_bits_from_f32(static_cast<float>(x));
    }
  });
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g%%", fraction * 100.0);
  return text;
}

}  // namespace

std::string sparse_attention_spec_error(const SparseAttentionSpec& spec) {
  if (spec.s_q < 0) return "s_q must be >= 0, got " + std::to_string(spec.s_q);
  if (spec.s_kv < 0 || spec.s_kv > kMaxInt32) {
    return "s_kv must be in [0, 2^31 - 1], got " + std::to_string(spec.s_kv);
  }
  if (spec.h_q < 1 || spec.d_qk < 1) {
    return "h_q and d_qk must be >= 1, got h_q " + std::to_string(spec.h_q) + ", d_qk " +
           std::to_string(spec.d_qk);
  }
  if (spec.d_v < 1 || spec.d_v > spec.d_qk) {
    return "d_v must be in [1, d_qk], got " + std::to_string(spec.d_v);
  }
  if (spec.topk < 1 || spec.topk > kMaxInt32) {
    return "topk must be in [1, 2^31 - 1], got " + std::to_string(spec.topk);
  }
  if (!std::isfinite(spec.sm_scale)) return "sm_scale must be finite";
  if (spec.group < 1) return "group must be >= 1, got " + std::to_string(spec.group);
  if (!fraction_ok(spec.shared_fraction) || !fraction_ok(spec.padding_fraction) ||
      !fraction_ok(spec.out_of_range_fraction)) {
    return "shared_fraction, padding_fraction and out_of_range_fraction must be in [0, 1]";
  }
  if (!(spec.q_std >= 0.0 && std::isfinite(spec.q_std)) ||
      !(spec.kv_std >= 0.0 && std::isfinite(spec.kv_std))) {
    return "q_std and kv_std must be finite and >= 0";
  }
  const RowCounts c = row_counts(spec);
  if (c.valid < 0) {
    return "padding (" + std::to_string(c.padding) + ") + out-of-range entries (" +
           std::to_string(c.out_of_range) + ") must be <= topk = " + std::to_string(spec.topk);
  }
  const int64_t members = std::min(group_size(spec), std::max<int64_t>(spec.s_q, 1));
  const int64_t needed = tokens_per_unit(c, members);
  if (needed > spec.s_kv) {
    return "s_kv = " + std::to_string(spec.s_kv) + " holds fewer than the " +
           std::to_string(needed) + " distinct tokens " +
           (spec.pattern == IndexPattern::kGroupShared ? "a group's union needs" : "a row needs");
  }
  return "";
}

std::string sparse_attention_shape_label(const SparseAttentionSpec& spec) {
  std::string label = "s_q=" + std::to_string(spec.s_q) + " s_kv=" + std::to_string(spec.s_kv) +
                      " h_q=" + std::to_string(spec.h_q) + " d_qk=" + std::to_string(spec.d_qk) +
                      " topk=" + std::to_string(spec.topk);
  if (spec.pattern == IndexPattern::kRandom) {
    label += " random";
  } else {
    label += " groups of " + std::to_string(spec.group) + ", " + percent(spec.shared_fraction) +
             " shared";
  }
  if (spec.padding_fraction > 0) label += ", " + percent(spec.padding_fraction) + " padding";
  if (spec.out_of_range_fraction > 0) {
    label += ", " + percent(spec.out_of_range_fraction) + " out of range";
  }
  return label;
}

int64_t SparseAttentionWorkload::valid_pairs() const {
  int64_t pairs = 0;
  for (int32_t t : indices) pairs += (t >= 0 && t < spec.s_kv) ? 1 : 0;
  return pairs;
}

double SparseAttentionWorkload::flops() const {
  return 2.0 * static_cast<double>(valid_pairs()) *
         static_cast<double>(spec.h_q * (spec.d_qk + spec.d_v));
}

SparseAttentionProblem SparseAttentionWorkload::host_problem() const {
  SparseAttentionProblem p;
  p.q = q.data();
  p.kv = kv.data();
  p.indices = indices.data();
  p.s_q = spec.s_q;
  p.s_kv = spec.s_kv;
  p.h_q = spec.h_q;
  p.d_qk = spec.d_qk;
  p.d_v = spec.d_v;
  p.topk = spec.topk;
  p.sm_scale = sm_scale;
  return p;
}

std::vector<int32_t> make_sparse_attention_indices(const SparseAttentionSpec& spec) {
  const RowCounts c = row_counts(spec);
  const int64_t G = group_size(spec);
  const int64_t units = (spec.s_q + G - 1) / G;
  const uint64_t token_base = stream_base(spec.seed, kTokens);
  const uint64_t out_base = stream_base(spec.seed, kOutOfRange);
  const uint64_t shuffle_base = stream_base(spec.seed, kShuffle);
  std::vector<int32_t> indices(static_cast<std::size_t>(spec.s_q * spec.topk), -1);
  parallel_for(units, [&](int64_t unit) {
    const int64_t first = unit * G;
    const int64_t members = std::min(G, spec.s_q - first);
    thread_local std::vector<uint8_t> taken;  // all zero between uses
    if (static_cast<int64_t>(taken.size()) < spec.s_kv) taken.resize(spec.s_kv, 0);
    UnitRandom token_random(token_base, unit);
    // The unit's tokens: [0, shared) every member's, then each member's own block.
    const std::vector<int32_t> tokens =
        distinct_tokens(tokens_per_unit(c, members), spec.s_kv, token_random, taken);
    const int64_t own = c.valid - c.shared;
    for (int64_t m = 0; m < members; ++m) {
      const int64_t query = first + m;
      int32_t* row = indices.data() + query * spec.topk;
      std::copy_n(tokens.begin(), c.shared, row);
      std::copy_n(tokens.begin() + c.shared + m * own, own, row + c.shared);
      UnitRandom out_random(out_base, query);
      for (int64_t i = c.valid; i < c.valid + c.out_of_range; ++i) {
        row[i] = out_of_range_index(spec.s_kv, out_random);
      }
      // The valid and out-of-range entries in a random order; the padding stays at the end.
      UnitRandom shuffle_random(shuffle_base, query);
      for (int64_t i = c.valid + c.out_of_range - 1; i > 0; --i) {
        std::swap(row[i], row[shuffle_random.below(i + 1)]);
      }
    }
  });
  return indices;
}

SparseAttentionWorkload make_sparse_attention_workload(const SparseAttentionSpec& spec) {
  SparseAttentionWorkload w;
  w.spec = spec;
  w.sm_scale = spec.sm_scale != 0.0f
                   ? spec.sm_scale
                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.d_qk)));
  fill_bf16_normal(&w.q, spec.s_q * spec.h_q * spec.d_qk, spec.q_std, stream_base(spec.seed, kQ));
  fill_bf16_normal(&w.kv, spec.s_kv * spec.d_qk, spec.kv_std, stream_base(spec.seed, kKv));
  w.indices = make_sparse_attention_indices(spec);
  return w;
}

double GroupUnionStats::reuse() const {
  return total_union > 0 ? static_cast<double>(total_distinct) / static_cast<double>(total_union)
                         : 1.0;
}

GroupUnionStats measure_group_unions(const int32_t* indices, int64_t s_q, int64_t topk,
                                     int64_t s_kv, int64_t group) {
  GroupUnionStats stats;
  stats.group = group;
  const int64_t groups = group >= 1 ? (s_q + group - 1) / group : 0;
  stats.unions.assign(static_cast<std::size_t>(groups), 0);
  std::vector<int64_t> distinct(static_cast<std::size_t>(groups), 0);
  std::vector<double> overlap(static_cast<std::size_t>(groups), -1.0);
  parallel_for(groups, [&](int64_t g) {
    std::vector<int32_t> all, mine;
    int64_t sum = 0, largest = 0;
    for (int64_t query = g * group; query < std::min(s_q, (g + 1) * group); ++query) {
      mine.clear();
      for (int64_t j = 0; j < topk; ++j) {
        const int32_t t = indices[query * topk + j];
        if (t >= 0 && t < s_kv) mine.push_back(t);
      }
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
      const auto n = static_cast<int64_t>(mine.size());
      sum += n;
      largest = std::max(largest, n);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    const auto u = static_cast<int64_t>(std::unique(all.begin(), all.end()) - all.begin());
    stats.unions[g] = u;
    distinct[g] = sum;
    if (sum > largest) {
      overlap[g] = static_cast<double>(sum - u) / static_cast<double>(sum - largest);
    }
  });
  double overlap_sum = 0.0;
  for (int64_t g = 0; g < groups; ++g) {
    stats.total_union += stats.unions[g];
    stats.total_distinct += distinct[g];
    if (overlap[g] >= 0.0) {
      overlap_sum += overlap[g];
      ++stats.overlap_groups;
    }
  }
  if (groups > 0) {
    stats.mean_union = static_cast<double>(stats.total_union) / static_cast<double>(groups);
  }
  if (stats.overlap_groups > 0) {
    stats.mean_overlap = overlap_sum / static_cast<double>(stats.overlap_groups);
  }
  return stats;
}

}  // namespace litetopk::testkit
