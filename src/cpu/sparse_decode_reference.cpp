// sparse_decode_cpu and dense_decode_cpu: the fp64 references of the decode kernels.
//
// Per (sequence b, KV head h), in parallel over the pairs:
// 1. The group's G queries in fp64.
// 2. Sparse only: pseudo-max per query head from the exact logits of the anchors (block 0, the
//    last full block, the open block); the 2-bit estimate of every full block (its best
//    pseudo-logit and the log of its pseudo-logits' softmax mass); the keep decision: an anchor,
//    or (delta) some head's estimate >= its pseudo-max - delta, or (mass) some head does not
//    skip it, a head skipping its lightest non-anchor blocks while their mass adds up to at
//    most mass_target of the head's total (pick_by_mass).
// 3. Online softmax in fp64 over the read tokens, block by block (kept full blocks in order, then
//    the open block): logits scale * q . key with rebuilt keys s * (L + R) (exact in fp32), values
//    widened exactly.
// 4. out = acc / sum rounded to out_dtype; lse = max + log(sum) (natural log).
// Dot products: fp16/bf16 queries times fp32-exact keys are exact products in fp64; the 128-term
// sums round in fp64 (relative error ~1e-16), far below anything an fp32 kernel can resolve.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "cpu/parallel_for.h"
#include "cpu/sparse_decode_cpu.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Online softmax of one query head in fp64.
class Accumulator {
 public:
  explicit Accumulator(int64_t d) : acc_(static_cast<std::size_t>(d), 0.0) {}

  // Adds n tokens: logits [n], values [n, D].
  void add(const double* logits, const float* values, int64_t n) {
    double block_max = kNegInf;
    for (int64_t t = 0; t < n; ++t) block_max = std::max(block_max, logits[t]);
    if (block_max == kNegInf) return;
    if (block_max > max_) {
      const double rescale = max_ == kNegInf ? 0.0 : std::exp(max_ - block_max);
      sum_ *= rescale;
      for (double& a : acc_) a *= rescale;
      max_ = block_max;
    }
    const auto d = static_cast<int64_t>(acc_.size());
    for (int64_t t = 0; t < n; ++t) {
      const double w = std::exp(logits[t] - max_);
      sum_ += w;
      const float* v = values + t * d;
      for (int64_t c = 0; c < d; ++c) acc_[c] += w * static_cast<double>(v[c]);
    }
  }

  // out[c] rounded to dtype at element offset `at`; lse (when non-null) = max + log(sum).
  void finish(void* out, DType dtype, int64_t at, float* lse) const {
    const auto d = static_cast<int64_t>(acc_.size());
    for (int64_t c = 0; c < d; ++c) {
      const double o = sum_ > 0.0 ? acc_[c] / sum_ : 0.0;
      cpu::store_float(out, dtype, at + c, static_cast<float>(o));
    }
    if (lse != nullptr) {
      *lse = sum_ > 0.0 ? static_cast<float>(max_ + std::log(sum_))
                        : -std::numeric_limits<float>::infinity();
    }
  }

 private:
  double max_ = kNegInf;
  double sum_ = 0.0;
  std::vector<double> acc_;
};

// log sum_t exp(x_t) of n values (-infinity for n = 0).
double log_sum_exp(const double* x, int64_t n) {
  double m = kNegInf;
  for (int64_t t = 0; t < n; ++t) m = std::max(m, x[t]);
  if (m == kNegInf) return kNegInf;
  double sum = 0;
  for (int64_t t = 0; t < n; ++t) sum += std::exp(x[t] - m);
  return m + std::log(sum);
}

