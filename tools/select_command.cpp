// `litetopk select`: generate rows, select their top k with one backend, optionally verify against
// the CPU reference and benchmark; print a table and optionally write a JSON record.
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_options.h"
#include "commands.h"
#include "device_choice.h"
#include "memory_plan.h"
#include "progress.h"
#include "report.h"
#include "select_runner.h"
#include "testkit/select_verify.h"
#include "testkit/select_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

struct SelectArgs {
  int64_t batch = 64;
  int64_t n = 131072;
  int64_t k = 2048;
  std::string dtype = "fp32";
  bool smallest = false;
  bool sorted = false;
  bool deterministic = false;
  bool ranges = false;
  std::string algo = "auto";
  std::string device = "auto";
  std::string pattern = "normal";
  uint64_t seed = 42;
  bool verify = false;
  BenchOptions bench;
  std::string json_path;
};

bool is_dtype(const std::string& name) {
  DType dtype;
  return parse_dtype(name.c_str(), &dtype);
}

bool is_variant(const std::string& name) {
  Variant variant;
  return parse_variant(name, &variant);
}

bool is_pattern(const std::string& name) {
  Pattern pattern;
  return parse_pattern(name, &pattern);
}

// The host buffers of a run: the rows, the indices and, with --verify, the reference's.
std::vector<HostBuffer> host_buffers(const SelectArgs& args) {
  DType dtype = DType::kFloat32;
  parse_dtype(args.dtype.c_str(), &dtype);  // validated by the option
  const double rows = static_cast<double>(args.batch);
  const double out = rows * static_cast<double>(args.k) * sizeof(int32_t);
  std::vector<HostBuffer> buffers = {
      {"the rows [--batch x --n] " + args.dtype,
       rows * static_cast<double>(args.n) * static_cast<double>(dtype_size(dtype))},
      {"the indices [--batch x --k] int32", out}};
  if (args.verify) buffers.push_back({"the reference's indices [--batch x --k] int32", out});
  return buffers;
}

