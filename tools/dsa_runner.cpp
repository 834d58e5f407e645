#include "dsa_runner.h"

#include <algorithm>
#include <cstring>

#include "testkit/device_memory.h"
#include "testkit/sparse_attention_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

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

// The layer (dsa_prefill_cpu: its outputs are the checked ones), then with bench each stage on
// its own (indexer_topk_cpu into scratch indices, sparse_attention_cpu over the layer's indices
// into scratch outputs), timed with the host clock.
Status run_cpu(const DsaWorkload& w, const BenchOptions& bench, DsaRun* run) {
  run->indexer_algo = "cpu";
  run->attention_algo = "cpu";
  size_outputs(w.spec, run);
  poison_outputs(run);
  DsaPrefillProblem layer = dsa_prefill_problem(w);
  layer.indices = run->indices.data();
  layer.out = run->out.data();
  layer.max_logits = run->max_logits.data();
  layer.lse = run->lse.data();
  const auto layer_call = [&](int) { return dsa_prefill_cpu(layer); };
  if (!bench.enabled) return layer_call(0);
  if (Status s = time_on_host(bench, layer_call, &run->layer); !s) return s;
  DsaRun stage;  // the stages' own outputs
  size_outputs(w.spec, &stage);
  IndexerProblem ip = w.indexer_problem();
  ip.indices = stage.indices.data();
  SparseAttentionProblem ap = w.attention_problem(run->indices.data());
  ap.out = stage.out.data();
  ap.max_logits = stage.max_logits.data();
  ap.lse = stage.lse.data();
  if (Status s = time_on_host(bench, [&](int) { return indexer_topk_cpu(ip); }, &run->indexer);
      !s) {
    return s;
  }
  return time_on_host(bench, [&](int) { return sparse_attention_cpu(ap); }, &run->attention);
}

Status run_gpu(const DsaWorkload& w, const DsaRunOptions& options, DsaRun* run) {
  const DsaSpec& spec = w.spec;
  size_outputs(spec, run);
  DeviceBuffer q, kv, kv_scale, weights, ks, ke, mla_q, mla_kv, indices, out, max_logits, lse,
      layer_workspace;
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

  // The layer: one plan, one launch per run, writing the run's indices (the checked ones).
  DsaPrefillProblem layer = dsa_prefill_problem(w);
  layer.indices = indices.as<int32_t>();
  DsaPrefillOptions layer_options;
  layer_options.indexer.algo = options.indexer_algo;
  layer_options.attention_algo = options.attention_algo;
  DsaPrefillPlan plan;
  if (Status s = dsa_prefill_plan(layer, layer_options, &plan); !s) return s;
  run->indexer_algo = indexer_algo_name(plan.indexer.algo);
  run->attention_algo = sparse_attention_algo_name(plan.attention.algo);
  run->indexer_workspace_bytes = plan.indexer.workspace_bytes;
  run->attention_workspace_bytes = plan.attention.workspace_bytes;
  run->layer_workspace_bytes = plan.workspace_bytes;
  if (Status s = layer_workspace.allocate(plan.workspace_bytes); !s) return s;
  DsaPrefillAddresses addresses;
  addresses.index_q = q.data();
  addresses.index_kv = kv.data();
  addresses.index_kv_scale = kv_scale.as<float>();
  addresses.index_weights = weights.as<float>();
  addresses.ks = ks.as<int32_t>();
  addresses.ke = ke.as<int32_t>();
  addresses.q = mla_q.data();
  addresses.kv = mla_kv.data();
  addresses.out = out.data();
  addresses.max_logits = max_logits.as<float>();
  addresses.lse = lse.as<float>();
  addresses.indices = indices.as<int32_t>();
  const auto layer_call = [&](int) {
    return dsa_prefill_launch(plan, addresses, layer_workspace.data(), nullptr);
  };

  // The stages alone, each with its half's plan (the same algorithms), in the layer's workspace
  // (larger than either half's).
  const auto indexer_stage = [&](int) {
    IndexerAddresses a;
    a.q = addresses.index_q;
    a.kv = addresses.index_kv;
    a.kv_scale = addresses.index_kv_scale;
    a.weights = addresses.index_weights;
    a.ks = addresses.ks;
    a.ke = addresses.ke;
    a.indices = addresses.indices;
    return indexer_topk_launch(plan.indexer, a, layer_workspace.data(), nullptr);
  };
  const auto attention_stage = [&](int) {
    const SparseAttentionAddresses a{addresses.q,   addresses.kv,         addresses.indices,
                                     addresses.out, addresses.max_logits, addresses.lse};
    return sparse_attention_launch(plan.attention, a, layer_workspace.data(), nullptr);
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
    if (Status s = time_on_device(options.bench, layer_call, &run->layer); !s) return s;
  } else if (Status s = layer_call(0); !s) {
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

DsaPrefillProblem dsa_prefill_problem(const DsaWorkload& w) {
  const IndexerProblem ip = w.indexer_problem();
  const SparseAttentionProblem ap = w.attention_problem(nullptr);
  DsaPrefillProblem p;
  p.index_q = ip.q;
  p.index_kv = ip.kv;
  p.index_kv_scale = ip.kv_scale;
  p.index_weights = ip.weights;
  p.ks = ip.ks;
  p.ke = ip.ke;
  p.num_queries = ip.num_queries;
  p.num_keys = ip.num_keys;
  p.index_heads = ip.num_heads;
  p.index_head_dim = ip.head_dim;
  p.k = ip.k;
  p.q = ap.q;
  p.kv = ap.kv;
  p.h_q = ap.h_q;
  p.d_qk = ap.d_qk;
  p.d_v = ap.d_v;
  p.sm_scale = ap.sm_scale;
  return p;
}

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
