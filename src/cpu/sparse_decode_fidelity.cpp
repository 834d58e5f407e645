// decode_fidelity_cpu: how far a decode result is from the fp64 dense reference, and what the
// block selection kept.
//
// Per (sequence b, KV head h), in parallel over the pairs, for each query head of the group:
// 1. Reference logits over tokens [0, len) of reference.cache in fp64, softmax weights p_t, the
//    reference output sum_t p_t v_t.
// 2. Squared error of the judged output and squared norm of the reference (global and per head).
// 3. Kept mass: sum of p_t over the tokens of read blocks (kept full blocks and the open block).
// 4. Top-1% recall: the ceil(len / 100) heaviest tokens (at least 1), the blocks holding them, the
//    share of those blocks that were read; and the same for the ceil(blocks / 100) heaviest
//    blocks by mass.
// Per (b, h): kept and full block counts, and the bytes a sparse kernel reads vs a dense one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "cpu/parallel_for.h"
#include "cpu/sparse_decode_cpu.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {

namespace {

struct HeadResult {
  double err2 = 0, ref2 = 0;
  double kept_mass = 1;
  int64_t top_blocks = 0, top_hits = 0;
  int64_t heavy_blocks = 0, heavy_hits = 0;
  bool valid = false;  // len > 0
};

struct PairResult {
  int64_t full = 0, kept = 0;
  double sparse_bytes = 0, dense_bytes = 0;
};

void judge_pair(const DecodeFidelityProblem& p, int64_t b, int64_t h, HeadResult* heads,
                PairResult* pair) {
  const DenseKvCache& c = p.reference.cache;
  const cpu::DenseCacheView view(c);
  const int64_t d = c.head_dim, hq = p.reference.num_q_heads;
  const int64_t group = hq / c.num_kv_heads;
  const double scale = detail::resolved_softmax_scale(p.reference.softmax_scale, d);
  const int64_t len = c.lengths[b];
  const int64_t bs = p.block_size;
  const int64_t nf = len / bs, nt = len - nf * bs;
  const uint8_t* mask =
      p.kept_mask != nullptr ? p.kept_mask + (b * c.num_kv_heads + h) * p.mask_blocks : nullptr;
  const auto block_read = [&](int64_t j) { return j >= nf || mask == nullptr || mask[j] != 0; };

  pair->full = nf;
  for (int64_t j = 0; j < nf; ++j) pair->kept += block_read(j) ? 1 : 0;
  const double bsd = static_cast<double>(bs * d), dd = static_cast<double>(d);
  pair->sparse_bytes = static_cast<double>(nf) * (bsd / 4.0 + 2.0 * dd) +
                       static_cast<double>(pair->kept) * 3.0 * bsd +
                       static_cast<double>(nt) * 4.0 * dd;
  pair->dense_bytes = static_cast<double>(len) * 4.0 * dd;
  if (len == 0) return;

  // 1. Logits of every head of the group.
  std::vector<double> q(static_cast<std::size_t>(group * d));
  for (int64_t i = 0; i < group * d; ++i) {
    q[i] = static_cast<double>(cpu::load_float(p.reference.q, c.dtype, (b * hq + h * group) * d + i));
  }
  std::vector<double> logits(static_cast<std::size_t>(group * len));
  std::vector<float> row(static_cast<std::size_t>(d));
  for (int64_t t = 0; t < len; ++t) {
    const int64_t at = view.offset(b, h, t);
    for (int64_t ch = 0; ch < d; ++ch) row[ch] = cpu::load_float(c.keys, c.dtype, at + ch);
    for (int64_t g = 0; g < group; ++g) logits[g * len + t] = scale * cpu::dot(&q[g * d], row.data(), d);
  }
  // Softmax weights in place.
  for (int64_t g = 0; g < group; ++g) {
    double* l = &logits[g * len];
    const double max = *std::max_element(l, l + len);
    double sum = 0;
    for (int64_t t = 0; t < len; ++t) sum += (l[t] = std::exp(l[t] - max));
    for (int64_t t = 0; t < len; ++t) l[t] /= sum;
  }
  // Reference outputs.
  std::vector<double> ref(static_cast<std::size_t>(group * d), 0.0);
  for (int64_t t = 0; t < len; ++t) {
    const int64_t at = view.offset(b, h, t);
    for (int64_t ch = 0; ch < d; ++ch) row[ch] = cpu::load_float(c.values, c.dtype, at + ch);
    for (int64_t g = 0; g < group; ++g) {
      const double w = logits[g * len + t];
      for (int64_t ch = 0; ch < d; ++ch) ref[g * d + ch] += w * static_cast<double>(row[ch]);
    }
  }

  std::vector<int64_t> order(static_cast<std::size_t>(len));
  std::vector<uint8_t> marked(static_cast<std::size_t>((len + bs - 1) / bs));
  std::vector<double> block_mass;
  std::vector<int64_t> block_order;
  const int64_t top = std::max<int64_t>(1, (len + 99) / 100);
  for (int64_t g = 0; g < group; ++g) {
    HeadResult& r = heads[g];
    r.valid = true;
    const int64_t out_row = (b * hq + h * group + g) * d;
    // 2. Errors.
    for (int64_t ch = 0; ch < d; ++ch) {
      const double o = static_cast<double>(cpu::load_float(p.out, p.out_dtype, out_row + ch));
      const double e = o - ref[g * d + ch];
      r.err2 += e * e;
      r.ref2 += ref[g * d + ch] * ref[g * d + ch];
    }
    // 3. Kept mass.
    const double* w = &logits[g * len];
    double mass = 0;
    for (int64_t t = 0; t < len; ++t) mass += block_read(t / bs) ? w[t] : 0.0;
    r.kept_mass = mass;
    // 4. Top-1% recall (ties broken by position).
    std::iota(order.begin(), order.end(), int64_t{0});
    std::nth_element(order.begin(), order.begin() + (top - 1), order.end(),
                     [&](int64_t x, int64_t y) { return w[x] > w[y] || (w[x] == w[y] && x < y); });
    std::fill(marked.begin(), marked.end(), 0);
    for (int64_t i = 0; i < top; ++i) marked[order[i] / bs] = 1;
    for (std::size_t j = 0; j < marked.size(); ++j) {
      if (!marked[j]) continue;
      ++r.top_blocks;
      r.top_hits += block_read(static_cast<int64_t>(j)) ? 1 : 0;
    }
    // The heaviest 1% of blocks by mass (ties broken by position).
    const auto blocks = static_cast<int64_t>(marked.size());
    block_mass.assign(marked.size(), 0.0);
    for (int64_t t = 0; t < len; ++t) block_mass[t / bs] += w[t];
    block_order.resize(marked.size());
    std::iota(block_order.begin(), block_order.end(), int64_t{0});
    const int64_t heavy = std::max<int64_t>(1, (blocks + 99) / 100);
    std::nth_element(block_order.begin(), block_order.begin() + (heavy - 1), block_order.end(),
                     [&](int64_t x, int64_t y) {
                       return block_mass[x] > block_mass[y] ||
                              (block_mass[x] == block_mass[y] && x < y);
                     });
    r.heavy_blocks = heavy;
    for (int64_t i = 0; i < heavy; ++i) r.heavy_hits += block_read(block_order[i]) ? 1 : 0;
  }
}

}  // namespace

