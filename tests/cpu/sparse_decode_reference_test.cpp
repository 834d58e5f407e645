// sparse_decode_cpu and dense_decode_cpu against a naive fp64 oracle: delta = +infinity equals
// dense attention over the rebuilt keys (within fp32 rounding), the dense reference over original
// keys (any strides), the pseudo-max from exact scores (never 2-bit estimates), the estimates and
// keep decisions, kept blocks nested and monotone in delta, anchors always kept, outputs per
// dtype, empty sequences, identical heads, paged = contiguous.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "litetopk/float_bits.h"
#include "formats/sparse_kv_format.h"
#include "cpu/sparse_decode_cpu.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using testing::DecodeCase;
using testing::DecodeWorkload;
using testing::HostSparseCache;

constexpr int64_t kD = 128;
constexpr double kInf = std::numeric_limits<double>::infinity();

// A quantized case: the workload, its sparse cache, the rebuilt fp32 cache.
struct Prepared {
  DecodeWorkload w;
  HostSparseCache cache{DType::kFloat16, 0, 1, 128, 1, false};
  testing::RebuiltCache rebuilt;
  SparseKvCache view;

  explicit Prepared(const DecodeCase& c) : w(testing::make_decode_workload(c.spec)) {
    const Status status = testing::quantize_workload(&w, c.block_size, c.paged, &cache);
    EXPECT_TRUE(status.is_ok()) << status.to_string();
    view = cache.view();
    testing::rebuild_cache(view, w, &rebuilt);
  }

  SparseDecodeProblem problem(float delta, std::vector<float>* out, std::vector<float>* lse,
                              std::vector<uint8_t>* mask) {
    out->assign(static_cast<std::size_t>(w.batch * w.num_q_heads * kD), -7.0f);
    if (lse != nullptr) lse->assign(static_cast<std::size_t>(w.batch * w.num_q_heads), -7.0f);
    if (mask != nullptr) {
      mask->assign(static_cast<std::size_t>(w.batch * w.num_kv_heads * view.max_blocks), 7);
    }
    SparseDecodeProblem p;
    p.cache = view;
    p.q = w.q.data();
    p.num_q_heads = w.num_q_heads;
    p.softmax_scale = w.softmax_scale;
    p.delta = delta;
    p.out = out->data();
    p.out_dtype = DType::kFloat32;
    p.lse = lse ? lse->data() : nullptr;
    p.kept_mask = mask ? mask->data() : nullptr;
    return p;
  }
};

class SparseDecodeCases : public ::testing::TestWithParam<DecodeCase> {};

// Largest |value| of a case, for an absolute tolerance on outputs (a convex combination).
double max_abs_value(const DecodeWorkload& w) {
  double m = 0;
  for (int64_t b = 0; b < w.batch; ++b) {
    for (int64_t h = 0; h < w.num_kv_heads; ++h) {
      for (int64_t i = 0; i < w.lengths[b] * kD; ++i) {
        m = std::max(m, std::fabs(static_cast<double>(testing::element(
                            w.values.data(), w.dtype, (b * w.num_kv_heads + h) * w.capacity * kD + i))));
      }
    }
  }
  return m;
}

