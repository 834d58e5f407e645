// GPU decode attention against the CPU references on the adversarial list (decode_cases()):
// - dense_decode against the naive fp64 oracle, contiguous and strided caches;
// - sparse_decode against sparse_decode_cpu: kept_mask equal except where the CPU's block
//   estimate is within the GPU's derived estimation error of pm - delta; out and lse against an
//   fp64 oracle restricted to the blocks the GPU read (and against the CPU output where every
//   decision agrees), with tolerances derived from the dtypes; delta = inf against dense
//   attention over the rebuilt keys;
// - the bounded-mass selection likewise: kept_mask equal except where some head's cumulative
//   mass is within the estimation error of its budget, and every head's skipped mass (the CPU's
//   fp64 masses) within the budget times that error; mass_target 0 reads every block;
// - top-delta's sample: a split whose first four full blocks are all kept reads all of its blocks
//   (kept_mask 1 there, and the oracle over what was read);
// - CUDA graphs: captured once, replayed after the cache grows on the device, and replayed twice
//   in a row on ragged lengths (the splits' arrival counters are zeroed by every launch);
// - *Small* suites for compute-sanitizer.
// Several blocks_per_split values run each case, so splits that hold only skipped blocks, one
// block, or the open block alone are all merged (by the last split to finish). Every workspace
// starts poisoned, so nothing may rely on zeros left in it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "testkit/device_memory.h"
#include "formats/sparse_kv_format.h"
#include "gpu/gpu_select_runner.h"
#include "heuristics/decode_heuristics.h"
#include "litetopk/sparse_decode.h"

namespace litetopk::testing {
namespace {

using testkit::DeviceBuffer;

#define SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

constexpr int64_t kD = 128;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint8_t kMaskPoison = 0x77;
constexpr int kWorkspacePoison = 0xa5;  // every workspace byte before a call
constexpr int64_t kSampleBlocks = 4;    // top-delta's sample: the first round of 4 consumer warps

// The blocks per split that sparse_decode plans for `cache` (heuristics/decode_heuristics.h with
// the current device's SM count), for the checks that depend on the split layout.
int64_t planned_blocks_per_split(const SparseKvCache& cache, int64_t option) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 132;
  heuristics::DecodeSplitShape shape;
  shape.units = cache.max_blocks;
  shape.unit_tokens = cache.block_size;
  shape.pairs = cache.batch * cache.num_kv_heads;
  shape.sm_count = sms;
  shape.ctas_per_sm = heuristics::kSparseDecodeCtasPerSm;
  return heuristics::decode_units_per_split(shape, option, 1024);
}

// Unit roundoff of a dtype (half an ulp, relative).
double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    case DType::kFloat32: break;
  }
  return std::ldexp(1.0, -24);
}

template <typename V>
Status upload(DeviceBuffer* buffer, const V& host) {
  const std::size_t bytes = host.size() * sizeof(host[0]);
  if (buffer->size() != std::max<std::size_t>(bytes, 16)) {
    if (Status s = buffer->allocate(std::max<std::size_t>(bytes, 16)); !s) return s;
  }
  return bytes == 0 ? Status::ok() : testkit::copy_to_device(buffer->data(), host.data(), bytes);
}

// A host sparse cache copied to the device (same shape and block table).
struct DeviceSparseCache {
  DeviceBuffer codes, scales, residuals, values, tail, lengths, table;
  SparseKvCache view;

  Status upload_from(HostSparseCache& host) {
    Status s = upload(&codes, host.key_codes);
    if (s) s = upload(&scales, host.key_scales);
    if (s) s = upload(&residuals, host.key_residuals);
    if (s) s = upload(&values, host.values);
    if (s) s = upload(&tail, host.tail_keys);
    if (s) s = upload(&lengths, host.lengths);
    if (s && !host.block_table.empty()) s = upload(&table, host.block_table);
    view = host.view();
    view.key_codes = codes.as<uint8_t>();
    view.key_scales = scales.data();
    view.key_residuals = residuals.as<uint8_t>();
    view.values = values.data();
    view.tail_keys = tail.data();
    view.lengths = lengths.as<int32_t>();
    view.block_table = host.block_table.empty() ? nullptr : table.as<int32_t>();
    return s;
  }
};

// A dense cache on the device in any element layout: host and device copies with the same strides.
struct DenseLayout {
  int64_t batch_stride = 0, head_stride = 0, token_stride = 0;  // 0: contiguous
};

struct DeviceDenseCache {
  std::vector<uint16_t> host_keys, host_values;
  DeviceBuffer keys, values, lengths;
  DenseKvCache host, device;

  Status upload_from(const DecodeWorkload& w, const DenseLayout& layout) {
    host = DenseKvCache{};
    host.dtype = w.dtype;
    host.batch = w.batch;
    host.num_kv_heads = w.num_kv_heads;
    host.capacity = w.capacity;
    host.token_stride = layout.token_stride ? layout.token_stride : kD;
    host.head_stride = layout.head_stride ? layout.head_stride : w.capacity * host.token_stride;
    host.batch_stride = layout.batch_stride ? layout.batch_stride : w.num_kv_heads * host.head_stride;
    const int64_t span = (w.batch - 1) * host.batch_stride + (w.num_kv_heads - 1) * host.head_stride +
                         (w.capacity - 1) * host.token_stride + kD;
    host_keys.assign(static_cast<std::size_t>(span), 0x7e00);  // NaN outside the tokens
    host_values.assign(host_keys.size(), 0x7e00);
    for (int64_t b = 0; b < w.batch; ++b) {
      for (int64_t h = 0; h < w.num_kv_heads; ++h) {
        for (int64_t t = 0; t < w.capacity; ++t) {
          const int64_t from = ((b * w.num_kv_heads + h) * w.capacity + t) * kD;
          const int64_t to = b * host.batch_stride + h * host.head_stride + t * host.token_stride;
          std::copy_n(&w.keys[from], kD, &host_keys[to]);
          std::copy_n(&w.values[from], kD, &host_values[to]);
        }
      }
    }
    host.keys = host_keys.data();
    host.values = host_values.data();
    host.lengths = const_cast<int32_t*>(w.lengths.data());
    Status s = upload(&keys, host_keys);
    if (s) s = upload(&values, host_values);
    if (s) s = upload(&lengths, w.lengths);
    device = host;
    device.keys = keys.data();
    device.values = values.data();
    device.lengths = lengths.as<int32_t>();
    return s;
  }
};