// The bounded-mass rule of one head (litetopk/sparse_decode.h) over nf full blocks with log
// masses log_mass[j]: sets keep[j] = 1 for every candidate (not an anchor) the head does not skip.
// Candidates ascending by mass; a run of equal masses is skipped or kept as a whole; mass_target
// 0 keeps every block.
void pick_by_mass(const double* log_mass, int64_t nf, double mass_target, uint8_t* keep) {
  if (nf <= 2) return;
  if (mass_target <= 0) {
    std::fill(keep, keep + nf, uint8_t{1});
    return;
  }
  double top = kNegInf;
  for (int64_t j = 0; j < nf; ++j) top = std::max(top, log_mass[j]);
  std::vector<double> mass(static_cast<std::size_t>(nf));
  double total = 0;
  for (int64_t j = 0; j < nf; ++j) total += (mass[j] = std::exp(log_mass[j] - top));
  std::vector<int64_t> order;
  for (int64_t j = 1; j < nf - 1; ++j) order.push_back(j);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return mass[a] < mass[b]; });
  const double budget = mass_target * total;
  double skipped = 0;
  std::size_t i = 0;
  while (i < order.size()) {
    std::size_t run = i;
    double run_mass = 0;
    for (; run < order.size() && mass[order[run]] == mass[order[i]]; ++run) {
      run_mass += mass[order[run]];
    }
    if (skipped + run_mass > budget) break;
    skipped += run_mass;
    i = run;
  }
  for (; i < order.size(); ++i) keep[order[i]] = 1;
}

// The queries of one group: G rows of D doubles.
std::vector<double> load_queries(const void* q, DType dtype, int64_t first_row, int64_t rows,
                                 int64_t d) {
  std::vector<double> out(static_cast<std::size_t>(rows * d));
  for (int64_t i = 0; i < rows * d; ++i) {
    out[i] = static_cast<double>(cpu::load_float(q, dtype, first_row * d + i));
  }
  return out;
}

// Tokens of one block (or the open block) as floats: keys, estimates (full blocks), values.
struct BlockData {
  std::vector<float> keys, estimates, values;
  int64_t count = 0;
};

class SparseTask {
 public:
  SparseTask(const SparseDecodeProblem& p, const SparseDecodeCpuDiagnostics& diag)
      : p_(p), view_(p.cache), diag_(diag) {}

