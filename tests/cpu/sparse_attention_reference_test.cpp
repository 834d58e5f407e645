// The sparse attention CPU reference (sparse_attention_cpu) against an independent brute force
// (natural-log softmax per query and head in fp64, converted to base 2 at the end) on small shapes:
// every h_q, d_qk 512 and 576, topk not a multiple of 64, -1 padding and every kind of
// out-of-range index, repeated indices, all-masked queries, s_kv = 0; and hand-worked cases whose
// answers are known exactly (one key, equal logits, a 2:1 weight ratio, a repeated token).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/float_bits.h"
#include "litetopk/attention.h"
#include "testkit/sparse_attention_workload.h"

namespace litetopk::testing {
namespace {

using testkit::IndexPattern;
using testkit::SparseAttentionSpec;
using testkit::SparseAttentionWorkload;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint16_t kSentinelBits = 0x7f81;  // a signalling-NaN bf16 pattern nobody writes
constexpr float kSentinel = 12345.0f;
constexpr int32_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMinInt32 = std::numeric_limits<int32_t>::min();

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

struct Outputs {
  std::vector<uint16_t> out;  // bf16 bits
  std::vector<float> max_logits, lse;
  float out_at(int64_t i) const { return f32_from_bf16_bits(out[size(i)]); }
};

// sparse_attention_cpu on `p` with sentinel-filled outputs.
Outputs run_reference(SparseAttentionProblem p, bool with_stats = true) {
  Outputs o;
  o.out.assign(size(p.s_q * p.h_q * p.d_v), kSentinelBits);
  o.max_logits.assign(size(p.s_q * p.h_q), kSentinel);
  o.lse.assign(o.max_logits.size(), kSentinel);
  p.out = o.out.data();
  p.max_logits = with_stats ? o.max_logits.data() : nullptr;
  p.lse = with_stats ? o.lse.data() : nullptr;
  const Status status = sparse_attention_cpu(p);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return o;
}

// ---- the brute force: fp64, natural logs, no shared code with the reference ----

struct Exact {
  std::vector<double> out;              // [s_q, h_q, d_v]
  std::vector<double> max_logits, lse;  // base 2; -inf for an empty query
};

Exact brute_force(const SparseAttentionProblem& p) {
  const auto* q = static_cast<const uint16_t*>(p.q);
  const auto* kv = static_cast<const uint16_t*>(p.kv);
  const auto value = [](const uint16_t* a, int64_t i) {
    return static_cast<double>(f32_from_bf16_bits(a[i]));
  };
  Exact e;
  e.out.assign(size(p.s_q * p.h_q * p.d_v), 0.0);
  e.max_logits.assign(size(p.s_q * p.h_q), -std::numeric_limits<double>::infinity());
  e.lse = e.max_logits;
  for (int64_t s = 0; s < p.s_q; ++s) {
    std::vector<int64_t> tokens;  // one per valid slot, repeats kept
    for (int64_t j = 0; j < p.topk; ++j) {
      const int32_t t = p.indices[s * p.topk + j];
      if (t >= 0 && static_cast<int64_t>(t) < p.s_kv) tokens.push_back(t);
    }
    if (tokens.empty()) continue;
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t r = s * p.h_q + h;
      std::vector<double> logit;  // natural-log units
      for (int64_t t : tokens) {
        double dot = 0.0;
        for (int64_t c = 0; c < p.d_qk; ++c) {
          dot += value(q, r * p.d_qk + c) * value(kv, t * p.d_qk + c);
        }
        logit.push_back(static_cast<double>(p.sm_scale) * dot);
      }
      const double m = *std::max_element(logit.begin(), logit.end());
      double z = 0.0;
      for (double l : logit) z += std::exp(l - m);
      const double lse_e = m + std::log(z);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const double w = std::exp(logit[i] - lse_e);
        for (int64_t c = 0; c < p.d_v; ++c) {
          e.out[size(r * p.d_v + c)] += w * value(kv, tokens[i] * p.d_qk + c);
        }
      }
      e.max_logits[size(r)] = m / std::log(2.0);
      e.lse[size(r)] = lse_e / std::log(2.0);
    }
  }
  return e;
}