struct GpuResult {
  std::vector<float> out, lse;
  std::vector<uint8_t> mask;
};

struct RunConfig {
  DType out_dtype = DType::kFloat32;
  int64_t blocks_per_split = 0;
  bool with_lse = true;
  bool with_mask = true;
};

std::string describe(const RunConfig& r) {
  std::ostringstream os;
  os << "out " << dtype_name(r.out_dtype) << ", blocks_per_split " << r.blocks_per_split;
  return os.str();
}

// Output buffers (poisoned), the call, the download (out widened to float).
struct DeviceOutputs {
  DeviceBuffer q, out, lse, mask, workspace;

  Status prepare(const DecodeWorkload& w, const RunConfig& r, int64_t mask_entries) {
    const auto rows = static_cast<std::size_t>(w.batch * w.num_q_heads);
    Status s = upload(&q, w.q);
    if (s) s = out.allocate(rows * kD * dtype_size(r.out_dtype));
    if (s) s = testkit::fill_device(out.data(), 0x5a, out.size());
    if (s) s = lse.allocate(rows * 4);
    if (s) s = testkit::fill_device(lse.data(), 0x5a, lse.size());
    if (s) s = mask.allocate(static_cast<std::size_t>(std::max<int64_t>(mask_entries, 1)));
    if (s) s = testkit::fill_device(mask.data(), kMaskPoison, mask.size());
    return s;
  }

  Status download(const DecodeWorkload& w, const RunConfig& r, int64_t mask_entries, GpuResult* g) {
    const auto rows = static_cast<std::size_t>(w.batch * w.num_q_heads);
    std::vector<unsigned char> raw(rows * kD * dtype_size(r.out_dtype));
    Status s = testkit::copy_to_host(raw.data(), out.data(), raw.size());
    g->out.resize(rows * kD);
    for (std::size_t i = 0; i < g->out.size(); ++i) {
      g->out[i] = element(raw.data(), r.out_dtype, static_cast<int64_t>(i));
    }
    g->lse.assign(rows, 0.0f);
    if (s && r.with_lse) s = testkit::copy_to_host(g->lse.data(), lse.data(), rows * 4);
    g->mask.assign(static_cast<std::size_t>(mask_entries), kMaskPoison);
    if (s && r.with_mask && mask_entries > 0) {
      s = testkit::copy_to_host(g->mask.data(), mask.data(), g->mask.size());
    }
    return s;
  }
};

using testkit::DecodeSelection;

DecodeSelection by_delta(float delta) { return {SparseSelection::kDelta, delta}; }
DecodeSelection by_mass(float target) { return {SparseSelection::kMass, target}; }

SparseDecodeProblem sparse_problem(const DecodeWorkload& w, const SparseKvCache& cache,
                                   const DecodeSelection& sel, const RunConfig& r,
                                   DeviceOutputs& dev) {
  SparseDecodeProblem p;
  p.cache = cache;
  p.q = dev.q.data();
  p.num_q_heads = w.num_q_heads;
  p.softmax_scale = w.softmax_scale;
  p.selection = sel.rule;
  p.delta = sel.value;
  p.mass_target = sel.value;
  p.out = dev.out.data();
  p.out_dtype = r.out_dtype;
  p.lse = r.with_lse ? dev.lse.as<float>() : nullptr;
  p.kept_mask = r.with_mask ? dev.mask.as<uint8_t>() : nullptr;
  return p;
}

// The rule as asked at every size (no read-all dispatch).
DecodeOptions selecting_options(int64_t blocks_per_split) {
  DecodeOptions options;
  options.blocks_per_split = blocks_per_split;
  options.read_all_when_small = false;
  return options;
}

Status run_gpu_sparse(const DecodeWorkload& w, const SparseKvCache& cache,
                      const DecodeSelection& sel, const RunConfig& r, GpuResult* g) {
  const int64_t mask_entries = cache.batch * cache.num_kv_heads * cache.max_blocks;
  DeviceOutputs dev;
  Status s = dev.prepare(w, r, mask_entries);
  if (!s) return s;
  const SparseDecodeProblem p = sparse_problem(w, cache, sel, r, dev);
  const DecodeOptions options = selecting_options(r.blocks_per_split);
  std::size_t bytes = 0;
  s = sparse_decode_workspace_size(p, &bytes, options);
  if (s) s = dev.workspace.allocate(bytes);
  if (s) s = testkit::fill_device(dev.workspace.data(), kWorkspacePoison, bytes);
  if (s) s = sparse_decode(p, dev.workspace.data(), bytes, nullptr, options);
  if (s) s = testkit::device_synchronize();
  if (s) s = dev.download(w, r, mask_entries, g);
  return s;
}

Status run_gpu_dense(const DecodeWorkload& w, const DenseKvCache& cache, const RunConfig& r,
                     GpuResult* g) {
  DeviceOutputs dev;
  Status s = dev.prepare(w, r, 0);
  if (!s) return s;
  DenseDecodeProblem p;
  p.cache = cache;
  p.q = dev.q.data();
  p.num_q_heads = w.num_q_heads;
  p.softmax_scale = w.softmax_scale;
  p.out = dev.out.data();
  p.out_dtype = r.out_dtype;
  p.lse = r.with_lse ? dev.lse.as<float>() : nullptr;
  DecodeOptions options;
  options.blocks_per_split = r.blocks_per_split;
  std::size_t bytes = 0;
  s = dense_decode_workspace_size(p, &bytes, options);
  if (s) s = dev.workspace.allocate(bytes);
  if (s) s = testkit::fill_device(dev.workspace.data(), kWorkspacePoison, bytes);
  if (s) s = dense_decode(p, dev.workspace.data(), bytes, nullptr, options);
  if (s) s = testkit::device_synchronize();
  if (s) s = dev.download(w, r, 0, g);
  return s;
}