// delta = +infinity reads every block: the output is dense attention over the rebuilt keys, to
// fp32 rounding of the fp64 result; lse too; the mask marks every block read.
TEST_P(SparseDecodeCases, DeltaInfinityEqualsDenseOverRebuiltKeys) {
  Prepared prep(GetParam());
  std::vector<float> out, lse;
  std::vector<uint8_t> mask;
  double kept = -1;
  SparseDecodeCpuDiagnostics diag;
  diag.kept_fraction = &kept;
  ASSERT_TRUE(sparse_decode_cpu(prep.problem(static_cast<float>(kInf), &out, &lse, &mask), diag)
                  .is_ok());
  std::vector<double> want, want_lse;
  testing::naive_dense_decode(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads,
                              prep.w.softmax_scale, &want, &want_lse);
  const double vmax = max_abs_value(prep.w);
  EXPECT_TRUE(testing::near_all(out, want, 1e-6, 1e-6 * vmax, "out"));
  EXPECT_TRUE(testing::near_all(lse, want_lse, 1e-6, 1e-6, "lse"));
  EXPECT_EQ(kept, 1.0);
  for (int64_t b = 0; b < prep.w.batch; ++b) {
    const int64_t blocks = (prep.w.lengths[b] + prep.view.block_size - 1) / prep.view.block_size;
    for (int64_t h = 0; h < prep.w.num_kv_heads; ++h) {
      for (int64_t j = 0; j < prep.view.max_blocks; ++j) {
        EXPECT_EQ(mask[(b * prep.w.num_kv_heads + h) * prep.view.max_blocks + j], j < blocks ? 1 : 7)
            << "b " << b << " h " << h << " j " << j;
      }
    }
  }
  // dense_decode_cpu over the rebuilt fp32 cache agrees too.
  std::vector<float> dense_out(out.size()), dense_lse(lse.size());
  DenseDecodeProblem d;
  d.cache = prep.rebuilt.cache;
  d.q = prep.rebuilt.q.data();
  d.num_q_heads = prep.w.num_q_heads;
  d.softmax_scale = prep.w.softmax_scale;
  d.out = dense_out.data();
  d.out_dtype = DType::kFloat32;
  d.lse = dense_lse.data();
  ASSERT_TRUE(dense_decode_cpu(d).is_ok());
  EXPECT_TRUE(testing::near_all(dense_out, want, 1e-6, 1e-6 * vmax, "dense_decode_cpu out"));
}

// dense_decode_cpu over the original fp16/bf16 keys = the naive oracle.
TEST_P(SparseDecodeCases, DenseDecodeMatchesNaive) {
  DecodeWorkload w = testing::make_decode_workload(GetParam().spec);
  std::vector<float> out(static_cast<std::size_t>(w.batch * w.num_q_heads * kD));
  std::vector<float> lse(static_cast<std::size_t>(w.batch * w.num_q_heads));
  DenseDecodeProblem p = w.dense_problem(out.data(), DType::kFloat32);
  p.lse = lse.data();
  ASSERT_TRUE(dense_decode_cpu(p).is_ok());
  std::vector<double> want, want_lse;
  testing::naive_dense_decode(w.dense(), w.q.data(), w.num_q_heads, w.softmax_scale, &want,
                              &want_lse);
  const double vmax = max_abs_value(w);
  EXPECT_TRUE(testing::near_all(out, want, 1e-6, 1e-6 * vmax, "out"));
  EXPECT_TRUE(testing::near_all(lse, want_lse, 1e-6, 1e-6, "lse"));
}

