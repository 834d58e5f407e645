// `litetopk indexer --paged`: generate a paged decode batch (B requests with next_n query tokens
// each over a paged fp8 cache in DeepGEMM's fp8_paged_mqa_logits layout), run indexer_topk_paged
// with one algorithm or the CPU reference, optionally verify the first, middle and last requests
// against the CPU reference and benchmark (with the logits alone for comparison); print a table
// and optionally write JSON.
#include "paged_indexer_command.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "device_choice.h"
#include "memory_plan.h"
#include "progress.h"
#include "litetopk/indexer.h"
#include "paged_indexer_runner.h"
#include "report.h"
#include "testkit/paged_indexer_verify.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// The lengths of a comma-separated --contexts list; throws CLI::ValidationError.
std::vector<int32_t> parse_context_list(const std::string& text) {
  std::vector<int32_t> lens;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 0 || value > kMaxInt32) {
      throw CLI::ValidationError("--contexts", "expected fixed, ragged or a comma-separated list "
                                               "of lengths in [0, 2^31 - 1], got item '" +
                                                   item + "' in '" + text + "'");
    }
    lens.push_back(static_cast<int32_t>(value));
  }
  if (lens.empty() || text.back() == ',') {
    throw CLI::ValidationError("--contexts", "an empty length in '" + text + "'");
  }
  return lens;
}

// The per-request context lengths the options ask for (fixed and ragged: --batch and --context,
// else the device's defaults); throws CLI::ValidationError.
std::vector<int32_t> context_lens_of(const PagedIndexerArgs& args, bool on_cpu) {
  if (args.contexts == "fixed" || args.contexts == "ragged") {
    const int64_t batch = args.batch != 0 ? args.batch : on_cpu ? kPagedCpuBatch : kPagedGpuBatch;
    const int64_t context =
        args.context != 0 ? args.context : on_cpu ? kPagedCpuContext : kPagedGpuContext;
    return args.contexts == "fixed" ? fixed_context_lens(batch, context)
                                    : ragged_context_lens(batch, context, args.k, args.seed);
  }
  std::vector<int32_t> lens = parse_context_list(args.contexts);
  if (args.batch != 0 && args.batch != static_cast<int64_t>(lens.size())) {
    throw CLI::ValidationError("--batch", "--batch " + std::to_string(args.batch) + " but --contexts lists " +
                                              std::to_string(lens.size()) + " lengths");
  }
  if (args.context != 0) {
    throw CLI::ValidationError("--context", "a list of --contexts sets every length; drop --context");
  }
  return lens;
}

std::string contexts_label(const PagedIndexerArgs& args) {
  return args.contexts == "fixed" || args.contexts == "ragged" ? args.contexts : "list";
}

// The host buffers of a run of `batch` requests of `tokens` tokens in all: q, the paged cache,
// the weights and the indices.
std::vector<HostBuffer> host_buffers(const PagedIndexerArgs& args, double batch, double tokens) {
  const double rows = batch * static_cast<double>(args.next_n);
  const double H = static_cast<double>(args.H), D = static_cast<double>(PagedIndexerSpec{}.D);
  return {{"the paged cache [--batch x --context tokens x (D + 4)] uint8", tokens * (D + 4)},
          {"q [--batch x --next-n x --H x D] fp8", rows * H * D},
          {"the weights [--batch x --next-n x --H] fp32", rows * H * 4},
          {"the indices [--batch x --next-n x --k] int32", rows * static_cast<double>(args.k) * 4}};
}

// host_buffers for the options: --batch x --context tokens at most (or the device's defaults),
// or the lengths of a --contexts list.
std::vector<HostBuffer> host_buffers(const PagedIndexerArgs& args, bool on_cpu) {
  if (args.contexts == "fixed" || args.contexts == "ragged") {
    const int64_t batch = args.batch != 0 ? args.batch : on_cpu ? kPagedCpuBatch : kPagedGpuBatch;
    const int64_t context =
        args.context != 0 ? args.context : on_cpu ? kPagedCpuContext : kPagedGpuContext;
    return host_buffers(args, static_cast<double>(batch),
                        static_cast<double>(batch) * static_cast<double>(context));
  }
  const std::vector<int32_t> lens = parse_context_list(args.contexts);
  double tokens = 0;
  for (int32_t len : lens) tokens += static_cast<double>(len);
  return host_buffers(args, static_cast<double>(lens.size()), tokens);
}