// fp64 attention over `cache` (any dtype; q of the cache's dtype) restricted to the blocks of
// size `block_size` that `mask` marks read (null: every token; the open block is always read),
// with what the tolerances need: per element A = sum_t w_t |v_tc| and per row the largest
// scale * sum_c |q_c k_tc| over the read tokens.
struct Oracle {
  std::vector<double> out, lse, value_mass, score_abs;
};

void oracle(const DenseKvCache& c, const void* q, int64_t num_q_heads, double scale,
            int64_t block_size, int64_t mask_blocks, const uint8_t* mask, Oracle* o) {
  const int64_t group = num_q_heads / c.num_kv_heads;
  const int64_t ts = c.token_stride ? c.token_stride : kD;
  const int64_t hs = c.head_stride ? c.head_stride : c.capacity * ts;
  const int64_t bstride = c.batch_stride ? c.batch_stride : c.num_kv_heads * hs;
  const auto rows = static_cast<std::size_t>(c.batch * num_q_heads);
  o->out.assign(rows * kD, 0.0);
  o->value_mass.assign(rows * kD, 0.0);
  o->lse.assign(rows, -kInf);
  o->score_abs.assign(rows, 0.0);
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.lengths[b], nf = len / block_size;
    for (int64_t hq = 0; hq < num_q_heads; ++hq) {
      const int64_t h = hq / group, row = b * num_q_heads + hq;
      std::vector<int64_t> tokens;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t j = t / block_size;
        if (mask == nullptr || j >= nf || mask[(b * c.num_kv_heads + h) * mask_blocks + j] == 1) {
          tokens.push_back(t);
        }
      }
      if (tokens.empty()) continue;
      std::vector<double> logits(tokens.size());
      double mx = -kInf;
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        double dot = 0, abs_dot = 0;
        for (int64_t ch = 0; ch < kD; ++ch) {
          const double a = element(q, c.dtype, row * kD + ch);
          const double k = element(c.keys, c.dtype, b * bstride + h * hs + tokens[i] * ts + ch);
          dot += a * k;
          abs_dot += std::fabs(a * k);
        }
        logits[i] = scale * dot;
        o->score_abs[row] = std::max(o->score_abs[row], scale * abs_dot);
        mx = std::max(mx, logits[i]);
      }
      double sum = 0;
      for (double l : logits) sum += std::exp(l - mx);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const double wt = std::exp(logits[i] - mx) / sum;
        for (int64_t ch = 0; ch < kD; ++ch) {
          const double v = element(c.values, c.dtype, b * bstride + h * hs + tokens[i] * ts + ch);
          o->out[row * kD + ch] += wt * v;
          o->value_mass[row * kD + ch] += wt * std::fabs(v);
        }
      }
      o->lse[row] = mx + std::log(sum);
    }
  }
}

