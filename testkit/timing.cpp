#include "testkit/timing.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "testkit/device_memory.h"

namespace litetopk::testkit {

namespace {

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

// Times run(i) for i = 0 .. bench.warmup + bench.iters - 1 with CUDA events on `stream`.
Status time_with_events(const BenchOptions& bench, cudaStream_t stream,
                        const std::function<Status(int)>& run, Timing* timing) {
  testkit::DeviceTimer timer;
  std::vector<double> samples;
  for (int i = 0; i < bench.warmup + bench.iters; ++i) {
    if (Status s = timer.start(stream); !s) return s;
    if (Status s = run(i); !s) return s;
    float ms = 0;
    if (Status s = timer.stop(&ms, stream); !s) return s;
    if (i >= bench.warmup) samples.push_back(ms);
  }
  *timing = summarize(std::move(samples));
  return Status::ok();
}

}  // namespace

Status time_on_host(const BenchOptions& bench, const std::function<Status(int)>& run,
                    Timing* timing) {
  std::vector<double> samples;
  for (int i = 0; i < bench.warmup + bench.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (Status s = run(i); !s) return s;
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    if (i >= bench.warmup) samples.push_back(elapsed.count());
  }
  *timing = summarize(std::move(samples));
  return Status::ok();
}

Status time_on_device(const BenchOptions& bench, const std::function<Status(int)>& run,
                      Timing* timing) {
  return time_with_events(bench, nullptr, run, timing);
}

Status time_graph_replays(const BenchOptions& bench,
                          const std::function<Status(cudaStream_t)>& launch, Timing* timing) {
  DeviceGraph graph;
  if (Status s = graph.capture(launch); !s) return s;
  return time_with_events(bench, graph.stream(), [&](int) { return graph.replay(); }, timing);
}

}  // namespace litetopk::testkit