// The pseudo-max is the max of the exact logits (rebuilt keys) of the anchors; estimates are
// scale * max_t q . (s L); the mask is exactly "anchor or some head's estimate >= pm - delta".
TEST_P(SparseDecodeCases, PseudoMaxEstimatesAndDecisions) {
  const DecodeCase& c = GetParam();
  Prepared prep(c);
  const int64_t bs = c.block_size, mb = prep.view.max_blocks;
  const int64_t hq_count = prep.w.num_q_heads, group = hq_count / prep.w.num_kv_heads;
  std::vector<double> pm(static_cast<std::size_t>(prep.w.batch * hq_count), -1);
  std::vector<double> est(static_cast<std::size_t>(prep.w.batch * hq_count * mb), -1);
  SparseDecodeCpuDiagnostics diag;
  diag.pseudo_max = pm.data();
  diag.block_estimate = est.data();
  std::vector<float> out;
  std::vector<uint8_t> mask;
  const float delta = 2.0f;
  ASSERT_TRUE(sparse_decode_cpu(prep.problem(delta, &out, nullptr, &mask), diag).is_ok());
  const cpu::SparseCacheView view(prep.view);
  for (int64_t b = 0; b < prep.w.batch; ++b) {
    const int64_t len = prep.w.lengths[b], nf = len / bs;
    for (int64_t hq = 0; hq < hq_count; ++hq) {
      const int64_t h = hq / group;
      const std::vector<double> logits = testing::naive_logits(
          prep.rebuilt.cache, prep.rebuilt.q.data(), hq_count, prep.w.softmax_scale, b, hq);
      double want_pm = -kInf;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t j = t / bs;
        if (j == 0 || j == nf - 1 || j == nf) want_pm = std::max(want_pm, logits[t]);
      }
      if (len == 0) {
        EXPECT_EQ(pm[b * hq_count + hq], -kInf);
      } else {
        EXPECT_NEAR(pm[b * hq_count + hq], want_pm, 1e-9 * (1 + std::fabs(want_pm)))
            << "b " << b << " head " << hq;
      }
      for (int64_t j = 0; j < mb; ++j) {
        const double got = est[(b * hq_count + hq) * mb + j];
        if (j >= nf) {
          EXPECT_EQ(got, -kInf);
          continue;
        }
        // Estimate from the packed codes and scales, independently of the rebuild helper.
        const int64_t slot = view.slot(b, h, j);
        double best = -kInf;
        for (int64_t t = 0; t < bs; ++t) {
          double s = 0;
          for (int64_t ch = 0; ch < kD; ++ch) {
            const uint32_t code = (view.codes(slot)[t * kD / 4 + ch / 4] >> (2 * (ch % 4))) & 3u;
            const double scale = testing::element(prep.cache.key_scales.data(), prep.w.dtype,
                                                  view.scale_offset(slot) + ch);
            s += static_cast<double>(prep.rebuilt.q[(b * hq_count + hq) * kD + ch]) * scale *
                 (static_cast<double>(code) - 1.5);
          }
          best = std::max(best, s);
        }
        const double want = static_cast<double>(prep.w.softmax_scale) * best;
        EXPECT_NEAR(got, want, 1e-9 * (1 + std::fabs(want))) << "b " << b << " j " << j;
      }
    }
    for (int64_t h = 0; h < prep.w.num_kv_heads; ++h) {
      for (int64_t j = 0; j < nf; ++j) {
        // An anchor, or some query head of the group within delta of its pseudo-max.
        bool keep = j == 0 || j == nf - 1;
        for (int64_t g = 0; g < group; ++g) {
          const int64_t hq = h * group + g;
          keep = keep || est[(b * hq_count + hq) * mb + j] >= pm[b * hq_count + hq] - delta;
        }
        EXPECT_EQ(mask[(b * prep.w.num_kv_heads + h) * mb + j], keep ? 1 : 0)
            << "b " << b << " h " << h << " j " << j;
      }
      if (len % bs != 0) {
        EXPECT_EQ(mask[(b * prep.w.num_kv_heads + h) * mb + nf], 1);
      }
    }
  }
}

