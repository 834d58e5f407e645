// sparse_decode_cpu's bounded-mass selection (SparseSelection::kMass) against an oracle written
// from the contract: the block masses from the codes and scales (naive fp64), and for every
// head and candidate the cumulative mass C_ij of the candidates no heavier than it; a block is
// read when it is an anchor or some head has C_ij > mass_target * T_i. Also: mass_target 0 reads
// every block (the delta = inf output), the kept sets are nested in the target, every head's
// estimated skipped mass is within its budget, and equal blocks are skipped or kept together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "formats/sparse_kv_format.h"
#include "litetopk/float_bits.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using testing::DecodeCase;
using testing::DecodeWorkload;
using testing::HostSparseCache;

constexpr int64_t kD = 128;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct MassRun {
  std::vector<float> out;
  std::vector<uint8_t> mask;
  std::vector<double> log_mass;  // [batch, num_q_heads, max_blocks]
};

Status run_mass(DecodeWorkload& w, const SparseKvCache& view, SparseSelection rule, float value,
                MassRun* run) {
  run->out.assign(static_cast<std::size_t>(w.batch * w.num_q_heads * kD), -7.0f);
  run->mask.assign(static_cast<std::size_t>(w.batch * w.num_kv_heads * view.max_blocks), 7);
  run->log_mass.assign(static_cast<std::size_t>(w.batch * w.num_q_heads * view.max_blocks), 0.0);
  SparseDecodeProblem p = w.sparse_problem(view, value, run->out.data(), run->mask.data());
  p.selection = rule;
  p.mass_target = value;
  SparseDecodeCpuDiagnostics diag;
  diag.block_log_mass = run->log_mass.data();
  return sparse_decode_cpu(p, diag);
}

// log of sum_t exp(scale * q . (s * L_t)) over block j of (b, query head hq), from the raw cache.
double naive_log_mass(const DecodeWorkload& w, const SparseKvCache& c, int64_t b, int64_t hq,
                      int64_t j) {
  const int64_t group = w.num_q_heads / w.num_kv_heads, h = hq / group;
  const int64_t slot = sparse_kv::slot_index(c.block_table, c.num_kv_heads, c.max_blocks, b, h, j);
  const double scale = static_cast<double>(w.softmax_scale);
  std::vector<double> logits(static_cast<std::size_t>(c.block_size));
  for (int64_t t = 0; t < c.block_size; ++t) {
    const uint8_t* row = c.key_codes + (slot * c.block_size + t) * (kD / 4);
    double dot = 0;
    for (int64_t ch = 0; ch < kD; ++ch) {
      const double s = testing::element(c.key_scales, c.dtype, slot * kD + ch);
      const double level = sparse_kv::code_level(sparse_kv::unpack_code(row, ch));
      dot += static_cast<double>(testing::element(w.q.data(), w.dtype, (b * w.num_q_heads + hq) * kD + ch)) *
             s * level;
    }
    logits[t] = scale * dot;
  }
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double l : logits) sum += std::exp(l - m);
  return m + std::log(sum);
}

class SparseDecodeMassCases : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(SparseDecodeMassCases, MatchesTheContract) {
  const DecodeCase& dc = GetParam();
  DecodeWorkload w = testing::make_decode_workload(dc.spec);
  HostSparseCache cache(DType::kFloat16, 0, 1, 128, 1, false);
  ASSERT_TRUE(testing::quantize_workload(&w, dc.block_size, dc.paged, &cache).is_ok());
  const SparseKvCache view = cache.view();
  const int64_t group = w.num_q_heads / w.num_kv_heads, mb = view.max_blocks;

  MassRun all, delta_run;
  ASSERT_TRUE(run_mass(w, view, SparseSelection::kMass, 0.0f, &all).is_ok());
  ASSERT_TRUE(run_mass(w, view, SparseSelection::kDelta, INFINITY, &delta_run).is_ok());
  EXPECT_EQ(all.out, delta_run.out) << "mass_target 0 reads every block";
  EXPECT_EQ(all.log_mass, delta_run.log_mass) << "both selections report the same masses";

