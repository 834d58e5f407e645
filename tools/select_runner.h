// Runs one selection problem with several variants (GPU algorithms, CPU algorithms), keeping the
// output of the first run for verification and timing more runs when benchmarking.
#pragma once

#include <string>
#include <vector>

#include "testkit/device_memory.h"
#include "litetopk/select.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

enum class Backend { kGpu, kCpu };

// One way to run a selection: a GPU algorithm or a CPU one.
struct Variant {
  Backend backend = Backend::kGpu;
  SelectAlgo gpu_algo = SelectAlgo::kAuto;
  CpuSelectAlgo cpu_algo = CpuSelectAlgo::kFast;
};
// "auto", "radix", "sample-filter", "grid-radix", "sieve", "cluster", "register" (GPU), "cpu",
// "cpu-reference".
std::string variant_name(const Variant& variant);
// Parses variant_name's output; "auto" is the GPU's cost model.
bool parse_variant(const std::string& name, Variant* variant);

struct RunResult {
  std::string algo;              // what ran: "auto" resolved to the algorithm it dispatched
  std::vector<int32_t> indices;  // [batch, k], host
  Timing timing;                 // when benchmarked
};

class SelectionRunner {
 public:
  // `host_problem`: host rows (row stride n) and ranges, with k and the flags set; it must outlive
  // the runner. GPU variants share one upload, made by the first of them.
  SelectionRunner(const SelectProblem& host_problem, BenchOptions bench);
  Status run(const Variant& variant, RunResult* result);

 private:
  Status upload();
  Status run_gpu(SelectAlgo algo, RunResult* result);
  Status run_cpu(CpuSelectAlgo algo, RunResult* result);

  SelectProblem host_problem_;
  BenchOptions bench_;
  // When benchmarking, copies of the rows that successive iterations rotate through, so that the
  // input is not served from L2.
  std::vector<testkit::DeviceBuffer> score_copies_;
  testkit::DeviceBuffer row_starts_;
  testkit::DeviceBuffer row_ends_;
  testkit::DeviceBuffer indices_;
};

}  // namespace litetopk::tools