  // Processes (b, h); returns the number of kept full blocks (and *full the number of full ones).
  int64_t run(int64_t b, int64_t h, int64_t* full) const {
    const SparseKvCache& c = p_.cache;
    const int64_t d = c.head_dim, bs = c.block_size;
    const int64_t group = p_.num_q_heads / c.num_kv_heads;
    const int64_t first_head = h * group;
    const double scale = detail::resolved_softmax_scale(p_.softmax_scale, d);
    const int64_t len = c.lengths[b];
    const int64_t nf = len / bs, nt = len - nf * bs;
    *full = nf;
    const std::vector<double> q = load_queries(p_.q, c.dtype, b * p_.num_q_heads + first_head,
                                               group, d);
    BlockData block;
    std::vector<double> logits(static_cast<std::size_t>(bs));
    const auto is_anchor = [&](int64_t j) { return j == 0 || j == nf - 1; };

    // 1. Pseudo-max from exact logits of the anchors.
    std::vector<double> pm(static_cast<std::size_t>(group), kNegInf);
    const auto update_pm = [&](const BlockData& data) {
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t t = 0; t < data.count; ++t) {
          pm[g] = std::max(pm[g], scale * cpu::dot(&q[g * d], &data.keys[t * d], d));
        }
      }
    };
    for (int64_t j = 0; j < nf; ++j) {
      if (j != 0 && j != nf - 1) continue;
      load_full_block(b, h, j, false, &block);
      update_pm(block);
    }
    if (nt > 0) {
      load_tail(b, h, nt, &block);
      update_pm(block);
    }

    // 2-3. Estimates and keep decisions.
    std::vector<uint8_t> kept(static_cast<std::size_t>(nf), 0);
    const bool by_mass = p_.selection == SparseSelection::kMass;
    const double delta = static_cast<double>(p_.delta);
    std::vector<double> log_mass(static_cast<std::size_t>(group * nf));
    for (int64_t j = 0; j < nf; ++j) {
      load_full_block(b, h, j, true, &block);
      bool keep = is_anchor(j);
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t t = 0; t < bs; ++t) {
          logits[t] = scale * cpu::dot(&q[g * d], &block.estimates[t * d], d);
        }
        const double estimate = *std::max_element(logits.begin(), logits.begin() + bs);
        log_mass[g * nf + j] = log_sum_exp(logits.data(), bs);
        keep = keep || (!by_mass && estimate >= pm[g] - delta);
        const int64_t at = ((b * p_.num_q_heads) + first_head + g) * c.max_blocks + j;
        if (diag_.block_estimate != nullptr) diag_.block_estimate[at] = estimate;
        if (diag_.block_log_mass != nullptr) diag_.block_log_mass[at] = log_mass[g * nf + j];
      }
      kept[j] = keep ? 1 : 0;
    }
    if (by_mass) {
      for (int64_t g = 0; g < group; ++g) {
        pick_by_mass(&log_mass[g * nf], nf, static_cast<double>(p_.mass_target), kept.data());
      }
    }
    const auto kept_count = static_cast<int64_t>(std::count(kept.begin(), kept.end(), 1));

    // 4. Exact attention over the read blocks.
    std::vector<Accumulator> accumulators(static_cast<std::size_t>(group), Accumulator(d));
    const auto attend = [&](const BlockData& data) {
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t t = 0; t < data.count; ++t) {
          logits[t] = scale * cpu::dot(&q[g * d], &data.keys[t * d], d);
        }
        accumulators[g].add(logits.data(), data.values.data(), data.count);
      }
    };
    for (int64_t j = 0; j < nf; ++j) {
      if (!kept[j]) continue;
      load_full_block(b, h, j, false, &block);
      attend(block);
    }
    if (nt > 0) {
      load_tail(b, h, nt, &block);
      attend(block);
    }

    for (int64_t g = 0; g < group; ++g) {
      const int64_t row = b * p_.num_q_heads + first_head + g;
      accumulators[g].finish(p_.out, p_.out_dtype, row * d, p_.lse ? p_.lse + row : nullptr);
      if (diag_.pseudo_max != nullptr) diag_.pseudo_max[row] = pm[g];
      for (double* diag : {diag_.block_estimate, diag_.block_log_mass}) {
        if (diag != nullptr) {
          std::fill(diag + row * c.max_blocks + nf, diag + (row + 1) * c.max_blocks, kNegInf);
        }
      }
    }
    if (p_.kept_mask != nullptr) {
      uint8_t* mask = p_.kept_mask + (b * c.num_kv_heads + h) * c.max_blocks;
      std::copy(kept.begin(), kept.end(), mask);
      if (nt > 0) mask[nf] = 1;
    }
    return kept_count;
  }

 private:
  void load_full_block(int64_t b, int64_t h, int64_t j, bool estimates, BlockData* out) const {
    const SparseKvCache& c = p_.cache;
    const int64_t bs = c.block_size, d = c.head_dim;
    const int64_t slot = view_.slot(b, h, j);
    out->count = bs;
    out->keys.resize(static_cast<std::size_t>(bs * d));
    out->estimates.resize(static_cast<std::size_t>(bs * d));
    out->values.resize(static_cast<std::size_t>(bs * d));
    const auto* scales = static_cast<const unsigned char*>(c.key_scales) +
                         view_.scale_offset(slot) * static_cast<int64_t>(dtype_size(c.dtype));
    cpu::rebuild_key_block(view_.codes(slot), scales, view_.residuals(slot), bs, d, c.dtype,
                           estimates ? nullptr : out->keys.data(),
                           estimates ? out->estimates.data() : nullptr);
    if (estimates) return;
    const int64_t base = view_.value_offset(slot, 0);
    for (int64_t i = 0; i < bs * d; ++i) out->values[i] = cpu::load_float(c.values, c.dtype, base + i);
  }

  void load_tail(int64_t b, int64_t h, int64_t nt, BlockData* out) const {
    const SparseKvCache& c = p_.cache;
    const int64_t d = c.head_dim;
    const int64_t j = c.lengths[b] / c.block_size;
    out->count = nt;
    out->keys.resize(static_cast<std::size_t>(c.block_size * d));
    out->values.resize(static_cast<std::size_t>(c.block_size * d));
    const int64_t keys = view_.tail_offset(b, h, 0);
    const int64_t values = view_.value_offset(view_.slot(b, h, j), 0);
    for (int64_t i = 0; i < nt * d; ++i) {
      out->keys[i] = cpu::load_float(c.tail_keys, c.dtype, keys + i);
      out->values[i] = cpu::load_float(c.values, c.dtype, values + i);
    }
  }

  const SparseDecodeProblem& p_;
  cpu::SparseCacheView view_;
  const SparseDecodeCpuDiagnostics& diag_;
};

}  // namespace