// out within one bf16 rounding (2^-8 relative: fp64 -> fp32 -> bf16 may round twice) plus a
// tiny absolute slack for sums that cancel; max_logits and lse within fp32 rounding.
void expect_matches(const Outputs& got, const Exact& want, const std::string& label) {
  SCOPED_TRACE(label);
  int failures = 0;
  for (std::size_t i = 0; i < want.out.size() && failures < 5; ++i) {
    const double w = want.out[i];
    const double g = f32_from_bf16_bits(got.out[i]);
    if (!(std::abs(g - w) <= std::abs(w) * 0x1p-8 + 1e-6)) {
      ADD_FAILURE() << "out[" << i << "] = " << g << ", want " << w;
      ++failures;
    }
  }
  for (std::size_t i = 0; i < want.lse.size() && failures < 5; ++i) {
    for (const auto& [name, g, w] :
         {std::make_tuple("max_logits", got.max_logits[i], want.max_logits[i]),
          std::make_tuple("lse", got.lse[i], want.lse[i])}) {
      const bool ok = std::isinf(w) ? g == static_cast<float>(w)
                                    : std::abs(g - w) <= 1e-6 * std::max(1.0, std::abs(w));
      if (!ok) {
        ADD_FAILURE() << name << "[" << i << "] = " << g << ", want " << w;
        ++failures;
      }
    }
  }
}

SparseAttentionSpec small_spec(int64_t h_q, int64_t d_qk, uint64_t seed) {
  SparseAttentionSpec spec;
  spec.s_q = 3;
  spec.s_kv = 90;
  spec.h_q = h_q;
  spec.d_qk = d_qk;
  spec.topk = 37;  // not a multiple of any tile
  spec.padding_fraction = 0.15;
  spec.out_of_range_fraction = 0.15;
  spec.seed = seed;
  return spec;
}

// ---- against the brute force ----

TEST(SparseAttentionReference, MatchesBruteForceForEveryShape) {
  for (int64_t h_q : {16, 32, 64, 128}) {
    for (int64_t d_qk : {512, 576}) {
      SparseAttentionWorkload w = make_sparse_attention_workload(small_spec(h_q, d_qk, 7));
      const int64_t topk = w.spec.topk;
      // Query 0 repeats a token (slot 1 = slot 0, twice more in its tail); query 2 attends to
      // nothing (-1 and every kind of out-of-range value).
      int32_t* row0 = w.indices.data();
      const int32_t repeated =
          *std::find_if(row0, row0 + topk, [&](int32_t t) { return t >= 0 && t < w.spec.s_kv; });
      row0[0] = row0[1] = row0[topk - 1] = row0[topk - 2] = repeated;
      int32_t* row2 = w.indices.data() + 2 * topk;
      const int32_t masked[] = {-1, -2, kMinInt32, static_cast<int32_t>(w.spec.s_kv), kMaxInt32};
      for (int64_t j = 0; j < topk; ++j) row2[j] = masked[j % 5];
      const SparseAttentionProblem p = w.host_problem();
      const Outputs got = run_reference(p);
      expect_matches(got, brute_force(p),
                     "h_q " + std::to_string(h_q) + ", d_qk " + std::to_string(d_qk));
      for (int64_t h = 0; h < h_q; ++h) {
        EXPECT_EQ(got.lse[size(2 * h_q + h)], -kInf);
        EXPECT_EQ(got.max_logits[size(2 * h_q + h)], -kInf);
      }
      for (int64_t c = 0; c < h_q * 512; ++c) {
        ASSERT_EQ(got.out[size(2 * h_q * 512 + c)], 0) << "the empty query's out is +0";
      }
    }
  }
}

TEST(SparseAttentionReference, MatchesBruteForceOnGroupedRowsAndScales) {
  // Groups of 4 sharing 60% at the chunk's edge (10 queries: groups of 4, 4, 2), a peaky softmax
  // (q_std 3), a negative scale and a zero scale (uniform weights).
  SparseAttentionSpec spec;
  spec.s_q = 10;
  spec.s_kv = 700;
  spec.h_q = 16;
  spec.d_qk = 576;
  spec.topk = 65;
  spec.pattern = IndexPattern::kGroupShared;
  spec.group = 4;
  spec.shared_fraction = 0.6;
  spec.padding_fraction = 0.1;
  spec.q_std = 3.0;
  spec.seed = 11;
  const SparseAttentionWorkload w = make_sparse_attention_workload(spec);
  for (float scale : {w.sm_scale, -0.03f, 0.0f}) {
    SparseAttentionProblem p = w.host_problem();
    p.sm_scale = scale;
    expect_matches(run_reference(p), brute_force(p), "sm_scale " + std::to_string(scale));
  }
}