// The kept sets are nested as delta grows (so the kept fraction is monotone), anchors and the
// open block are kept even at delta = 0, and the output at each delta is exact attention over
// exactly the kept blocks.
TEST_P(SparseDecodeCases, KeptBlocksNestedInDelta) {
  const DecodeCase& c = GetParam();
  Prepared prep(c);
  const int64_t bs = c.block_size, mb = prep.view.max_blocks;
  std::vector<uint8_t> previous;
  double previous_fraction = -1;
  for (const float delta : {0.0f, 1.0f, 3.0f, 5.0f, 7.0f, 9.0f, 15.0f}) {
    std::vector<float> out;
    std::vector<uint8_t> mask;
    double kept = -1;
    SparseDecodeCpuDiagnostics diag;
    diag.kept_fraction = &kept;
    ASSERT_TRUE(sparse_decode_cpu(prep.problem(delta, &out, nullptr, &mask), diag).is_ok());
    EXPECT_GE(kept, previous_fraction) << "delta " << delta;
    previous_fraction = kept;
    for (int64_t b = 0; b < prep.w.batch; ++b) {
      const int64_t len = prep.w.lengths[b], nf = len / bs;
      for (int64_t h = 0; h < prep.w.num_kv_heads; ++h) {
        const uint8_t* m = &mask[(b * prep.w.num_kv_heads + h) * mb];
        if (nf > 0) {
          EXPECT_EQ(m[0], 1);
          EXPECT_EQ(m[nf - 1], 1);
        }
        if (len % bs != 0) {
          EXPECT_EQ(m[nf], 1);
        }
        if (!previous.empty()) {
          for (int64_t j = 0; j < nf; ++j) {
            EXPECT_LE(previous[(b * prep.w.num_kv_heads + h) * mb + j], m[j])
                << "delta " << delta << " b " << b << " h " << h << " j " << j;
          }
        }
      }
    }
    // Exact attention over the kept blocks: the naive softmax restricted to their tokens.
    const int64_t hq_count = prep.w.num_q_heads, group = hq_count / prep.w.num_kv_heads;
    std::vector<double> want(out.size(), 0.0);
    for (int64_t b = 0; b < prep.w.batch; ++b) {
      const int64_t len = prep.w.lengths[b];
      for (int64_t hq = 0; hq < hq_count && len > 0; ++hq) {
        const int64_t h = hq / group;
        const uint8_t* m = &mask[(b * prep.w.num_kv_heads + h) * mb];
        std::vector<double> logits = testing::naive_logits(
            prep.rebuilt.cache, prep.rebuilt.q.data(), hq_count, prep.w.softmax_scale, b, hq);
        double max = -kInf, sum = 0;
        for (int64_t t = 0; t < len; ++t) {
          if (m[t / bs]) max = std::max(max, logits[t]);
        }
        for (int64_t t = 0; t < len; ++t) sum += m[t / bs] ? std::exp(logits[t] - max) : 0.0;
        for (int64_t t = 0; t < len; ++t) {
          if (!m[t / bs]) continue;
          const double w = std::exp(logits[t] - max) / sum;
          for (int64_t ch = 0; ch < kD; ++ch) {
            want[(b * hq_count + hq) * kD + ch] +=
                w * static_cast<double>(prep.rebuilt.values[((b * prep.w.num_kv_heads + h) *
                                                                 prep.rebuilt.cache.capacity +
                                                             t) * kD + ch]);
          }
        }
      }
    }
    EXPECT_TRUE(testing::near_all(out, want, 1e-6, 1e-6 * max_abs_value(prep.w), "out"))
        << "delta " << delta;
  }
}

// Outputs rounded to fp16/bf16 are the fp32 outputs rounded; paged and contiguous caches give the
// same bits.
TEST_P(SparseDecodeCases, OutputDtypesAndPaging) {
  DecodeCase c = GetParam();
  Prepared prep(c);
  std::vector<float> out32;
  SparseDecodeProblem p = prep.problem(5.0f, &out32, nullptr, nullptr);
  ASSERT_TRUE(sparse_decode_cpu(p).is_ok());
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> out16(out32.size());
    p.out = out16.data();
    p.out_dtype = dtype;
    ASSERT_TRUE(sparse_decode_cpu(p).is_ok());
    for (std::size_t i = 0; i < out16.size(); ++i) {
      ASSERT_EQ(out16[i], float_bits::encode_score(out32[i], dtype)) << i;
    }
  }
  c.paged = !c.paged;
  Prepared other(c);
  std::vector<float> out_other;
  ASSERT_TRUE(sparse_decode_cpu(other.problem(5.0f, &out_other, nullptr, nullptr)).is_ok());
  EXPECT_EQ(out32, out_other);
}

INSTANTIATE_TEST_SUITE_P(Cases, SparseDecodeCases, ::testing::ValuesIn(testing::decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& param_info) {
                           return param_info.param.name;
                         });

// Empty sequences: zero output, lse = -inf, no mask entry written.
TEST(SparseDecodeCpu, EmptySequences) {
  DecodeCase c;
  c.spec.lengths = {0, 0};
  c.spec.capacity = 256;
  Prepared prep(c);
  std::vector<float> out, lse;
  std::vector<uint8_t> mask;
  ASSERT_TRUE(sparse_decode_cpu(prep.problem(3.0f, &out, &lse, &mask)).is_ok());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; }));
  EXPECT_TRUE(std::all_of(lse.begin(), lse.end(), [](float x) { return x == -HUGE_VALF; }));
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint8_t x) { return x == 7; }));
}