Status sparse_decode_cpu(const SparseDecodeProblem& p,
                         const SparseDecodeCpuDiagnostics& diagnostics) {
  Status status = validate_sparse_decode_problem(p);
  if (!status) return status;
  if (p.cache.batch == 0) {
    if (diagnostics.kept_fraction != nullptr) *diagnostics.kept_fraction = 1.0;
    return Status::ok();
  }
  if (!(status = validate_sparse_kv_lengths(p.cache, p.cache.lengths, p.cache.block_table))) {
    return status;
  }
  return cpu::run_guarded("sparse_decode_cpu", [&] {
    const SparseTask task(p, diagnostics);
    const int64_t tasks = p.cache.batch * p.cache.num_kv_heads;
    std::vector<int64_t> kept(static_cast<std::size_t>(tasks)), full(kept.size());
    cpu::parallel_for(tasks, cpu::hardware_threads(), [&](int64_t i) {
      kept[i] = task.run(i / p.cache.num_kv_heads, i % p.cache.num_kv_heads, &full[i]);
    });
    if (diagnostics.kept_fraction != nullptr) {
      int64_t kept_sum = 0, full_sum = 0;
      for (int64_t i = 0; i < tasks; ++i) {
        kept_sum += kept[i];
        full_sum += full[i];
      }
      *diagnostics.kept_fraction =
          full_sum > 0 ? static_cast<double>(kept_sum) / static_cast<double>(full_sum) : 1.0;
    }
    return Status::ok();
  });
}

Status dense_decode_cpu(const DenseDecodeProblem& p) {
  Status status = validate_dense_decode_problem(p);
  if (!status) return status;
  if (p.cache.batch == 0) return Status::ok();
  if (!(status = detail::validate_dense_kv_lengths(p.cache, p.cache.lengths))) return status;
  return cpu::run_guarded("dense_decode_cpu", [&] {
    const DenseKvCache& c = p.cache;
    const cpu::DenseCacheView view(c);
    const int64_t d = c.head_dim, group = p.num_q_heads / c.num_kv_heads;
    const double scale = detail::resolved_softmax_scale(p.softmax_scale, d);
    constexpr int64_t kChunk = 256;
    cpu::parallel_for(c.batch * c.num_kv_heads, cpu::hardware_threads(), [&](int64_t task) {
      const int64_t b = task / c.num_kv_heads, h = task % c.num_kv_heads;
      const std::vector<double> q = load_queries(p.q, c.dtype, b * p.num_q_heads + h * group,
                                                 group, d);
      std::vector<Accumulator> accumulators(static_cast<std::size_t>(group), Accumulator(d));
      std::vector<float> keys(static_cast<std::size_t>(kChunk * d)), values(keys.size());
      std::vector<double> logits(static_cast<std::size_t>(kChunk));
      const int64_t len = c.lengths[b];
      for (int64_t t0 = 0; t0 < len; t0 += kChunk) {
        const int64_t n = std::min(kChunk, len - t0);
        for (int64_t t = 0; t < n; ++t) {
          const int64_t at = view.offset(b, h, t0 + t);
          for (int64_t ch = 0; ch < d; ++ch) {
            keys[t * d + ch] = cpu::load_float(c.keys, c.dtype, at + ch);
            values[t * d + ch] = cpu::load_float(c.values, c.dtype, at + ch);
          }
        }
        for (int64_t g = 0; g < group; ++g) {
          for (int64_t t = 0; t < n; ++t) logits[t] = scale * cpu::dot(&q[g * d], &keys[t * d], d);
          accumulators[g].add(logits.data(), values.data(), n);
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        const int64_t row = b * p.num_q_heads + h * group + g;
        accumulators[g].finish(p.out, p.out_dtype, row * d, p.lse ? p.lse + row : nullptr);
      }
    });
    return Status::ok();
  });
}

}  // namespace litetopk