// ---- hand-worked cases ----

// A problem over hand-filled arrays: h_q 16, d_qk 512, d_v 512.
struct Tiny {
  static constexpr int64_t H = 16, D = 512;
  int64_t s_q, s_kv, topk;
  std::vector<uint16_t> q, kv;
  std::vector<int32_t> indices;

  Tiny(int64_t queries, int64_t rows, int64_t slots)
      : s_q(queries),
        s_kv(rows),
        topk(slots),
        q(size(queries * H * D), 0),
        kv(size(rows * D), 0),
        indices(size(queries * slots), -1) {}

  void set_q(int64_t s, int64_t h, int64_t c, float v) {
    q[size((s * H + h) * D + c)] = bf16_bits_from_f32(v);
  }
  void set_kv(int64_t t, int64_t c, float v) { kv[size(t * D + c)] = bf16_bits_from_f32(v); }
  SparseAttentionProblem problem(float sm_scale) const {
    SparseAttentionProblem p;
    p.q = q.data();
    p.kv = kv.data();
    p.indices = indices.data();
    p.s_q = s_q;
    p.s_kv = s_kv;
    p.h_q = H;
    p.d_qk = D;
    p.d_v = 512;
    p.topk = topk;
    p.sm_scale = sm_scale;
    return p;
  }
};

constexpr double kLog2e = 1.4426950408889634;

TEST(SparseAttentionReference, OneKeyGivesItsValueRowsAndItsLogit) {
  Tiny t(1, 4, 5);
  for (int64_t c = 0; c < Tiny::D; ++c) t.set_kv(2, c, static_cast<float>(c % 7) - 3.0f);
  t.set_q(0, 3, 1, 2.0f);         // head 3: dot = 2 * kv[2, 1] = 2 * (-2) = -4
  t.indices = {-1, 9, 2, -5, 4};  // one valid slot: token 2
  const Outputs o = run_reference(t.problem(0.25f));
  for (int64_t h = 0; h < Tiny::H; ++h) {
    const double logit = (h == 3 ? -4.0 : 0.0) * 0.25 * kLog2e;
    EXPECT_FLOAT_EQ(o.max_logits[size(h)], static_cast<float>(logit)) << h;
    EXPECT_FLOAT_EQ(o.lse[size(h)], static_cast<float>(logit)) << h;  // log2(2^l) = l
    for (int64_t c = 0; c < Tiny::D; ++c) {
      ASSERT_EQ(o.out_at(h * Tiny::D + c), static_cast<float>(c % 7) - 3.0f) << h << " " << c;
    }
  }
}

TEST(SparseAttentionReference, EqualLogitsAverageAndRepeatsCountTwice) {
  // q = 0: every logit is 0, so lse = log2(valid slots) and out is the mean over the slots.
  Tiny t(2, 3, 4);
  for (int64_t c = 0; c < Tiny::D; ++c) {
    t.set_kv(0, c, 1.0f);
    t.set_kv(1, c, 4.0f);
    t.set_kv(2, c, -8.0f);  // never selected
  }
  t.indices = {0, 1, -1, 3,   // query 0: tokens 0, 1: mean 2.5
               0, 1, 1,  1};  // query 1: token 1 three times: (1 + 3 * 4) / 4 = 3.25
  const Outputs o = run_reference(t.problem(0.5f));
  for (int64_t h = 0; h < Tiny::H; ++h) {
    EXPECT_EQ(o.max_logits[size(h)], 0.0f);
    EXPECT_FLOAT_EQ(o.lse[size(h)], 1.0f);            // log2(2)
    EXPECT_FLOAT_EQ(o.lse[size(Tiny::H + h)], 2.0f);  // log2(4)
    EXPECT_EQ(o.out_at(h * Tiny::D + 17), 2.5f);
    EXPECT_EQ(o.out_at((Tiny::H + h) * Tiny::D + 300), 3.25f);
  }
}