Status decode_fidelity_cpu(const DecodeFidelityProblem& p, DecodeFidelity* fidelity) {
  if (fidelity == nullptr) return detail::invalid_argument("fidelity must not be null");
  Status status = detail::validate_fidelity_problem(p);
  if (!status) return status;
  const DenseKvCache& c = p.reference.cache;
  if (c.batch > 0) {
    status = detail::validate_dense_kv_lengths(c, c.lengths);
    if (!status) return Status(status.code(), "reference.cache." + status.message());
  }
  return cpu::run_guarded("decode_fidelity_cpu", [&] {
    const int64_t pairs = c.batch * c.num_kv_heads;
    const int64_t group = c.batch > 0 ? p.reference.num_q_heads / c.num_kv_heads : 0;
    std::vector<HeadResult> heads(static_cast<std::size_t>(pairs * group));
    std::vector<PairResult> pair_results(static_cast<std::size_t>(pairs));
    cpu::parallel_for(pairs, cpu::hardware_threads(), [&](int64_t i) {
      judge_pair(p, i / c.num_kv_heads, i % c.num_kv_heads, &heads[i * group], &pair_results[i]);
    });

    DecodeFidelity f;
    double err2 = 0, ref2 = 0, mass_sum = 0;
    int64_t valid = 0, top_blocks = 0, top_hits = 0, heavy_blocks = 0, heavy_hits = 0;
    for (const HeadResult& r : heads) {
      if (!r.valid) continue;
      ++valid;
      err2 += r.err2;
      ref2 += r.ref2;
      const double head_rel = r.ref2 > 0 ? std::sqrt(r.err2 / r.ref2)
                              : r.err2 > 0 ? std::numeric_limits<double>::infinity()
                                           : 0.0;
      f.max_head_rel_l2 = std::max(f.max_head_rel_l2, head_rel);
      mass_sum += r.kept_mass;
      f.kept_mass_min = std::min(f.kept_mass_min, r.kept_mass);
      top_blocks += r.top_blocks;
      top_hits += r.top_hits;
      f.top1_recall_min = std::min(f.top1_recall_min, static_cast<double>(r.top_hits) /
                                                          static_cast<double>(r.top_blocks));
      heavy_blocks += r.heavy_blocks;
      heavy_hits += r.heavy_hits;
      f.top1_block_recall_min =
          std::min(f.top1_block_recall_min,
                   static_cast<double>(r.heavy_hits) / static_cast<double>(r.heavy_blocks));
    }
    f.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2)
               : err2 > 0 ? std::numeric_limits<double>::infinity()
                          : 0.0;
    f.kept_mass_mean = valid > 0 ? mass_sum / static_cast<double>(valid) : 1.0;
    f.top1_recall = top_blocks > 0 ? static_cast<double>(top_hits) / static_cast<double>(top_blocks)
                                   : 1.0;
    f.top1_block_recall = heavy_blocks > 0 ? static_cast<double>(heavy_hits) /
                                                 static_cast<double>(heavy_blocks)
                                           : 1.0;
    int64_t full = 0, kept = 0;
    double sparse_bytes = 0, dense_bytes = 0;
    for (const PairResult& r : pair_results) {
      full += r.full;
      kept += r.kept;
      sparse_bytes += r.sparse_bytes;
      dense_bytes += r.dense_bytes;
    }
    f.kept_fraction = full > 0 ? static_cast<double>(kept) / static_cast<double>(full) : 1.0;
    f.read_fraction = dense_bytes > 0 ? sparse_bytes / dense_bytes : 1.0;
    *fidelity = f;
    return Status::ok();
  });
}

}  // namespace litetopk
