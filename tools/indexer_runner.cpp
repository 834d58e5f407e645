#include "indexer_runner.h"

#include <algorithm>

#include "testkit/device_memory.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

Status run_gpu(const IndexerWorkload& w, const IndexerRunOptions& run_options, IndexerRun* run) {
  using testkit::upload;
  testkit::DeviceBuffer q, kv, kv_scale, weights, ks, ke, indices, workspace, state_buffer,
      counters;
  Status uploaded = upload(w.q, &q);
  if (uploaded) uploaded = upload(w.kv, &kv);
  if (uploaded) uploaded = upload(w.kv_scale, &kv_scale);
  if (uploaded) uploaded = upload(w.weights, &weights);
  if (uploaded) uploaded = upload(w.ks, &ks);
  if (uploaded) uploaded = upload(w.ke, &ke);
  if (!uploaded) return uploaded;
  const std::size_t index_count = static_cast<std::size_t>(w.spec.T * w.spec.k);
  if (Status s = indices.allocate(index_count * sizeof(int32_t)); !s) return s;

  IndexerProblem p = w.host_problem();
  p.q = q.data();
  p.kv = kv.data();
  p.kv_scale = kv_scale.as<float>();
  p.weights = weights.as<float>();
  p.ks = ks.as<int32_t>();
  p.ke = ke.as<int32_t>();
  p.indices = indices.as<int32_t>();

  const IndexerAlgo algo = run_options.algo;
  IndexerOptions options;
  options.algo = algo;
  options.candidate_capacity = run_options.candidate_capacity;
  options.cold_sample = run_options.cold_sample;
  IndexerState state;
  if (run_options.state) {
    run->state_bytes = indexer_state_bytes(w.spec.k);
    if (Status s = state_buffer.allocate(run->state_bytes); !s) return s;
    state.data = state_buffer.data();
    state.bytes = run->state_bytes;
    if (Status s = indexer_state_reset(state, nullptr); !s) return s;
    options.state = &state;
  }
  const IndexerAlgo resolved = algo == IndexerAlgo::kAuto ? indexer_topk_dispatch(p) : algo;
  run->algo = indexer_algo_name(resolved);
  // The fused kernel counts its candidates in an untimed run (with a state, a warm one).
  unsigned long long counts[3] = {0, 0, 0};
  if (resolved == IndexerAlgo::kFused) {
    if (Status s = counters.allocate(sizeof(counts)); !s) return s;
    if (Status s = testkit::fill_device(counters.data(), 0, sizeof(counts)); !s) return s;
    options.candidate_counters = static_cast<unsigned long long*>(counters.data());
  }

  if (Status s = indexer_topk_workspace_size(p, &run->workspace_bytes, options); !s) return s;
  if (Status s = workspace.allocate(run->workspace_bytes); !s) return s;
  if (Status s = testkit::fill_device(indices.data(), kPoisonByte, indices.size()); !s) return s;
  if (Status s = indexer_topk(p, workspace.data(), run->workspace_bytes, nullptr, options); !s) {
    return s;
  }
  run->indices.resize(index_count);
  if (Status s = testkit::copy_to_host(run->indices.data(), indices.data(), indices.size()); !s) {
    return s;
  }
  if (options.candidate_counters != nullptr) {
    if (run_options.state) {
      // Count a warm run: the one above read a zeroed state (a cold start) and wrote its sample.
      if (Status s = testkit::fill_device(counters.data(), 0, sizeof(counts)); !s) return s;
      if (Status s = indexer_topk(p, workspace.data(), run->workspace_bytes, nullptr, options);
          !s) {
        return s;
      }
    }
    if (Status s = testkit::copy_to_host(counts, counters.data(), sizeof(counts)); !s) return s;
    const auto queries = static_cast<double>(std::max<int64_t>(w.spec.T, 1));
    run->candidates_per_query = static_cast<double>(counts[0]) / queries;
    run->reductions_per_query = static_cast<double>(counts[1]) / queries;
    run->retried_blocks = static_cast<int64_t>(counts[2]);
    options.candidate_counters = nullptr;
  }
  if (!run_options.bench.enabled) return Status::ok();

  if (Status s = time_on_device(
          run_options.bench,
          [&](int) {
            return indexer_topk(p, workspace.data(), run->workspace_bytes, nullptr, options);
          },
          &run->timing);
      !s) {
    return s;
  }
  if (run_options.state) {
    run->warm_indices.resize(index_count);
    return testkit::copy_to_host(run->warm_indices.data(), indices.data(), indices.size());
  }
  return Status::ok();
}

Status run_cpu(const IndexerWorkload& w, const BenchOptions& bench, IndexerRun* run) {
  run->algo = "cpu";
  IndexerProblem p = w.host_problem();
  run->indices.assign(static_cast<std::size_t>(w.spec.T * w.spec.k), -2);
  p.indices = run->indices.data();
  if (Status s = indexer_topk_cpu(p); !s) return s;
  if (!bench.enabled) return Status::ok();

  std::vector<int32_t> scratch(run->indices.size());
  p.indices = scratch.data();
  return time_on_host(bench, [&](int) { return indexer_topk_cpu(p); }, &run->timing);
}

}  // namespace

std::string indexer_run_name(const IndexerRunOptions& options) {
  return options.on_cpu ? "cpu" : indexer_algo_name(options.algo);
}

Status run_indexer(const IndexerWorkload& w, const IndexerRunOptions& options, IndexerRun* run) {
  *run = IndexerRun{};
  return options.on_cpu ? run_cpu(w, options.bench, run) : run_gpu(w, options, run);
}

}  // namespace litetopk::tools
