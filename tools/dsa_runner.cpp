#include "dsa_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "testkit/device_memory.h"
#include "testkit/sparse_attention_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// The attention's algorithm as it runs: kAuto resolved like sparse_attention's plan.
SparseAttentionAlgo resolve_attention(SparseAttentionProblem p) {
  if (p.algo != SparseAttentionAlgo::kAuto) return p.algo;
  p.algo = SparseAttentionAlgo::kUnionPacked;
  return validate_sparse_attention_problem(p).is_ok() ? SparseAttentionAlgo::kUnionPacked
                                                      : SparseAttentionAlgo::kPerQuery;
}

// The host outputs, sized for the spec.
void size_outputs(const DsaSpec& spec, DsaRun* run) {
  run->indices.assign(size(spec.T * spec.k), 0);
  run->out.assign(size(spec.T * spec.h_q * spec.d_v), 0);
  run->max_logits.assign(size(spec.T * spec.h_q), 0.0f);
  run->lse.assign(run->max_logits.size(), 0.0f);
}

// Poisons the host outputs: indices a negative value other than -1, out NaN, the stats a finite
// value no softmax gives.
void poison_outputs(DsaRun* run) {
  std::memset(run->indices.data(), kPoisonByte, run->indices.size() * sizeof(int32_t));
  std::fill(run->out.begin(), run->out.end(), uint16_t{0x7fc0});
  std::fill(run->max_logits.begin(), run->max_logits.end(), 12345.0f);
  std::fill(run->lse.begin(), run->lse.end(), 12345.0f);
}

Timing summarize(std::vector<double> samples_ms) {
  Timing timing;
  if (samples_ms.empty()) return timing;
  std::sort(samples_ms.begin(), samples_ms.end());
  const std::size_t mid = samples_ms.size() / 2;
  timing.median_ms =
      samples_ms.size() % 2 ? samples_ms[mid] : (samples_ms[mid - 1] + samples_ms[mid]) / 2;
  timing.min_ms = samples_ms.front();
  return timing;
}

// The references are slow, so each layer run times its two stages too (host clock): the stage
// times are the same calls as the layer's, not separate runs as on the GPU.
Status run_cpu(const DsaWorkload& w, const BenchOptions& bench, DsaRun* run) {
  run->indexer_algo = "cpu";
  run->attention_algo = "cpu";
  size_outputs(w.spec, run);
  poison_outputs(run);
  IndexerProblem ip = w.indexer_problem();
  ip.indices = run->indices.data();
  SparseAttentionProblem ap = w.attention_problem(run->indices.data());
  ap.out = run->out.data();
  ap.max_logits = run->max_logits.data();
  ap.lse = run->lse.data();
  using Clock = std::chrono::steady_clock;
  const auto ms_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::vector<double> indexer_ms, attention_ms, layer_ms;
  const int runs = bench.enabled ? bench.warmup + bench.iters : 1;
  for (int i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    if (Status s = indexer_topk_cpu(ip); !s) return s;
    const Clock::time_point between = Clock::now();
    if (Status s = sparse_attention_cpu(ap); !s) return s;
    const Clock::time_point end = Clock::now();
    if (i < runs - (bench.enabled ? bench.iters : 0)) continue;  // warm-up or untimed
    indexer_ms.push_back(ms_between(start, between));
    attention_ms.push_back(ms_between(between, end));
    layer_ms.push_back(ms_between(start, end));
  }
  run->indexer = summarize(indexer_ms);
  run->attention = summarize(attention_ms);
  run->layer = summarize(layer_ms);
  return Status::ok();
}