  std::vector<uint8_t> previous = all.mask;
  for (const float target : {0.001f, 0.01f, 0.1f, 0.5f}) {
    MassRun run;
    ASSERT_TRUE(run_mass(w, view, SparseSelection::kMass, target, &run).is_ok());
    for (int64_t b = 0; b < w.batch; ++b) {
      const int64_t len = w.lengths[b], nf = len / view.block_size;
      const int64_t used = nf + (len % view.block_size > 0 ? 1 : 0);
      for (int64_t h = 0; h < w.num_kv_heads; ++h) {
        // Per head: the naive masses relative to the heaviest block, and the budget.
        std::vector<std::vector<double>> mass(static_cast<std::size_t>(group));
        std::vector<double> budget(static_cast<std::size_t>(group));
        for (int64_t g = 0; g < group; ++g) {
          const int64_t hq = h * group + g;
          std::vector<double> lm(static_cast<std::size_t>(nf));
          for (int64_t j = 0; j < nf; ++j) {
            lm[j] = naive_log_mass(w, view, b, hq, j);
            const double got = run.log_mass[(b * w.num_q_heads + hq) * mb + j];
            ASSERT_NEAR(got, lm[j], 1e-9 * std::max(1.0, std::fabs(lm[j]))) << dc.name;
          }
          for (int64_t j = nf; j < mb; ++j) {
            ASSERT_EQ(run.log_mass[(b * w.num_q_heads + hq) * mb + j], kNegInf);
          }
          const double top = nf > 0 ? *std::max_element(lm.begin(), lm.end()) : 0.0;
          double total = 0;
          for (double& x : lm) total += (x = std::exp(x - top));
          mass[g] = lm;
          budget[g] = static_cast<double>(target) * total;
        }
        const uint8_t* mask = &run.mask[(b * w.num_kv_heads + h) * mb];
        std::vector<double> skipped(static_cast<std::size_t>(group), 0.0);
        for (int64_t j = 0; j < used; ++j) {
          const bool anchor = j == 0 || j == nf - 1 || j >= nf;
          bool want = anchor, ambiguous = false;
          for (int64_t g = 0; g < group && !anchor; ++g) {
            double cumulative = 0;
            for (int64_t k = 1; k < nf - 1; ++k) {
              if (mass[g][k] <= mass[g][j]) cumulative += mass[g][k];
            }
            want = want || cumulative > budget[g];
            ambiguous = ambiguous || std::fabs(cumulative - budget[g]) <= 1e-9 * budget[g];
          }
          if (!ambiguous) {
            ASSERT_EQ(mask[j], want ? 1 : 0) << dc.name << " target " << target << " b " << b
                                             << " h " << h << " block " << j;
          }
          if (mask[j] == 0) {
            for (int64_t g = 0; g < group; ++g) skipped[g] += mass[g][j];
          }
          // Nested: a smaller target reads a superset.
          ASSERT_LE(mask[j], previous[(b * w.num_kv_heads + h) * mb + j]) << dc.name;
        }
        for (int64_t g = 0; g < group; ++g) {
          ASSERT_LE(skipped[g], budget[g] * (1 + 1e-9)) << dc.name << " head " << g;
        }
      }
    }
    previous = run.mask;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SparseDecodeMassCases, ::testing::ValuesIn(testing::decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& param_info) {
                           return param_info.param.name;
                         });

// Identical heads and identical blocks: the equal masses are skipped or kept as a whole (with
// mass_target 0.5 and 6 equal candidates of 8 blocks, skipping all 6 would exceed the budget, so
// none is skipped: a run of ties never splits).
TEST(SparseDecodeMass, TiesAreSkippedOrKeptTogether) {
  constexpr int64_t bs = 128, blocks = 8;
  std::vector<uint16_t> keys(static_cast<std::size_t>(blocks * bs * kD));
  std::vector<uint16_t> values(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = float_bits::f16_bits_from_f32(static_cast<float>((i % kD) % 5) * 0.25f - 0.5f);
    values[i] = float_bits::f16_bits_from_f32(static_cast<float>(i % 3));
  }
  std::vector<uint16_t> q(kD, float_bits::f16_bits_from_f32(0.5f));
  int32_t length = static_cast<int32_t>(blocks * bs);
  DenseKvCache dense;
  dense.batch = 1;
  dense.num_kv_heads = 1;
  dense.capacity = length;
  dense.keys = keys.data();
  dense.values = values.data();
  dense.lengths = &length;
  HostSparseCache cache(DType::kFloat16, 1, 1, bs, blocks, false);
  ASSERT_TRUE(sparse_decode_quantize_cpu(dense, cache.view()).is_ok());
  for (const float target : {0.5f, 0.8f}) {
    std::vector<float> out(kD);
    std::vector<uint8_t> mask(blocks, 9);
    SparseDecodeProblem p;
    p.cache = cache.view();
    p.q = q.data();
    p.num_q_heads = 1;
    p.selection = SparseSelection::kMass;
    p.mass_target = target;
    p.out = out.data();
    p.out_dtype = DType::kFloat32;
    p.kept_mask = mask.data();
    ASSERT_TRUE(sparse_decode_cpu(p).is_ok());
    // Every block has the same mass m: T = 8m, the 6 candidates hold 6m = 0.75 T.
    const uint8_t candidates = target < 0.75f ? 1 : 0;
    EXPECT_EQ(mask, (std::vector<uint8_t>{1, candidates, candidates, candidates, candidates,
                                          candidates, candidates, 1}))
        << "target " << target;
  }
}

}  // namespace
}  // namespace litetopk
