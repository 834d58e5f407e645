#include "paged_indexer_runner.h"

#include <algorithm>
#include <functional>

#include "testkit/device_memory.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

int64_t query_rows(const PagedIndexerWorkload& w) { return w.batch * w.spec.next_n; }

Status run_gpu(const PagedIndexerWorkload& w, const PagedIndexerRunOptions& run_options,
               PagedIndexerRun* run) {
  using testkit::upload;
  testkit::DeviceBuffer q, kv_cache, weights, context_lens, block_table, indices, workspace,
      logits;
  Status uploaded = upload(w.q, &q);
  if (uploaded) uploaded = upload(w.kv_cache, &kv_cache);
  if (uploaded) uploaded = upload(w.weights, &weights);
  if (uploaded) uploaded = upload(w.context_lens, &context_lens);
  if (uploaded) uploaded = upload(w.block_table, &block_table);
  if (!uploaded) return uploaded;
  const std::size_t index_count = static_cast<std::size_t>(query_rows(w) * w.spec.k);
  if (Status s = indices.allocate(index_count * sizeof(int32_t)); !s) return s;

  PagedIndexerProblem p = w.host_problem();
  p.q = q.data();
  p.kv_cache = kv_cache.data();
  p.weights = weights.as<float>();
  p.context_lens = context_lens.as<int32_t>();
  p.block_table = block_table.as<int32_t>();
  p.indices = indices.as<int32_t>();

  IndexerOptions options;
  options.algo = run_options.algo;
  const IndexerAlgo resolved =
      options.algo == IndexerAlgo::kAuto ? indexer_topk_paged_dispatch(p) : options.algo;
  run->algo = indexer_algo_name(resolved);

  if (Status s = indexer_topk_paged_workspace_size(p, &run->workspace_bytes, options); !s) {
    return s;
  }
  if (Status s = workspace.allocate(run->workspace_bytes); !s) return s;
  if (Status s = testkit::fill_device(indices.data(), kPoisonByte, indices.size()); !s) return s;
  if (Status s = indexer_topk_paged(p, workspace.data(), run->workspace_bytes, nullptr, options);
      !s) {
    return s;
  }
  run->indices.resize(index_count);
  if (Status s = testkit::copy_to_host(run->indices.data(), indices.data(), indices.size()); !s) {
    return s;
  }
  if (!run_options.bench.enabled) return Status::ok();

  // Eager calls on the default stream, or replays of one graph (bench.graphs).
  const auto timed = [&](const std::function<Status(cudaStream_t)>& launch, Timing* timing) {
    if (run_options.bench.graphs) return time_graph_replays(run_options.bench, launch, timing);
    return time_on_device(run_options.bench, [&](int) { return launch(nullptr); }, timing);
  };
  if (Status s = timed(
          [&](cudaStream_t stream) {
            return indexer_topk_paged(p, workspace.data(), run->workspace_bytes, stream, options);
          },
          &run->timing);
      !s) {
    return s;
  }
  if (!run_options.time_logits) return Status::ok();
  // The stride is max_context rounded up to 4 floats (16 bytes), as an engine would allocate.
  const int64_t stride = (w.max_context + 3) / 4 * 4;
  run->logits_bytes = static_cast<std::size_t>(query_rows(w) * stride) * sizeof(float);
  if (Status s = logits.allocate(run->logits_bytes); !s) return s;
  if (Status s = timed(
          [&](cudaStream_t stream) {
            return indexer_logits_paged(p, logits.as<float>(), stride, stream);
          },
          &run->logits_timing);
      !s) {
    return s;
  }
  run->logits_timed = true;
  return Status::ok();
}

Status run_cpu(const PagedIndexerWorkload& w, const PagedIndexerRunOptions& run_options,
               PagedIndexerRun* run) {
  run->algo = "cpu";
  PagedIndexerProblem p = w.host_problem();
  run->indices.assign(static_cast<std::size_t>(query_rows(w) * w.spec.k), -2);
  p.indices = run->indices.data();
  if (Status s = indexer_topk_paged_cpu(p); !s) return s;
  if (!run_options.bench.enabled) return Status::ok();

  std::vector<int32_t> scratch(run->indices.size());
  p.indices = scratch.data();
  if (Status s = time_on_host(
          run_options.bench, [&](int) { return indexer_topk_paged_cpu(p); }, &run->timing);
      !s) {
    return s;
  }
  if (!run_options.time_logits) return Status::ok();
  const int64_t stride = w.max_context;
  std::vector<float> logits(static_cast<std::size_t>(query_rows(w) * stride));
  run->logits_bytes = logits.size() * sizeof(float);
  if (Status s = time_on_host(
          run_options.bench,
          [&](int) { return indexer_logits_paged_cpu(p, logits.data(), stride); },
          &run->logits_timing);
      !s) {
    return s;
  }
  run->logits_timed = true;
  return Status::ok();
}

}  // namespace

std::string paged_indexer_run_name(const PagedIndexerRunOptions& options) {
  return options.on_cpu ? "cpu" : indexer_algo_name(options.algo);
}

Status run_paged_indexer(const PagedIndexerWorkload& w, const PagedIndexerRunOptions& options,
                         PagedIndexerRun* run) {
  *run = PagedIndexerRun{};
  return options.on_cpu ? run_cpu(w, options, run) : run_gpu(w, options, run);
}

double paged_indexer_bytes_read(const PagedIndexerWorkload& w) {
  const int64_t next_n = w.spec.next_n, H = w.spec.H, D = w.spec.D;
  double tokens = 0;
  for (int64_t b = 0; b < w.batch; ++b) {
    // The last query sees the most; positions are counted once per request.
    tokens += static_cast<double>(
        std::max<int64_t>(0, std::min<int64_t>(w.context_lens[b], w.max_context)));
  }
  const double key_bytes = tokens * static_cast<double>(D + 4);
  const double query_bytes = static_cast<double>(w.batch * next_n * H * (D + 4));
  return key_bytes + query_bytes;
}

}  // namespace litetopk::tools
