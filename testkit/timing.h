// The timing loops of the tools' commands and benchmarks: host wall-clock or CUDA-event timing of
// repeated runs, and the median and minimum (their --bench, --iters and --warmup options are
// tools/cli_options.h's add_bench_options).
#pragma once

#include <functional>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk::testkit {

// Poison for outputs: an unwritten slot reads as a negative index that is not -1.
constexpr int kPoisonByte = 0xab;

struct BenchOptions {
  bool enabled = false;
  int warmup = 3;
  int iters = 20;
  bool graphs = false;  // GPU: time replays of one captured CUDA graph (time_graph_replays)
};

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
};

// Calls run(i) for i = 0 .. bench.warmup + bench.iters - 1, stopping at the first error, and
// summarizes the times of the last bench.iters calls into *timing: host wall clock.
Status time_on_host(const BenchOptions& bench, const std::function<Status(int)>& run,
                    Timing* timing);
// The same, timed with CUDA events on the default stream around each call.
Status time_on_device(const BenchOptions& bench, const std::function<Status(int)>& run,
                      Timing* timing);
// Captures launch(stream) into a CUDA graph once, then times bench.warmup + bench.iters replays
// with CUDA events on its stream, as time_on_device does.
Status time_graph_replays(const BenchOptions& bench,
                          const std::function<Status(cudaStream_t)>& launch, Timing* timing);

}  // namespace litetopk::testkit
