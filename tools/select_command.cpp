// `litetopk select`: generate rows, select their top k with one backend, optionally verify against
// the CPU reference and benchmark; print a table and optionally write a JSON record.
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "environment.h"
#include "report.h"
#include "select_runner.h"
#include "testkit/select_verify.h"
#include "testkit/select_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

struct SelectArgs {
  int64_t batch = 0;
  int64_t n = 0;
  int64_t k = 0;
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

// A validator that accepts what `parses` accepts.
CLI::Validator one_of(const std::string& choices, bool (*parses)(const std::string&)) {
  return CLI::Validator(
      [choices, parses](std::string& value) {
        return parses(value) ? std::string() : "must be one of " + choices + ", got " + value;
      },
      choices);
}

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

// --algo on the backend --device names; device auto runs on the GPU when there is one.
Variant resolve_variant(const SelectArgs& args, const GpuInfo& gpu) {
  Variant variant;
  parse_variant(args.algo, &variant);  // validated by the option
  const bool gpu_algo = variant.backend == Backend::kGpu;
  if (args.device == "cpu" && gpu_algo) {
    if (variant.gpu_algo != SelectAlgo::kAuto) {
      throw CLI::ValidationError("--algo", args.algo +
                                               " runs on the GPU; --device cpu takes cpu, "
                                               "cpu-reference or auto");
    }
    variant.backend = Backend::kCpu;
  } else if (args.device == "gpu" && !gpu_algo) {
    throw CLI::ValidationError("--algo", args.algo +
                                             " runs on the CPU; --device gpu takes auto, "
                                             "radix, sample-filter or grid-radix");
  } else if (args.device == "auto" && gpu_algo && variant.gpu_algo == SelectAlgo::kAuto &&
             !gpu.available) {
    variant.backend = Backend::kCpu;
  }
  return variant;
}

int run_select(const SelectArgs& args) {
  const GpuInfo gpu = probe_gpu();
  const Variant variant = resolve_variant(args, gpu);
  if (variant.backend == Backend::kGpu && !gpu.available) {
    std::cerr << "litetopk: error: --algo " << args.algo << " needs a GPU: " << gpu.absent_reason
              << '\n';
    return kExitFailure;
  }
  const std::string device_name =
      variant.backend == Backend::kGpu ? gpu.device.name : probe_cpu().model + " (CPU)";

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
  const Workload workload = make_workload(spec);
  SelectProblem problem = workload.host_problem();
  problem.largest = !args.smallest;
  problem.sorted = args.sorted;
  problem.deterministic = args.deterministic;

  std::cout << "running " << variant_name(variant) << " on " << device_name
            << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  SelectionRunner runner(problem, args.bench);
  RunResult result;
  if (Status s = runner.run(variant, &result); !s) {
    std::cerr << "litetopk: error: " << s.to_string() << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  if (args.verify) {
    std::cout << "verifying against the CPU reference\n";
    std::vector<int32_t> reference;
    if (Status s = reference_topk(problem, problem.batch, &reference); !s) {
      std::cerr << "litetopk: error: reference: " << s.to_string() << '\n';
      return kExitFailure;
    }
    const std::string mismatch =
        compare_topk(problem, result.indices.data(), reference.data(), problem.batch);
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const std::string requested = variant_name(variant);
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
  CLI::App* cmd = app.add_subcommand("select", "Select the top k of generated rows");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--batch", args->batch, "Rows")
      ->required()
      ->check(CLI::Range(int64_t{1}, kMaxInt32));
  cmd->add_option("--n", args->n, "Row length")
      ->required()
      ->check(CLI::Range(int64_t{1}, kMaxInt32));
  cmd->add_option("--k", args->k, "Entries selected per row")
      ->required()
      ->check(CLI::Range(int64_t{1}, kMaxInt32));
  cmd->add_option("--dtype", args->dtype, "Score type")
      ->check(one_of("fp32|bf16|fp16", is_dtype))
      ->capture_default_str();
  cmd->add_flag("--smallest", args->smallest, "Select the smallest values");
  cmd->add_flag("--sorted", args->sorted, "Best first, ties by ascending index");
  cmd->add_flag("--deterministic", args->deterministic, "Ties at the k-th value: smallest indices");
  cmd->add_flag("--ranges", args->ranges, "Random per-row ranges (every 8th row shorter than k)");
  cmd->add_option("--algo", args->algo,
                  "GPU: auto (cost model), radix, sample-filter; CPU: cpu, cpu-reference")
      ->check(one_of("auto|radix|sample-filter|cpu|cpu-reference", is_variant))
      ->capture_default_str();
  cmd->add_option("--device", args->device, "Backend (auto: the GPU when present)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--pattern", args->pattern, "Row contents")
      ->check(one_of(pattern_choices(), is_pattern))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_flag("--verify", args->verify, "Compare with the CPU reference (all rows)");
  add_bench_options(cmd, &args->bench);
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, exit_code] { *exit_code = run_select(*args); });
}

}  // namespace litetopk::tools