int run_paged_indexer_spec(const PagedIndexerArgs& args, const PagedIndexerSpec& spec,
                           const PagedIndexerRunOptions& options, const std::string& device_name);

}  // namespace

int run_paged_indexer_command(const PagedIndexerArgs& args) {
  const bool cpu_algo = args.algo == "cpu";
  const AlgoPlace place = cpu_algo ? AlgoPlace::kCpu
                          : args.algo == "auto" ? AlgoPlace::kEither
                                                : AlgoPlace::kGpu;
  const DeviceChoice device = choose_device(args.device, "--algo", args.algo, place);
  if (!device.error.empty()) {
    std::cerr << "litetopk: error: " << device.error << '\n';
    return kExitFailure;
  }
  const bool on_cpu = !device.on_gpu;
  const std::string& device_name = device.device_name;
  return run_with_memory_check("indexer --paged", host_buffers(args, on_cpu), [&] {
    PagedIndexerSpec spec;
    spec.context_lens = context_lens_of(args, on_cpu);
    spec.next_n = args.next_n;
    spec.H = args.H;
    spec.k = args.k;
    spec.max_context = args.max_context;
    spec.seed = args.seed;
    if (const std::string error = paged_indexer_spec_error(spec); !error.empty()) {
      throw CLI::ValidationError("indexer --paged", error);
    }
    if (!device.note.empty()) std::cout << device.note << '\n';
    PagedIndexerRunOptions options;
    options.on_cpu = on_cpu;
    if (!cpu_algo) parse_indexer_algo(args.algo.c_str(), &options.algo);  // validated
    options.bench = args.bench;
    options.time_logits = args.bench.enabled;
    return run_paged_indexer_spec(args, spec, options, device_name);
  }, std::cerr);
}

