// `litetopk demo`: a few default shapes, every algorithm of one backend, each verified against the
// CPU reference, and a table of times and speedups.
#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "environment.h"
#include "report.h"
#include "runner.h"
#include "verify.h"
#include "workload.h"

namespace litetopk::tools {

namespace {

struct DemoShape {
  int64_t batch;
  int64_t n;
  int64_t k;
};

// What the demo runs on one backend. The first variant is the baseline of the speedups.
struct DemoPlan {
  std::vector<DemoShape> shapes;
  std::vector<Variant> variants;
  int64_t verify_rows;  // per shape; the CPU reference on big GPU shapes is slow
  BenchOptions bench;
  BenchOptions quick_bench;
};

DemoPlan gpu_plan() {
  const auto gpu = [](SelectAlgo algo) {
    return Variant{Backend::kGpu, algo, CpuSelectAlgo::kFast};
  };
  return {{{256, 524288, 256}, {64, 131072, 2048}, {8, int64_t{1} << 20, 8192}},
          {gpu(SelectAlgo::kRadix), gpu(SelectAlgo::kSampleFilter), gpu(SelectAlgo::kAuto)},
          4,
          {true, 3, 20},
          {true, 1, 5}};
}

DemoPlan cpu_plan() {
  const auto cpu = [](CpuSelectAlgo algo) {
    return Variant{Backend::kCpu, SelectAlgo::kAuto, algo};
  };
  return {{{64, 131072, 2048}, {16, int64_t{1} << 20, 1024}},
          {cpu(CpuSelectAlgo::kReference), cpu(CpuSelectAlgo::kFast)},
          std::numeric_limits<int64_t>::max(),
          {true, 1, 5},
          {true, 0, 2}};
}

int run_demo(const std::string& device, bool quick) {
  const GpuInfo gpu = probe_gpu();
  const bool on_gpu = device == "gpu" || (device == "auto" && gpu.available);
  if (on_gpu && !gpu.available) {
    std::cerr << "litetopk: error: --device gpu, but there is no GPU: " << gpu.absent_reason
              << '\n';
    return kExitFailure;
  }
  const DemoPlan plan = on_gpu ? gpu_plan() : cpu_plan();
  const BenchOptions bench = quick ? plan.quick_bench : plan.bench;
  const CpuInfo cpu = probe_cpu();
  std::cout << "litetopk demo on "
            << (on_gpu ? gpu.device.name
                       : cpu.model + " (CPU, " + std::to_string(cpu.hardware_threads) + " threads)")
            << ": exact top-k of random normal fp32 rows, median of " << bench.iters
            << " runs, checked against the CPU reference ("
            << (on_gpu ? "rows 0.." + std::to_string(plan.verify_rows - 1) + " of each shape"
                       : std::string("every row"))
            << ")\n\n";

  const std::string baseline = variant_name(plan.variants.front());
  Table table({"shape", "algo", "ms", "GB/s", "vs " + baseline, "exact"}, 2);
  const std::size_t steps = plan.shapes.size() * plan.variants.size();
  std::size_t step = 0;
  bool all_ok = true;
  for (const DemoShape& shape : plan.shapes) {
    WorkloadSpec spec;
    spec.batch = shape.batch;
    spec.n = shape.n;
    spec.k = shape.k;
    spec.seed = 42;
    const Workload workload = make_workload(spec);
    const SelectProblem problem = workload.host_problem();
    const int64_t rows = std::min(plan.verify_rows, shape.batch);
    std::vector<int32_t> reference;
    if (Status s = reference_topk(problem, rows, &reference); !s) {
      std::cerr << "litetopk: error: reference: " << s.to_string() << '\n';
      return kExitFailure;
    }
    const std::string label = shape_label(shape.batch, shape.n, shape.k);
    SelectionRunner runner(problem, bench);
    double baseline_ms = 0;
    for (const Variant& variant : plan.variants) {
      const std::string name = variant_name(variant);
      std::cout << '[' << ++step << '/' << steps << "] " << name << ' ' << label << " ... "
                << std::flush;
      RunResult result;
      if (Status s = runner.run(variant, &result); !s) {
        std::cout << "error\n";
        std::cerr << "  " << s.to_string() << '\n';
        table.add_row({label, name, "error"});
        all_ok = false;
        continue;
      }
      const std::string mismatch =
          compare_topk(problem, result.indices.data(), reference.data(), rows);
      const double ms = result.timing.median_ms;
      if (name == baseline) baseline_ms = ms;
      std::cout << fixed(ms, 3) << " ms" << (mismatch.empty() ? "" : ", MISMATCH") << '\n';
      if (!mismatch.empty()) std::cerr << "  " << mismatch << '\n';
      all_ok = all_ok && mismatch.empty();
      table.add_row({label, name == result.algo ? name : name + " (" + result.algo + ")",
                     fixed(ms, 3), fixed(gigabytes_per_second(workload.bytes_read(), ms), 1),
                     baseline_ms > 0 && ms > 0 ? fixed(baseline_ms / ms, 2) + "x" : "-",
                     mismatch.empty() ? "yes" : "NO"});
    }
  }
  std::cout << '\n';
  table.print(std::cout);
  std::cout << (all_ok ? "\nall results exact\n" : "\nFAILED: see the errors above\n");
  return all_ok ? kExitOk : kExitFailure;
}

}  // namespace

void add_demo_command(CLI::App& app, int* exit_code) {
  auto device = std::make_shared<std::string>("auto");
  auto quick = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "demo", "Run every algorithm on a few default shapes, verify and time them");
  cmd->add_option("--device", *device, "auto: the GPU when present, else the CPU")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  cmd->add_flag("--quick", *quick, "Fewer timed runs");
  cmd->callback([device, quick, exit_code] { *exit_code = run_demo(*device, *quick); });
}

}  // namespace litetopk::tools