Status run_gpu(const DsaWorkload& w, const DsaRunOptions& options, DsaRun* run) {
  const DsaSpec& spec = w.spec;
  size_outputs(spec, run);
  DeviceBuffer q, kv, kv_scale, weights, ks, ke, mla_q, mla_kv, indices, out, max_logits, lse,
      indexer_workspace, attention_workspace;
  const IndexerWorkload& iw = w.indexer;
  Status uploaded = upload(iw.q, &q);
  if (uploaded) uploaded = upload(iw.kv, &kv);
  if (uploaded) uploaded = upload(iw.kv_scale, &kv_scale);
  if (uploaded) uploaded = upload(iw.weights, &weights);
  if (uploaded) uploaded = upload(iw.ks, &ks);
  if (uploaded) uploaded = upload(iw.ke, &ke);
  if (uploaded) uploaded = upload(w.attention.q, &mla_q);
  if (uploaded) uploaded = upload(w.attention.kv, &mla_kv);
  if (uploaded) uploaded = indices.allocate(run->indices.size() * sizeof(int32_t));
  if (uploaded) uploaded = out.allocate(run->out.size() * sizeof(uint16_t));
  if (uploaded) uploaded = max_logits.allocate(run->max_logits.size() * sizeof(float));
  if (uploaded) uploaded = lse.allocate(run->lse.size() * sizeof(float));
  if (!uploaded) return uploaded;

  IndexerProblem ip = w.indexer_problem();
  ip.q = q.data();
  ip.kv = kv.data();
  ip.kv_scale = kv_scale.as<float>();
  ip.weights = weights.as<float>();
  ip.ks = ks.as<int32_t>();
  ip.ke = ke.as<int32_t>();
  ip.indices = indices.as<int32_t>();
  IndexerOptions io;
  io.algo = options.indexer_algo;
  run->indexer_algo = indexer_algo_name(
      io.algo == IndexerAlgo::kAuto ? indexer_topk_dispatch(ip) : io.algo);

  SparseAttentionProblem ap = w.attention_problem(indices.as<int32_t>());
  ap.q = mla_q.data();
  ap.kv = mla_kv.data();
  ap.out = out.data();
  ap.max_logits = max_logits.as<float>();
  ap.lse = lse.as<float>();
  ap.algo = options.attention_algo;
  run->attention_algo = sparse_attention_algo_name(resolve_attention(ap));

  if (Status s = indexer_topk_workspace_size(ip, &run->indexer_workspace_bytes, io); !s) return s;
  if (Status s = indexer_workspace.allocate(run->indexer_workspace_bytes); !s) return s;
  if (Status s = sparse_attention_workspace_size(ap, &run->attention_workspace_bytes); !s) {
    return s;
  }
  if (Status s = attention_workspace.allocate(run->attention_workspace_bytes); !s) return s;

  const auto indexer_stage = [&](int) {
    return indexer_topk(ip, indexer_workspace.data(), run->indexer_workspace_bytes, nullptr, io);
  };
  const auto attention_stage = [&](int) {
    return sparse_attention(ap, attention_workspace.data(), run->attention_workspace_bytes,
                            nullptr);
  };
  const auto layer = [&](int i) -> Status {
    if (Status s = indexer_stage(i); !s) return s;
    return attention_stage(i);
  };
  if (options.bench.enabled) {
    if (Status s = time_on_device(options.bench, indexer_stage, &run->indexer); !s) return s;
    if (Status s = time_on_device(options.bench, attention_stage, &run->attention); !s) return s;
  }
  // The checked outputs: the layer's own, written over poison.
  poison_outputs(run);
  if (Status s = copy_to_device(indices.data(), run->indices.data(), indices.size()); !s) return s;
  if (Status s = copy_to_device(out.data(), run->out.data(), out.size()); !s) return s;
  if (Status s = copy_to_device(max_logits.data(), run->max_logits.data(), max_logits.size()); !s) {
    return s;
  }
  if (Status s = copy_to_device(lse.data(), run->lse.data(), lse.size()); !s) return s;
  if (options.bench.enabled) {
    if (Status s = time_on_device(options.bench, layer, &run->layer); !s) return s;
  } else if (Status s = layer(0); !s) {
    return s;
  }
  if (Status s = copy_to_host(run->indices.data(), indices.data(), indices.size()); !s) return s;
  if (Status s = copy_to_host(run->out.data(), out.data(), out.size()); !s) return s;
  if (Status s = copy_to_host(run->max_logits.data(), max_logits.data(), max_logits.size()); !s) {
    return s;
  }
  return copy_to_host(run->lse.data(), lse.data(), lse.size());
}

}  // namespace

std::string dsa_run_error(const DsaSpec& spec, const DsaRunOptions& options) {
  if (!options.on_gpu) {
    if (options.indexer_algo != IndexerAlgo::kAuto) {
      return std::string("indexer algorithm ") + indexer_algo_name(options.indexer_algo) +
             " is a GPU kernel; the CPU runs the reference indexer_topk_cpu";
    }
    if (options.attention_algo != SparseAttentionAlgo::kAuto) {
      return std::string("attention algorithm ") +
             sparse_attention_algo_name(options.attention_algo) +
             " is a GPU kernel; the CPU runs the reference sparse_attention_cpu";
    }
    return "";
  }
  // The library's own check of the shape and the algorithm (it reads no pointer, only checks
  // them: any aligned address will do).
  alignas(16) static unsigned char placeholder[16] = {};
  SparseAttentionProblem p;
  p.q = placeholder;
  p.kv = placeholder;
  p.indices = reinterpret_cast<const int32_t*>(placeholder);
  p.out = placeholder;
  p.s_q = spec.T;
  p.s_kv = spec.S;
  p.h_q = spec.h_q;
  p.d_qk = spec.d_qk;
  p.d_v = spec.d_v;
  p.topk = spec.k;
  p.sm_scale = 1.0f;
  p.algo = options.attention_algo;
  if (Status s = validate_sparse_attention_problem(p); !s) {
    return "sparse_attention: " + s.to_string();
  }
  return "";
}

Status run_dsa_layer(const DsaWorkload& w, const DsaRunOptions& options, DsaRun* run) {
  *run = DsaRun{};
  return options.on_gpu ? run_gpu(w, options, run) : run_cpu(w, options.bench, run);
}

int64_t dsa_union_group(const DsaSpec& spec) {
  return spec.h_q == 16 || spec.h_q == 32 ? 64 / spec.h_q : 0;
}

double dsa_union_reuse(const DsaSpec& spec, const int32_t* indices) {
  const int64_t group = dsa_union_group(spec);
  if (group == 0) return 0.0;
  return measure_group_unions(indices, spec.T, spec.k, spec.S, group).reuse();
}

}  // namespace litetopk::tools