// The GPU's error budget. Scores: fp32 accumulation (and the fp16 hi + lo query split of
// quantized keys, 22 bits) give |ds| <= 2^-18 * scale * sum_c |q_c k_c|, changing each weight by
// a factor exp(+-ds). Probabilities are rounded to the value dtype for the P V mma: each
// weight by u_T. So |out - want| <= u_out |want| + (2.5 u_T + 3 ds) * sum_t w_t |v_t| and
// |lse - want| <= 3 ds + 1e-5 (1 + |want|).
::testing::AssertionResult check_against(const GpuResult& got, const Oracle& want, DType cache_dtype,
                                         DType out_dtype, bool check_lse, const std::string& what) {
  const double u_t = unit_roundoff(cache_dtype), u_out = 1.01 * unit_roundoff(out_dtype);
  std::size_t failures = 0, worst = 0;
  double worst_excess = 0;
  for (std::size_t i = 0; i < got.out.size(); ++i) {
    const double ds = std::ldexp(want.score_abs[i / kD], -18) + 1e-7;
    const double tol = u_out * std::fabs(want.out[i]) + (2.5 * u_t + 3 * ds) * want.value_mass[i];
    const double excess = std::fabs(static_cast<double>(got.out[i]) - want.out[i]) - tol;
    if (!(excess <= 0)) {
      if (failures++ == 0 || !(excess <= worst_excess)) {
        worst = i;
        worst_excess = std::isnan(excess) ? kInf : excess;
      }
    }
  }
  std::ostringstream msg;
  msg.precision(9);
  if (failures > 0) {
    msg << what << ": " << failures << " of " << got.out.size() << " out elements differ; worst "
        << worst << " (row " << worst / kD << "): got " << got.out[worst] << ", want "
        << want.out[worst] << ", value mass " << want.value_mass[worst] << "\n";
  }
  if (check_lse) {
    for (std::size_t r = 0; r < got.lse.size(); ++r) {
      const double w = want.lse[r], g = got.lse[r];
      if (w == -kInf ? g == -kInf
                     : std::fabs(g - w) <= 3 * (std::ldexp(want.score_abs[r], -18) + 1e-7) +
                                               1e-5 * (1 + std::fabs(w))) {
        continue;
      }
      ++failures;
      msg << what << ": lse[" << r << "] = " << g << ", want " << w << "\n";
      break;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << msg.str();
}

// A quantized case: workload, host and device sparse caches, the rebuilt fp32 cache.
struct Prepared {
  DecodeWorkload w;
  HostSparseCache host{DType::kFloat16, 0, 1, 128, 1, false};
  DeviceSparseCache dev;
  RebuiltCache rebuilt;

  explicit Prepared(const DecodeCase& c) : w(make_decode_workload(c.spec)) { quantize(c); }
  Prepared(const DecodeCase& c, DecodeWorkload workload) : w(std::move(workload)) { quantize(c); }

  void quantize(const DecodeCase& c) {
    Status s = quantize_workload(&w, c.block_size, c.paged, &host);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    rebuild_cache(host.view(), w, &rebuilt);
    s = dev.upload_from(host);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
};

// The CPU reference with its diagnostics.
struct CpuSparse {
  std::vector<float> out, lse;
  std::vector<uint8_t> mask;
  std::vector<double> pm, estimate, log_mass;
};

void run_cpu_sparse(Prepared& prep, const DecodeSelection& sel, CpuSparse* cpu) {
  const SparseKvCache view = prep.host.view();
  const auto rows = static_cast<std::size_t>(prep.w.batch * prep.w.num_q_heads);
  cpu->out.assign(rows * kD, 0.0f);
  cpu->lse.assign(rows, 0.0f);
  cpu->mask.assign(static_cast<std::size_t>(view.batch * view.num_kv_heads * view.max_blocks),
                   kMaskPoison);
  cpu->pm.assign(rows, 0.0);
  cpu->estimate.assign(rows * static_cast<std::size_t>(view.max_blocks), 0.0);
  cpu->log_mass.assign(cpu->estimate.size(), 0.0);
  SparseDecodeProblem p = prep.w.sparse_problem(view, sel.value, cpu->out.data(), cpu->mask.data());
  p.selection = sel.rule;
  p.mass_target = sel.value;
  p.lse = cpu->lse.data();
  SparseDecodeCpuDiagnostics diag;
  diag.pseudo_max = cpu->pm.data();
  diag.block_estimate = cpu->estimate.data();
  diag.block_log_mass = cpu->log_mass.data();
  const Status s = sparse_decode_cpu(p, diag);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
}

// The GPU estimates with the query rounded to int8 per head and block (exact int32 dot products
// with the codes): |e_gpu - e| <= 1.5 * 128 * 0.5 / 127 * max_c |q_c s_c| * scale < 0.8 * max_c
// |q_c s_c| * scale; its pseudo-max (fp32 dot products) is within 1e-4 of 1 + |pm|. Returns how
// far e_ij is from the threshold, in units of that tolerance. estimate_error is the first term
// (it also bounds the error of the GPU's block log-mass, a log-sum-exp of such estimates).
double estimate_error(Prepared& prep, int64_t b, int64_t hq, int64_t j) {
  const SparseKvCache view = prep.host.view();
  const int64_t h = hq / (prep.w.num_q_heads / prep.w.num_kv_heads);
  const int64_t slot = sparse_kv::slot_index(view.block_table, view.num_kv_heads, view.max_blocks, b, h, j);
  double qs = 0;  // max_c |q_c s_c|
  for (int64_t c = 0; c < kD; ++c) {
    qs = std::max(qs, std::fabs(static_cast<double>(element(prep.w.q.data(), prep.w.dtype,
                                                            (b * prep.w.num_q_heads + hq) * kD + c))) *
                          std::fabs(static_cast<double>(element(view.key_scales, view.dtype, slot * kD + c))));
  }
  return 0.8 * prep.w.softmax_scale * qs;
}

double decision_margin(Prepared& prep, const CpuSparse& cpu, float delta, int64_t b, int64_t hq,
                       int64_t j) {
  const SparseKvCache view = prep.host.view();
  const int64_t row = b * prep.w.num_q_heads + hq;
  const double pm = cpu.pm[row];
  const double tol = estimate_error(prep, b, hq, j) + 1e-4 * (1 + std::fabs(pm));
  const double e = cpu.estimate[row * view.max_blocks + j];
  return (e - (pm - static_cast<double>(delta))) / tol;
}

// Whether full block j of a sequence with nf full blocks and `used` blocks lies past the sample
// of a split that top-delta's sample sent to read everything: the split (bps blocks) has more
// than kSampleBlocks full blocks and the GPU kept the first kSampleBlocks of them.
bool read_by_sample(const uint8_t* gpu_row, int64_t j, int64_t nf, int64_t used, int64_t bps) {
  const int64_t j0 = j / bps * bps;
  const int64_t full = std::min(std::min(used, j0 + bps), nf) - j0;
  if (full <= kSampleBlocks || j - j0 < kSampleBlocks) return false;
  for (int64_t i = 0; i < kSampleBlocks; ++i) {
    if (gpu_row[j0 + i] != 1) return false;
  }
  return true;
}

// kept_mask: entries past ceil(len / BS) untouched, anchors and the open block 1, every block
// past the sample of a split whose sample kept everything 1, and every other full block as the
// CPU decided unless the decision is within the tolerance. bps: the plan's blocks per split.
::testing::AssertionResult check_mask(Prepared& prep, const CpuSparse& cpu, const GpuResult& gpu,
                                      float delta, int64_t bps, int* ambiguous) {
  const SparseKvCache view = prep.host.view();
  const int64_t group = prep.w.num_q_heads / prep.w.num_kv_heads;
  for (int64_t b = 0; b < view.batch; ++b) {
    const int64_t len = prep.w.lengths[b], nf = len / view.block_size;
    const int64_t used = (len + view.block_size - 1) / view.block_size;
    for (int64_t h = 0; h < view.num_kv_heads; ++h) {
      const uint8_t* gpu_row = &gpu.mask[static_cast<std::size_t>((b * view.num_kv_heads + h) * view.max_blocks)];
      for (int64_t j = 0; j < view.max_blocks; ++j) {
        const std::size_t at = static_cast<std::size_t>((b * view.num_kv_heads + h) * view.max_blocks + j);
        const uint8_t g = gpu.mask[at], c = cpu.mask[at];
        if (j < nf && !std::isinf(delta) && read_by_sample(gpu_row, j, nf, used, bps)) {
          if (g != 1) {
            return ::testing::AssertionFailure() << "kept_mask[" << b << ", " << h << ", " << j
                                                 << "] = " << int{g}
                                                 << ", want 1 (its split's sample kept every block)";
          }
          if (c != 1) ++*ambiguous;
          continue;
        }
        const bool must = j >= used || j == 0 || j == nf - 1 || j >= nf || std::isinf(delta);
        if (must ? g != c : (g > 1)) {
          return ::testing::AssertionFailure() << "kept_mask[" << b << ", " << h << ", " << j
                                               << "] = " << int{g} << ", want " << int{c};
        }
        if (must || g == c) continue;
        // CPU keep: every head that keeps must be within tolerance above the threshold; CPU
        // skip: some head must be within tolerance below it.
        bool allowed = c == 0 ? false : true;
        for (int64_t i = 0; i < group; ++i) {
          const double m = decision_margin(prep, cpu, delta, b, h * group + i, j);
          if (c == 1 && m > 1) allowed = false;
          if (c == 0 && m >= -1) allowed = true;
        }
        if (!allowed) {
          return ::testing::AssertionFailure()
                 << "kept_mask[" << b << ", " << h << ", " << j << "] = " << int{g} << ", want "
                 << int{c} << " (not within the estimation tolerance)";
        }
        ++*ambiguous;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The bounded-mass kept_mask: entries past ceil(len / BS) untouched, anchors and the open block 1.
// Per head i, with the CPU's fp64 masses m_ij (relative to the row's heaviest) and E_i the row's
// largest estimate_error (+ 1e-5 for fp32 exp2/log2): the GPU's masses are within a factor
// e^(+-E_i), so (1) its skipped blocks hold at most e^(2 E_i) mass_target T_i of the CPU's mass,
// and (2) a block decided unlike the CPU must have, for some head, C_ij within a factor e^(4 E_i)
// of the budget.
::testing::AssertionResult check_mass_mask(Prepared& prep, const CpuSparse& cpu,
                                           const GpuResult& gpu, float target, int* ambiguous) {
  const SparseKvCache view = prep.host.view();
  const int64_t group = prep.w.num_q_heads / prep.w.num_kv_heads, mb = view.max_blocks;
  for (int64_t b = 0; b < view.batch; ++b) {
    const int64_t len = prep.w.lengths[b], nf = len / view.block_size;
    const int64_t used = (len + view.block_size - 1) / view.block_size;
    for (int64_t h = 0; h < view.num_kv_heads; ++h) {
      const uint8_t* g = &gpu.mask[(b * view.num_kv_heads + h) * mb];
      const uint8_t* c = &cpu.mask[(b * view.num_kv_heads + h) * mb];
      std::vector<std::vector<double>> mass(static_cast<std::size_t>(group));
      std::vector<double> budget(static_cast<std::size_t>(group)), slack(budget.size());
      for (int64_t i = 0; i < group; ++i) {
        const int64_t row = b * prep.w.num_q_heads + h * group + i;
        double top = -kInf, total = 0, e = 1e-5;
        for (int64_t j = 0; j < nf; ++j) top = std::max(top, cpu.log_mass[row * mb + j]);
        for (int64_t j = 0; j < nf; ++j) {
          mass[i].push_back(std::exp(cpu.log_mass[row * mb + j] - top));
          total += mass[i].back();
          e = std::max(e, estimate_error(prep, b, h * group + i, j) + 1e-5);
        }
        budget[i] = static_cast<double>(target) * total;
        slack[i] = e;
      }
      std::vector<double> skipped(static_cast<std::size_t>(group), 0.0);
      for (int64_t j = 0; j < mb; ++j) {
        const bool must = j >= used || j == 0 || j == nf - 1 || j >= nf;
        if (must ? g[j] != c[j] : g[j] > 1) {
          return ::testing::AssertionFailure() << "kept_mask[" << b << ", " << h << ", " << j
                                               << "] = " << int{g[j]} << ", want " << int{c[j]};
        }
        if (must) continue;
        if (g[j] == 0) {
          for (int64_t i = 0; i < group; ++i) skipped[i] += mass[i][j];
        }
        if (g[j] == c[j]) continue;
        bool allowed = false;
        for (int64_t i = 0; i < group; ++i) {
          double cumulative = 0;
          for (int64_t k = 1; k < nf - 1; ++k) {
            if (mass[i][k] <= mass[i][j]) cumulative += mass[i][k];
          }
          const double band = std::exp(4 * slack[i]);
          allowed = allowed || (cumulative <= budget[i] * band && cumulative * band >= budget[i]);
        }
        if (!allowed) {
          return ::testing::AssertionFailure()
                 << "kept_mask[" << b << ", " << h << ", " << j << "] = " << int{g[j]}
                 << ", want " << int{c[j]} << " (not within the estimation tolerance)";
        }
        ++*ambiguous;
      }
      for (int64_t i = 0; i < group; ++i) {
        if (skipped[i] > budget[i] * std::exp(2 * slack[i]) * (1 + 1e-9)) {
          return ::testing::AssertionFailure()
                 << "b " << b << " head " << h * group + i << " skipped mass " << skipped[i]
                 << " over the budget " << budget[i] << " (slack " << slack[i] << ")";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

class SparseDecodeGpu : public ::testing::TestWithParam<DecodeCase> {};

// blocks_per_split 8: splits long enough for top-delta's sample (more than 4 full blocks).
const RunConfig kSparseConfigs[] = {{DType::kFloat32, 0, true, true},
                                    {DType::kFloat16, 1, true, true},
                                    {DType::kBFloat16, 3, true, true},
                                    {DType::kFloat32, 8, true, true}};

TEST_P(SparseDecodeGpu, MatchesCpuReference) {
  SKIP_WITHOUT_GPU();
  Prepared prep(GetParam());
  const DecodeCase& c = GetParam();
  for (const DecodeSelection sel :
       {by_delta(2.0f), by_delta(5.0f), by_mass(0.01f), by_mass(0.2f)}) {
    CpuSparse cpu;
    run_cpu_sparse(prep, sel, &cpu);
    for (const RunConfig& r : kSparseConfigs) {
      const std::string what = describe(r) + (sel.rule == SparseSelection::kMass ? ", mass " : ", delta ") +
                               std::to_string(sel.value);
      GpuResult gpu;
      const Status s = run_gpu_sparse(prep.w, prep.dev.view, sel, r, &gpu);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      int ambiguous = 0;
      ASSERT_TRUE(sel.rule == SparseSelection::kMass
                      ? check_mass_mask(prep, cpu, gpu, sel.value, &ambiguous)
                      : check_mask(prep, cpu, gpu, sel.value,
                                   planned_blocks_per_split(prep.host.view(), r.blocks_per_split),
                                   &ambiguous))
          << what;
      Oracle want;
      oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
             c.block_size, prep.host.shape.max_blocks, gpu.mask.data(), &want);
      // The rebuilt oracle's q is fp32; the bound only needs |q k|.
      EXPECT_TRUE(check_against(gpu, want, c.spec.dtype, r.out_dtype, true, what + " vs oracle"));
      if (ambiguous == 0) {
        Oracle cpu_as_oracle = want;
        for (std::size_t i = 0; i < cpu.out.size(); ++i) cpu_as_oracle.out[i] = cpu.out[i];
        for (std::size_t i = 0; i < cpu.lse.size(); ++i) cpu_as_oracle.lse[i] = cpu.lse[i];
        EXPECT_TRUE(check_against(gpu, cpu_as_oracle, c.spec.dtype, r.out_dtype, true,
                                  what + " vs sparse_decode_cpu"));
      }
    }
  }
}

// delta = inf and mass_target = 0 read every block: dense attention over the rebuilt keys.
TEST_P(SparseDecodeGpu, DeltaInfinityEqualsDenseOverRebuiltKeys) {
  SKIP_WITHOUT_GPU();
  Prepared prep(GetParam());
  const DecodeCase& c = GetParam();
  Oracle want;
  oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
         c.block_size, prep.host.shape.max_blocks, nullptr, &want);
  const SparseKvCache view = prep.host.view();
  for (const DecodeSelection sel :
       {by_delta(std::numeric_limits<float>::infinity()), by_mass(0.0f)}) {
    for (const RunConfig& r : kSparseConfigs) {
      GpuResult gpu;
      const Status s = run_gpu_sparse(prep.w, prep.dev.view, sel, r, &gpu);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      EXPECT_TRUE(check_against(gpu, want, c.spec.dtype, r.out_dtype, true, describe(r)));
      for (int64_t b = 0; b < view.batch; ++b) {
        const int64_t used = (prep.w.lengths[b] + view.block_size - 1) / view.block_size;
        for (int64_t h = 0; h < view.num_kv_heads; ++h) {
          for (int64_t j = 0; j < view.max_blocks; ++j) {
            ASSERT_EQ(gpu.mask[(b * view.num_kv_heads + h) * view.max_blocks + j],
                      j < used ? 1 : kMaskPoison)
                << "b " << b << " h " << h << " j " << j;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SparseDecodeGpu, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& param_info) { return param_info.param.name; });

// ---- dense ----

const RunConfig kDenseConfigs[] = {
    {DType::kFloat32, 0, true, false}, {DType::kFloat16, 1, true, false}, {DType::kBFloat16, 5, true, false}};

void check_dense(const DecodeWorkload& w, const DenseLayout& layout, const std::string& what) {
  DeviceDenseCache dev;
  const Status up = dev.upload_from(w, layout);
  ASSERT_TRUE(up.is_ok()) << up.to_string();
  Oracle want;
  oracle(dev.host, w.q.data(), w.num_q_heads, w.softmax_scale, 128, 0, nullptr, &want);
  for (const RunConfig& r : kDenseConfigs) {
    GpuResult gpu;
    const Status s = run_gpu_dense(w, dev.device, r, &gpu);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(check_against(gpu, want, w.dtype, r.out_dtype, true, what + ", " + describe(r)));
  }
}

class DenseDecodeGpu : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DenseDecodeGpu, MatchesOracle) {
  SKIP_WITHOUT_GPU();
  check_dense(make_decode_workload(GetParam().spec), {}, "contiguous");
}

INSTANTIATE_TEST_SUITE_P(Cases, DenseDecodeGpu, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& param_info) { return param_info.param.name; });

DecodeWorkloadSpec strided_spec(DType dtype, int64_t group) {
  DecodeWorkloadSpec spec;
  spec.dtype = dtype;
  spec.num_kv_heads = 3;
  spec.group_size = group;
  spec.lengths = {700, 0, 129, 64};
  spec.capacity = 900;
  spec.seed = 77;
  return spec;
}

// [batch, token, head, D] (vLLM/SGLang's layout) and padded strides.
TEST(DenseDecodeGpuStrided, TokenMajorAndPadded) {
  SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const DecodeWorkload w = make_decode_workload(strided_spec(dtype, dtype == DType::kFloat16 ? 4 : 16));
    DenseLayout token_major;
    token_major.token_stride = w.num_kv_heads * kD;
    token_major.head_stride = kD;
    token_major.batch_stride = w.capacity * w.num_kv_heads * kD;
    check_dense(w, token_major, std::string("token-major ") + dtype_name(dtype));
    DenseLayout padded;
    padded.token_stride = kD + 64;
    padded.head_stride = w.capacity * (kD + 64) + 8;
    padded.batch_stride = w.num_kv_heads * padded.head_stride + 24;
    check_dense(w, padded, std::string("padded ") + dtype_name(dtype));
  }
}

// ---- CUDA graphs ----

// Captured at one set of lengths, replayed after the cache grew (new contents and lengths written
// on the device into the same buffers): results match the CPU for the new lengths. Once with the
// default options, under which these small sizes read every block (the size dispatch), once
// selecting as asked.
void replay_after_the_context_grows(const DecodeSelection& sel, bool read_all_when_small) {
  DecodeCase c;
  c.name = "Graph";
  c.spec.num_kv_heads = 2;
  c.spec.group_size = 4;
  c.spec.lengths = {1500, 300};
  c.spec.capacity = 3000;
  c.block_size = 128;
  c.paged = true;
  const std::vector<int32_t> grown = {2900, 1025};
  DecodeWorkloadSpec full_spec = c.spec;
  full_spec.lengths = grown;
  const DecodeWorkload full = make_decode_workload(full_spec);
  DecodeWorkload small = full;
  small.lengths = c.spec.lengths;
  Prepared prep(c, small);
  const RunConfig r{DType::kFloat32, 0, true, true};
  DecodeOptions options = selecting_options(0);
  options.read_all_when_small = read_all_when_small;
  const DecodeSelection asked =
      read_all_when_small ? by_delta(std::numeric_limits<float>::infinity()) : sel;
  const int64_t mask_entries = prep.host.shape.batch * prep.host.shape.num_kv_heads * prep.host.shape.max_blocks;

  // Sparse and dense in one graph; the dense cache is the workload at the grown lengths with
  // its device lengths rewritten.
  DeviceDenseCache dense;
  ASSERT_TRUE(dense.upload_from(full, {}).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(dense.lengths.data(), small.lengths.data(), small.lengths.size() * 4).is_ok());
  DeviceOutputs sparse_out, dense_out;
  ASSERT_TRUE(sparse_out.prepare(prep.w, r, mask_entries).is_ok());
  ASSERT_TRUE(dense_out.prepare(prep.w, r, 0).is_ok());
  const SparseDecodeProblem sp = sparse_problem(prep.w, prep.dev.view, sel, r, sparse_out);
  DenseDecodeProblem dp;
  dp.cache = dense.device;
  dp.q = dense_out.q.data();
  dp.num_q_heads = full.num_q_heads;
  dp.softmax_scale = full.softmax_scale;
  dp.out = dense_out.out.data();
  dp.out_dtype = DType::kFloat32;
  dp.lse = dense_out.lse.as<float>();
  std::size_t sparse_bytes = 0, dense_bytes = 0;
  ASSERT_TRUE(sparse_decode_workspace_size(sp, &sparse_bytes, options).is_ok());
  ASSERT_TRUE(dense_decode_workspace_size(dp, &dense_bytes).is_ok());
  ASSERT_TRUE(sparse_out.workspace.allocate(sparse_bytes).is_ok());
  ASSERT_TRUE(dense_out.workspace.allocate(dense_bytes).is_ok());
  ASSERT_TRUE(testkit::fill_device(sparse_out.workspace.data(), kWorkspacePoison, sparse_bytes).is_ok());
  ASSERT_TRUE(testkit::fill_device(dense_out.workspace.data(), kWorkspacePoison, dense_bytes).is_ok());

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status s1 = sparse_decode(sp, sparse_out.workspace.data(), sparse_bytes, stream, options);
  const Status s2 = dense_decode(dp, dense_out.workspace.data(), dense_bytes, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(s1.is_ok()) << s1.to_string();
  ASSERT_TRUE(s2.is_ok()) << s2.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  for (int step = 0; step < 2; ++step) {
    if (step == 1) {
      // The context grows: the new cache contents and lengths, written into the same buffers.
      prep.w = full;
      const Status q = quantize_workload(&prep.w, c.block_size, c.paged, &prep.host);
      ASSERT_TRUE(q.is_ok()) << q.to_string();
      rebuild_cache(prep.host.view(), prep.w, &prep.rebuilt);
      ASSERT_TRUE(prep.dev.upload_from(prep.host).is_ok());
      ASSERT_TRUE(testkit::copy_to_device(dense.lengths.data(), full.lengths.data(), full.lengths.size() * 4).is_ok());
      ASSERT_TRUE(testkit::fill_device(sparse_out.mask.data(), kMaskPoison, sparse_out.mask.size()).is_ok());
    }
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    GpuResult gs, gd;
    ASSERT_TRUE(sparse_out.download(prep.w, r, mask_entries, &gs).is_ok());
    ASSERT_TRUE(dense_out.download(prep.w, r, 0, &gd).is_ok());
    CpuSparse cpu;
    run_cpu_sparse(prep, asked, &cpu);
    int ambiguous = 0;
    EXPECT_TRUE(asked.rule == SparseSelection::kMass
                    ? check_mass_mask(prep, cpu, gs, asked.value, &ambiguous)
                    : check_mask(prep, cpu, gs, asked.value,
                                 planned_blocks_per_split(prep.host.view(), 0), &ambiguous))
        << "step " << step;
    Oracle want_sparse, want_dense;
    oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
           c.block_size, prep.host.shape.max_blocks, gs.mask.data(), &want_sparse);
    EXPECT_TRUE(check_against(gs, want_sparse, DType::kFloat16, DType::kFloat32, true,
                              "sparse step " + std::to_string(step)));
    DenseKvCache host_dense = dense.host;
    host_dense.lengths = prep.w.lengths.data();
    oracle(host_dense, prep.w.q.data(), prep.w.num_q_heads, prep.w.softmax_scale, 128, 0, nullptr, &want_dense);
    EXPECT_TRUE(check_against(gd, want_dense, DType::kFloat16, DType::kFloat32, true,
                              "dense step " + std::to_string(step)));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(DecodeGpuGraph, ReplayAfterTheContextGrows) {
  SKIP_WITHOUT_GPU();
  replay_after_the_context_grows(by_delta(5.0f), false);
}

TEST(DecodeGpuGraph, ReplayAfterTheContextGrowsBoundedMass) {
  SKIP_WITHOUT_GPU();
  replay_after_the_context_grows(by_mass(0.01f), false);
}

TEST(DecodeGpuGraph, ReplayAfterTheContextGrowsReadingAllWhenSmall) {
  SKIP_WITHOUT_GPU();
  replay_after_the_context_grows(by_delta(5.0f), true);
}

// One graph of every decode path (sparse top-delta, bounded mass and every block, dense) on
// ragged lengths (empty, shorter than a block, at and around block edges, long) with many splits
// per sequence, replayed twice in a row with nothing changed: both replays match the oracle over
// what was read and each other bit for bit. The splits' arrival counters must be back at zero at
// the start of each launch (the workspaces start poisoned).
TEST(DecodeGpuGraph, ReplaysTwiceInARowOnRaggedLengths) {
  SKIP_WITHOUT_GPU();
  DecodeCase c;
  c.name = "Ragged";
  c.spec.num_kv_heads = 2;
  c.spec.group_size = 4;
  c.spec.lengths = {1, 127, 0, 128, 129, 2000, 3001, 1100};
  c.spec.capacity = 3072;
  c.spec.seed = 41;
  c.block_size = 128;
  c.paged = true;
  Prepared prep(c);
  const RunConfig r{DType::kFloat16, 0, true, true};
  const int64_t mask_entries = prep.host.shape.batch * prep.host.shape.num_kv_heads * prep.host.shape.max_blocks;
  for (const int64_t bps : {int64_t{1}, int64_t{8}}) {
    const DecodeSelection selections[] = {by_delta(5.0f), by_mass(0.01f),
                                          by_delta(std::numeric_limits<float>::infinity())};
    constexpr int kSparse = 3;
    DeviceOutputs outs[kSparse + 1];
    std::size_t bytes[kSparse + 1] = {};
    SparseDecodeProblem sp[kSparse];
    const DecodeOptions options = selecting_options(bps);
    for (int i = 0; i < kSparse; ++i) {
      ASSERT_TRUE(outs[i].prepare(prep.w, r, mask_entries).is_ok());
      sp[i] = sparse_problem(prep.w, prep.dev.view, selections[i], r, outs[i]);
      ASSERT_TRUE(sparse_decode_workspace_size(sp[i], &bytes[i], options).is_ok());
    }
    DeviceDenseCache dense;
    ASSERT_TRUE(dense.upload_from(prep.w, {}).is_ok());
    ASSERT_TRUE(outs[kSparse].prepare(prep.w, r, 0).is_ok());
    DenseDecodeProblem dp;
    dp.cache = dense.device;
    dp.q = outs[kSparse].q.data();
    dp.num_q_heads = prep.w.num_q_heads;
    dp.softmax_scale = prep.w.softmax_scale;
    dp.out = outs[kSparse].out.data();
    dp.out_dtype = r.out_dtype;
    dp.lse = outs[kSparse].lse.as<float>();
    DecodeOptions dense_options;
    dense_options.blocks_per_split = 2 * bps;  // the same tokens per split
    ASSERT_TRUE(dense_decode_workspace_size(dp, &bytes[kSparse], dense_options).is_ok());
    for (int i = 0; i <= kSparse; ++i) {
      ASSERT_TRUE(outs[i].workspace.allocate(bytes[i]).is_ok());
      ASSERT_TRUE(testkit::fill_device(outs[i].workspace.data(), kWorkspacePoison, bytes[i]).is_ok());
    }

    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    Status captured = Status::ok();
    for (int i = 0; i < kSparse && captured; ++i) {
      captured = sparse_decode(sp[i], outs[i].workspace.data(), bytes[i], stream, options);
    }
    if (captured) {
      captured = dense_decode(dp, outs[kSparse].workspace.data(), bytes[kSparse], stream, dense_options);
    }
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(captured.is_ok()) << captured.to_string();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

    GpuResult first[kSparse + 1];
    for (int replay = 0; replay < 2; ++replay) {
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::string what = "blocks_per_split " + std::to_string(bps) + ", replay " + std::to_string(replay);
      for (int i = 0; i <= kSparse; ++i) {
        GpuResult g;
        ASSERT_TRUE(outs[i].download(prep.w, r, i < kSparse ? mask_entries : 0, &g).is_ok());
        Oracle want;
        if (i < kSparse) {
          oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
                 c.block_size, prep.host.shape.max_blocks, g.mask.data(), &want);
        } else {
          oracle(dense.host, prep.w.q.data(), prep.w.num_q_heads, prep.w.softmax_scale, 128, 0,
                 nullptr, &want);
        }
        const std::string path = i < kSparse ? "sparse " + std::to_string(i) : std::string("dense");
        EXPECT_TRUE(check_against(g, want, DType::kFloat16, r.out_dtype, true, what + ", " + path));
        if (replay == 0) {
          first[i] = g;
        } else {
          EXPECT_EQ(g.out, first[i].out) << what << ", " << path;
          EXPECT_EQ(g.lse, first[i].lse) << what << ", " << path;
          EXPECT_EQ(g.mask, first[i].mask) << what << ", " << path;
        }
      }
      CpuSparse cpu;
      run_cpu_sparse(prep, selections[0], &cpu);
      GpuResult g;
      ASSERT_TRUE(outs[0].download(prep.w, r, mask_entries, &g).is_ok());
      int ambiguous = 0;
      EXPECT_TRUE(check_mask(prep, cpu, g, 5.0f, bps, &ambiguous)) << what;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// ---- small cases for compute-sanitizer (memcheck, racecheck) ----

DecodeCase small_case(DType dtype, int64_t group, bool paged, int64_t bs) {
  DecodeCase c;
  c.name = "Small";
  c.spec.dtype = dtype;
  c.spec.num_kv_heads = 2;
  c.spec.group_size = group;
  // The last sequence has candidates (blocks that are not anchors) for the bounded-mass pick.
  c.spec.lengths = {1, static_cast<int32_t>(2 * bs + 70), 0, static_cast<int32_t>(6 * bs + 5)};
  c.spec.seed = 5;
  c.block_size = bs;
  c.paged = paged;
  return c;
}

TEST(DecodeGpuSmall, SparseAndDense) {
  SKIP_WITHOUT_GPU();
  for (const DecodeCase& c : {small_case(DType::kFloat16, 4, true, 128), small_case(DType::kBFloat16, 16, false, 256)}) {
    Prepared prep(c);
    CpuSparse cpu;
    run_cpu_sparse(prep, by_delta(3.0f), &cpu);
    const RunConfig r{DType::kFloat16, 1, true, true};
    GpuResult gpu;
    Status s = run_gpu_sparse(prep.w, prep.dev.view, by_delta(3.0f), r, &gpu);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    int ambiguous = 0;
    EXPECT_TRUE(check_mask(prep, cpu, gpu, 3.0f, r.blocks_per_split, &ambiguous));
    // The bounded-mass passes (scan, pick, attend).
    CpuSparse cpu_mass;
    run_cpu_sparse(prep, by_mass(0.05f), &cpu_mass);
    GpuResult gpu_mass;
    s = run_gpu_sparse(prep.w, prep.dev.view, by_mass(0.05f), r, &gpu_mass);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(check_mass_mask(prep, cpu_mass, gpu_mass, 0.05f, &ambiguous));
    Oracle want_mass;
    oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
           c.block_size, prep.host.shape.max_blocks, gpu_mass.mask.data(), &want_mass);
    EXPECT_TRUE(check_against(gpu_mass, want_mass, c.spec.dtype, r.out_dtype, true, "mass"));
    Oracle want;
    oracle(prep.rebuilt.cache, prep.rebuilt.q.data(), prep.w.num_q_heads, prep.w.softmax_scale,
           c.block_size, prep.host.shape.max_blocks, gpu.mask.data(), &want);
    EXPECT_TRUE(check_against(gpu, want, c.spec.dtype, r.out_dtype, true, "sparse"));
    // Without the optional outputs: the same output, bit for bit.
    GpuResult bare;
    s = run_gpu_sparse(prep.w, prep.dev.view, by_delta(3.0f), RunConfig{DType::kFloat16, 1, false, false}, &bare);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(bare.out, gpu.out);
    check_dense(prep.w, {}, "dense small");
  }
}

}  // namespace
}  // namespace litetopk::testing