namespace {

// Generates the batch, runs it, verifies and reports (run_paged_indexer_command chose the
// device).
int run_paged_indexer_spec(const PagedIndexerArgs& args, const PagedIndexerSpec& spec,
                           const PagedIndexerRunOptions& options, const std::string& device_name) {
  const bool on_cpu = options.on_cpu;
  const std::string shape = paged_indexer_shape_label(spec);
  std::cout << "generating " << shape << " D=" << spec.D << " paged fp8 cache ("
            << args.contexts.substr(0, 40) << (args.contexts.size() > 40 ? "..." : "")
            << " contexts, block size " << spec.block_size << ", seed " << spec.seed << ")\n";
  const PagedIndexerWorkload workload = [&] {
    Progress progress("generating the inputs");
    return make_paged_indexer_workload(spec);
  }();

  if (on_cpu) {
    std::cout << "running the CPU reference (indexer_topk_paged_cpu: fp64 scores, exact "
                 "selection; not a GPU kernel) on "
              << device_name << (args.bench.enabled ? " (benchmark)" : "") << '\n';
    if (args.bench.graphs) std::cout << "--graphs: the CPU reference is timed as plain calls\n";
  } else {
    std::cout << "running " << args.algo << " on " << device_name
              << (args.bench.enabled
                      ? (args.bench.graphs ? " (benchmark: CUDA graph replays)" : " (benchmark)")
                      : "")
              << '\n';
  }
  PagedIndexerRun run;
  Status run_status;
  {
    Progress progress(on_cpu ? "running the CPU reference" : "running " + args.algo);
    run_status = run_paged_indexer(workload, options, &run);
  }
  if (const Status status = run_status; !status) {
    std::cerr << "litetopk: error: indexer --paged " << args.algo << ": " << status.to_string()
              << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  std::vector<int64_t> checked;
  if (args.verify) {
    checked = paged_indexer_verify_requests(workload.batch);
    std::cout << "verifying requests";
    for (int64_t b : checked) std::cout << ' ' << b;
    std::cout << " (all " << spec.next_n << " queries of each) against the CPU reference\n";
    Progress progress("verifying");
    const PagedIndexerChecker checker(workload, checked, args.tol_rel);
    const std::string mismatch = checker.check(run.indices.data());
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const bool timed = args.bench.enabled;
  const double ms = run.timing.median_ms;
  const double tflops = teraflops_per_second(workload.flops(), ms);
  const double bytes = paged_indexer_bytes_read(workload);
  const double gbps = bytes / (ms * 1e6);
  const double logits_ms = run.logits_timing.median_ms;
  const auto when_timed = [&](const std::string& text) { return timed ? text : "-"; };
  const std::string algo_label =
      on_cpu ? "cpu (reference)"
             : (args.algo == run.algo ? run.algo : args.algo + " -> " + run.algo);
  Table table({"shape", "contexts", "algo", "ms", "min ms", "logits ms", "TFLOP/s", "% FP8 peak",
               "GB/s", "aux MB", "exact"},
              3);
  table.add_row({shape, contexts_label(args), algo_label, when_timed(fixed(ms, 3)),
                 when_timed(fixed(run.timing.min_ms, 3)),
                 run.logits_timed ? fixed(logits_ms, 3) : "-",
                 when_timed(fixed(tflops, tflops < 10 ? 3 : 1)),
                 when_timed(on_cpu ? "-" : fixed(100.0 * tflops / kFp8PeakTflops, 1)),
                 when_timed(fixed(gbps, 1)),
                 on_cpu ? "-" : fixed(static_cast<double>(run.workspace_bytes) / 1e6, 1),
                 verified ? (*verified ? "yes" : "NO") : "not checked"});
  std::cout << '\n';
  table.print(std::cout);
  if (timed) {
    std::cout << "logits ms: " << (on_cpu ? "indexer_logits_paged_cpu" : "indexer_logits_paged")
              << " alone into [B*next_n, max_context] fp32 (the unfused path's first half); "
                 "GB/s: the keys and scales of each request's context read once, plus q and "
                 "the weights ("
              << fixed(bytes / 1e6, 1) << " MB)\n";
  }

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    const auto timed_json = [&](double value) { return timed ? Json(value) : Json(); };
    const auto logits_json = [&](double value) { return run.logits_timed ? Json(value) : Json(); };
    const Json record = {
        {"tool", "litetopk indexer --paged"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"batch", workload.batch},
        {"next_n", spec.next_n},
        {"H", spec.H},
        {"D", spec.D},
        {"k", spec.k},
        {"block_size", spec.block_size},
        {"contexts", contexts_label(args)},
        {"context_lens", workload.context_lens},
        {"max_context", workload.max_context},
        {"seed", spec.seed},
        {"backend", on_cpu ? "cpu" : "gpu"},
        {"device", device_name},
        {"algo_requested", args.algo},
        {"algo", run.algo},
        {"warmup", args.bench.warmup},
        {"iters", args.bench.iters},
        {"graphs", !on_cpu && args.bench.enabled && args.bench.graphs},
        {"valid_pairs", workload.valid_pairs()},
        {"flops", workload.flops()},
        {"bytes_read", bytes},
        {"ms_median", timed_json(ms)},
        {"ms_min", timed_json(run.timing.min_ms)},
        {"logits_ms_median", logits_json(logits_ms)},
        {"logits_ms_min", logits_json(run.logits_timing.min_ms)},
        {"tflops", timed_json(tflops)},
        {"pct_fp8_peak", timed && !on_cpu ? Json(100.0 * tflops / kFp8PeakTflops) : Json()},
        {"fp8_peak_tflops", kFp8PeakTflops},
        {"gbps", timed_json(gbps)},
        {"workspace_bytes", on_cpu ? Json() : Json(run.workspace_bytes)},
        {"verified", verified ? Json(*verified) : Json()},  // null: not checked
        {"verified_requests", checked},
        {"tol_rel", args.tol_rel},
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return verified.value_or(true) ? kExitOk : kExitFailure;
}

}  // namespace

}  // namespace litetopk::tools