TEST(SparseAttentionReference, LogitsTwoApartInBaseTwoWeighFourToOne) {
  // Key 0 is e0, key 1 is 5 everywhere but column 0. Head 0's q = 2 e0 gives dots 2 and 0; with
  // sm_scale = ln(2) the base-2 logits are the dots (up to the float scale's rounding), so the
  // weights are 2^2 : 2^0 = 4 : 1. Head 1's q = 0 weighs them equally.
  Tiny t(1, 2, 2);
  t.set_kv(0, 0, 1.0f);
  for (int64_t c = 1; c < Tiny::D; ++c) t.set_kv(1, c, 5.0f);
  t.set_q(0, 0, 0, 2.0f);
  t.indices = {0, 1};
  const Outputs o = run_reference(t.problem(static_cast<float>(std::log(2.0))));
  EXPECT_NEAR(o.max_logits[0], 2.0f, 1e-6);
  EXPECT_NEAR(o.lse[0], std::log2(5.0), 1e-6);                           // log2(2^2 + 2^0)
  EXPECT_EQ(o.out_at(0), f32_from_bf16_bits(bf16_bits_from_f32(0.8f)));  // (4 * 1 + 0) / 5
  EXPECT_EQ(o.out_at(1), 1.0f);                                          // (0 + 5) / 5
  EXPECT_EQ(o.max_logits[1], 0.0f);
  EXPECT_FLOAT_EQ(o.lse[1], 1.0f);
  EXPECT_EQ(o.out_at(Tiny::D), 0.5f);
  EXPECT_EQ(o.out_at(Tiny::D + 100), 2.5f);
}

TEST(SparseAttentionReference, EmptyQueriesAndNoKv) {
  // s_kv = 0: every slot is skipped and kv may be null.
  Tiny t(2, 0, 3);
  t.indices = {0, -1, 5, kMaxInt32, kMinInt32, 1};
  SparseAttentionProblem p = t.problem(1.0f);
  p.kv = nullptr;
  const Outputs o = run_reference(p);
  for (float v : o.lse) EXPECT_EQ(v, -kInf);
  for (float v : o.max_logits) EXPECT_EQ(v, -kInf);
  for (uint16_t v : o.out) ASSERT_EQ(v, 0);
  // s_q = 0: nothing to do, nothing needed.
  SparseAttentionProblem none = t.problem(1.0f);
  none.s_q = 0;
  none.q = none.kv = nullptr;
  none.indices = nullptr;
  EXPECT_TRUE(sparse_attention_cpu(none).is_ok());
}

// ---- invariances ----

TEST(SparseAttentionReference, SkippedSlotsChangeNothingAndStatsAreOptional) {
  SparseAttentionSpec spec = small_spec(32, 576, 3);
  spec.padding_fraction = spec.out_of_range_fraction = 0.0;
  spec.s_q = 2;
  const SparseAttentionWorkload w = make_sparse_attention_workload(spec);
  const Outputs plain = run_reference(w.host_problem());
  // The same valid slots in the same order with skipped ones in between: bit-identical.
  std::vector<int32_t> padded;
  for (int64_t s = 0; s < spec.s_q; ++s) {
    for (int64_t j = 0; j < spec.topk; ++j) {
      padded.push_back(w.indices[size(s * spec.topk + j)]);
      padded.push_back(j % 2 ? -1 : static_cast<int32_t>(spec.s_kv + j));
    }
  }
  SparseAttentionProblem p = w.host_problem();
  p.indices = padded.data();
  p.topk = 2 * spec.topk;
  const Outputs with_skips = run_reference(p);
  EXPECT_EQ(with_skips.out, plain.out);
  EXPECT_EQ(with_skips.lse, plain.lse);
  EXPECT_EQ(with_skips.max_logits, plain.max_logits);
  // Without max_logits and lse, out is the same.
  EXPECT_EQ(run_reference(w.host_problem(), false).out, plain.out);
  // A reversed row: max_logits exactly, lse and out up to rounding.
  std::vector<int32_t> reversed = w.indices;
  for (int64_t s = 0; s < spec.s_q; ++s) {
    std::reverse(reversed.begin() + s * spec.topk, reversed.begin() + (s + 1) * spec.topk);
  }
  p = w.host_problem();
  p.indices = reversed.data();
  const Outputs flipped = run_reference(p);
  EXPECT_EQ(flipped.max_logits, plain.max_logits);
  for (std::size_t i = 0; i < plain.lse.size(); ++i) {
    EXPECT_NEAR(flipped.lse[i], plain.lse[i], 1e-6 * std::max(1.0f, std::abs(plain.lse[i])));
  }
  for (std::size_t i = 0; i < plain.out.size(); ++i) {
    const float a = f32_from_bf16_bits(flipped.out[i]), b = f32_from_bf16_bits(plain.out[i]);
    ASSERT_LE(std::abs(a - b), std::abs(b) * 0x1p-8f + 1e-6f) << i;
  }
}

}  // namespace
}  // namespace litetopk::testing