int run_select(const SelectArgs& args) {
  Variant variant;
  parse_variant(args.algo, &variant);  // validated by the option
  const AlgoPlace place = variant.backend == Backend::kCpu ? AlgoPlace::kCpu
                          : variant.gpu_algo == SelectAlgo::kAuto ? AlgoPlace::kEither
                                                                   : AlgoPlace::kGpu;
  const DeviceChoice device = choose_device(args.device, "--algo", args.algo, place);
  if (!device.error.empty()) {
    std::cerr << "litetopk: error: " << device.error << '\n';
    return kExitFailure;
  }
  if (!device.note.empty()) std::cout << device.note << '\n';
  if (!device.on_gpu) variant.backend = Backend::kCpu;
  const std::string& device_name = device.device_name;

  WorkloadSpec spec;
  spec.batch = args.batch;
  spec.n = args.n;
  spec.k = args.k;
  parse_dtype(args.dtype.c_str(), &spec.dtype);
  parse_pattern(args.pattern, &spec.pattern);
  spec.seed = args.seed;
  spec.ranges = args.ranges;
  const std::string shape = shape_label(spec.batch, spec.n, spec.k);
  std::cout << "generating " << shape << ' ' << dtype_name(spec.dtype) << " rows (" << args.pattern
            << ", seed " << spec.seed << (spec.ranges ? ", ranges" : "") << ")\n";
  const Workload workload = [&] {
    Progress progress("generating the rows");
    return make_workload(spec);
  }();
  SelectProblem problem = workload.host_problem();
  problem.largest = !args.smallest;
  problem.sorted = args.sorted;
  problem.deterministic = args.deterministic;

  std::cout << "running " << variant_name(variant) << " on " << device_name
            << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  SelectionRunner runner(problem, args.bench);
  RunResult result;
  Status run_status;
  {
    Progress progress("running " + variant_name(variant));
    run_status = runner.run(variant, &result);
  }
  if (Status s = run_status; !s) {
    std::cerr << "litetopk: error: " << s.to_string() << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  if (args.verify) {
    std::cout << "verifying against the CPU reference\n";
    std::vector<int32_t> reference;
    Status reference_status;
    {
      Progress progress("verifying against the CPU reference");
      reference_status = reference_topk(problem, problem.batch, &reference);
    }
    if (Status s = reference_status; !s) {
      std::cerr << "litetopk: error: reference: " << s.to_string() << '\n';
      return kExitFailure;
    }
    const std::string mismatch =
        compare_topk(problem, result.indices.data(), reference.data(), problem.batch);
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const std::string& requested = args.algo;
  const double ms = result.timing.median_ms;
  const double gbps = gigabytes_per_second(workload.bytes_read(), ms);
  const double rows_per_s = ms > 0 ? static_cast<double>(spec.batch) / (ms * 1e-3) : 0.0;
  Table table({"shape", "dtype", "algo", "ms", "min ms", "GB/s", "rows/s", "exact"}, 3);
  const auto timed = [&](const std::string& text) { return args.bench.enabled ? text : "-"; };
  table.add_row({shape, dtype_name(spec.dtype),
                 requested == result.algo ? requested : requested + " -> " + result.algo,
                 timed(fixed(ms, 4)), timed(fixed(result.timing.min_ms, 4)), timed(fixed(gbps, 1)),
                 timed(fixed(rows_per_s, 0)),
                 verified ? (*verified ? "yes" : "NO") : "not checked"});
  std::cout << '\n';
  table.print(std::cout);

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    const auto timed_json = [&](double value) { return args.bench.enabled ? Json(value) : Json(); };
    const Json record = {
        {"tool", "litetopk select"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"batch", spec.batch},
        {"n", spec.n},
        {"k", spec.k},
        {"dtype", dtype_name(spec.dtype)},
        {"largest", problem.largest},
        {"sorted", problem.sorted},
        {"deterministic", problem.deterministic},
        {"ranges", spec.ranges},
        {"pattern", args.pattern},
        {"seed", spec.seed},
        {"backend", variant.backend == Backend::kGpu ? "gpu" : "cpu"},
        {"device", device_name},
        {"algo_requested", requested},
        {"algo", result.algo},
        {"warmup", args.bench.warmup},
        {"iters", args.bench.iters},
        {"bytes_read", workload.bytes_read()},
        {"ms_median", timed_json(ms)},
        {"ms_min", timed_json(result.timing.min_ms)},
        {"gbps", timed_json(gbps)},
        {"rows_per_s", timed_json(rows_per_s)},
        {"verified", verified ? Json(*verified) : Json()},  // null: not checked
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return verified.value_or(true) ? kExitOk : kExitFailure;
}

}  // namespace

void add_select_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<SelectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "select", "Select the top k of generated rows (by default 64 x 131072, k 2048)");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--batch", args->batch, "Rows")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--n", args->n, "Row length")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--k", args->k, "Entries selected per row (above --n: -1 padded)")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Score type")
      ->check(one_of("fp32|bf16|fp16", is_dtype))
      ->capture_default_str();
  cmd->add_flag("--smallest", args->smallest, "Select the smallest values");
  cmd->add_flag("--sorted", args->sorted, "Best first, ties by ascending index");
  cmd->add_flag("--deterministic", args->deterministic, "Ties at the k-th value: smallest indices");
  cmd->add_flag("--ranges", args->ranges, "Random per-row ranges (every 8th row shorter than k)");
  cmd->add_option("--algo", args->algo,
                  "auto (the GPU's cost model, or the CPU's fast path on the CPU); GPU: radix, "
                  "sample-filter, grid-radix, sieve, cluster, register; CPU: cpu, cpu-reference")
      ->check(one_of("auto|radix|sample-filter|grid-radix|sieve|cluster|register|cpu|"
                     "cpu-reference",
                     is_variant))
      ->capture_default_str();
  add_device_option(cmd, &args->device);
  cmd->add_option("--pattern", args->pattern, "Row contents")
      ->check(one_of(pattern_choices(), is_pattern))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_flag("--verify", args->verify, "Compare with the CPU reference (all rows)");
  add_bench_options(cmd, &args->bench);
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, exit_code] {
    *exit_code = run_with_memory_check("select", host_buffers(*args),
                                       [&] { return run_select(*args); }, std::cerr);
  });
}

}  // namespace litetopk::tools