// With identical heads every query head of a sequence gets the same output and lse.
TEST(SparseDecodeCpu, IdenticalHeadsGiveIdenticalOutputs) {
  DecodeCase c;
  c.spec.lengths = {129, 3 * 128 + 5};
  c.spec.num_kv_heads = 3;
  c.spec.group_size = 4;
  c.spec.identical_heads = true;
  Prepared prep(c);
  std::vector<float> out, lse;
  ASSERT_TRUE(sparse_decode_cpu(prep.problem(4.0f, &out, &lse, nullptr)).is_ok());
  for (int64_t b = 0; b < prep.w.batch; ++b) {
    for (int64_t hq = 1; hq < prep.w.num_q_heads; ++hq) {
      EXPECT_EQ(lse[b * prep.w.num_q_heads + hq], lse[b * prep.w.num_q_heads]);
      EXPECT_TRUE(std::equal(out.begin() + (b * prep.w.num_q_heads + hq) * kD,
                             out.begin() + (b * prep.w.num_q_heads + hq + 1) * kD,
                             out.begin() + b * prep.w.num_q_heads * kD));
    }
  }
}

// The pseudo-max comes from exact scores, not 2-bit estimates. Every channel has scale s = 1
// (the other tokens at -1.5: amax 1.5). Block 0 holds a token at +1 in every channel: code +1.5 with
// residual -0.5 (stored as -0.5 + 2^-9, the nearest cell midpoint), so its exact logit is
// A (1 + 2^-9) with A = scale * sum(q), and its 2-bit estimate 1.5 A. Block 1
// holds a token at +0.5 (exact = estimate = A / 2); block 2 only -1.5s; block 3 is the last full
// block (-1.5s) and the tail is 5 tokens of -1.5s. With delta = 6 and A = 8.49:
//   exact pseudo-max A:        block 1 kept (A/2 = 4.24 >= A - 6 = 2.49)
//   estimated pseudo-max 1.5A: block 1 dropped (4.24 < 1.5A - 6 = 6.73)
TEST(SparseDecodeCpu, PseudoMaxComesFromExactScores) {
  constexpr int64_t bs = 128, blocks = 4, tail = 5, len = blocks * bs + tail;
  const auto f16 = [](float x) { return float_bits::f16_bits_from_f32(x); };
  std::vector<uint16_t> keys(static_cast<std::size_t>(len * kD), f16(-1.5f));
  std::vector<uint16_t> values(keys.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = f16(static_cast<float>(i % 7) - 3);
  for (int64_t ch = 0; ch < kD; ++ch) {
    keys[1 * kD + ch] = f16(1.0f);         // block 0, token 1
    keys[(bs + 3) * kD + ch] = f16(0.5f);  // block 1, token 3
  }
  std::vector<uint16_t> q(kD, f16(0.75f));
  int32_t length = len;
  DenseKvCache dense;
  dense.batch = 1;
  dense.num_kv_heads = 1;
  dense.capacity = len;
  dense.keys = keys.data();
  dense.values = values.data();
  dense.lengths = &length;
  HostSparseCache cache(DType::kFloat16, 1, 1, bs, blocks + 1, false);
  ASSERT_TRUE(sparse_decode_quantize_cpu(dense, cache.view()).is_ok());

  const double scale = 1.0 / std::sqrt(128.0);
  const double a = scale * 0.75 * kD;
  std::vector<float> out(kD);
  std::vector<uint8_t> mask(blocks + 1, 9);
  double pm = 0;
  std::vector<double> est(blocks + 1);
  SparseDecodeCpuDiagnostics diag;
  diag.pseudo_max = &pm;
  diag.block_estimate = est.data();
  SparseDecodeProblem p;
  p.cache = cache.view();
  p.q = q.data();
  p.num_q_heads = 1;
  p.delta = 6.0f;
  p.out = out.data();
  p.out_dtype = DType::kFloat32;
  p.kept_mask = mask.data();
  ASSERT_TRUE(sparse_decode_cpu(p, diag).is_ok());
  EXPECT_NEAR(pm, a * (1.0 + 1.0 / 512), 1e-12);  // exact scores of rebuilt keys, not 1.5 A
  EXPECT_NEAR(est[0], 1.5 * a, 1e-12);       // the 2-bit estimate overshoots
  EXPECT_NEAR(est[1], 0.5 * a, 1e-12);
  EXPECT_NEAR(est[2], -1.5 * a, 1e-12);
  EXPECT_LT(est[1], est[0] - 6.0);           // an estimated pseudo-max would drop block 1
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1, 0, 1, 1}));
}

}  // namespace
}  // namespace litetopk
