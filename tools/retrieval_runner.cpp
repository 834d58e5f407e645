#include "retrieval_runner.h"

#include "testkit/device_memory.h"

namespace litetopk::tools {

namespace {

std::size_t count(int64_t n) { return static_cast<std::size_t>(n); }

// Copies `bytes` from `host` to a new device buffer (none when host is null).
Status upload(const void* host, std::size_t bytes, testkit::DeviceBuffer* device) {
  if (host == nullptr || bytes == 0) return Status::ok();
  if (Status s = device->allocate(bytes); !s) return s;
  return testkit::copy_to_device(device->data(), host, bytes);
}

}  // namespace

Status run_retrieval_gpu(const RetrievalProblem& host, const testkit::BenchOptions& bench,
                         RetrievalRun* run, RetrievalPath path) {
  const std::size_t out = count(host.batch * host.k);
  const std::size_t element = dtype_size(host.dtype);
  const std::size_t corpus_element =
      host.corpus_format == RetrievalCorpusFormat::kFp8E4M3 ? 1 : element;
  testkit::DeviceBuffer queries, corpus, scales, norms, starts, ends, bitmap, indices, scores,
      workspace;
  if (Status s = upload(host.queries, count(host.batch * host.dim) * element, &queries); !s) return s;
  if (Status s = upload(host.corpus, count(host.n * host.dim) * corpus_element, &corpus); !s) {
    return s;
  }
  if (Status s = upload(host.corpus_scales, count(host.n) * 4, &scales); !s) return s;
  if (Status s = upload(host.corpus_norms, count(host.n) * 4, &norms); !s) return s;
  if (Status s = upload(host.range_starts, count(host.batch) * 4, &starts); !s) return s;
  if (Status s = upload(host.range_ends, count(host.batch) * 4, &ends); !s) return s;
  if (Status s = upload(host.corpus_bitmap, count(retrieval_bitmap_bytes(host.n)), &bitmap); !s) {
    return s;
  }
  if (Status s = indices.allocate(out * 4); !s) return s;
  if (Status s = scores.allocate(out * 4); !s) return s;
  if (Status s = testkit::fill_device(indices.data(), testkit::kPoisonByte, out * 4); !s) return s;
  RetrievalProblem device = host;
  device.queries = queries.data();
  device.corpus = corpus.data();
  device.corpus_scales = scales.as<float>();
  device.corpus_norms = norms.as<float>();
  device.range_starts = starts.as<int32_t>();
  device.range_ends = ends.as<int32_t>();
  device.corpus_bitmap = bitmap.as<uint8_t>();
  device.indices = indices.as<int32_t>();
  device.scores = scores.as<float>();
  RetrievalOptions options;
  options.path = path;
  RetrievalPlan plan;
  if (Status s = retrieval_topk_plan(device, options, &plan); !s) return s;
  if (Status s = workspace.allocate(plan.workspace_bytes); !s) return s;
  const RetrievalAddresses addresses = retrieval_addresses(device);
  const auto launch = [&](int) {
    return retrieval_topk_launch(plan, addresses, workspace.data(), nullptr);
  };
  if (Status s = launch(0); !s) return s;
  if (bench.enabled) {
    if (Status s = testkit::time_on_device(bench, launch, &run->timing); !s) return s;
  }
  if (Status s = testkit::device_synchronize(); !s) return s;
  run->indices.assign(out, 0);
  run->scores.assign(out, 0.0f);
  run->chunks = plan.chunks;
  run->path = plan.path;
  if (Status s = testkit::copy_to_host(run->indices.data(), indices.data(), out * 4); !s) return s;
  return testkit::copy_to_host(run->scores.data(), scores.data(), out * 4);
}

Status run_retrieval_cpu(const RetrievalProblem& host, const testkit::BenchOptions& bench,
                         RetrievalRun* run) {
  const std::size_t out = count(host.batch * host.k);
  run->indices.assign(out, 0);
  run->scores.assign(out, 0.0f);
  RetrievalProblem problem = host;
  problem.indices = run->indices.data();
  problem.scores = run->scores.data();
  if (Status s = retrieval_topk_cpu(problem); !s) return s;
  if (!bench.enabled) return Status::ok();
  return testkit::time_on_host(bench, [&](int) { return retrieval_topk_cpu(problem); },
                               &run->timing);
}

}  // namespace litetopk::tools
