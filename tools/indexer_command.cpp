// `litetopk indexer`: generate DSA lightning-indexer inputs (fp8 q and kv, kv scales, head
// weights, per-query key ranges), run indexer_topk with one algorithm, optionally verify a few
// queries against the CPU reference and benchmark; print a table and optionally write JSON.
// With --paged, the decode-phase indexer instead (paged_indexer_command.cpp).
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_options.h"
#include "commands.h"
#include "device_choice.h"
#include "memory_plan.h"
#include "progress.h"
#include "indexer_runner.h"
#include "paged_indexer_command.h"
#include "testkit/indexer_verify.h"
#include "testkit/indexer_workload.h"
#include "litetopk/indexer.h"
#include "report.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

// The chunk when --T and --S are not given: on the GPU the demo's (T 2048 of S 32768), on the
// CPU one the reference runs and checks in well under a second on two cores.
constexpr int64_t kGpuT = 2048;
constexpr int64_t kGpuS = 32768;
constexpr int64_t kCpuT = 128;
constexpr int64_t kCpuS = 8192;

struct IndexerArgs {
  int64_t T = 0;  // 0: the device's default
  int64_t S = 0;  // 0: the device's default
  int64_t H = 64;
  int64_t k = 2048;
  std::string ranges = "causal";
  std::string algo = "auto";
  std::string device = "auto";
  int64_t candidate_capacity = 0;
  bool state = false;
  bool no_cold_sample = false;
  uint64_t seed = 42;
  bool verify = false;
  double tol_rel = kIndexerTolRel;
  BenchOptions bench;
  std::string json_path;
  bool paged = false;  // --paged: paged_indexer_command.cpp runs it
};

// Generates the chunk, runs it, verifies and reports (run_indexer chose the device).
int run_indexer_spec(const IndexerArgs& args, const IndexerSpec& spec,
                     const IndexerRunOptions& options, const std::string& device_name) {
  const std::string shape = indexer_shape_label(spec);
  const bool on_cpu = options.on_cpu;
  std::cout << "generating " << shape << " D=" << spec.D << " fp8 inputs ("
            << indexer_ranges_name(spec.ranges) << " ranges, seed " << spec.seed << ")\n";
  const IndexerWorkload workload = [&] {
    Progress progress("generating the inputs");
    return make_indexer_workload(spec);
  }();

  const std::string ran = on_cpu ? "cpu" : args.algo;
  std::cout << "running " << (on_cpu ? "the CPU reference (indexer_topk_cpu)" : args.algo)
            << " on " << device_name << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  IndexerRun run;
  Status run_status;
  {
    Progress progress("running " + ran);
    run_status = run_indexer(workload, options, &run);
  }
  if (const Status status = run_status; !status) {
    std::cerr << "litetopk: error: indexer " << args.algo << ": " << status.to_string() << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  std::vector<int64_t> checked;
  if (args.verify) {
    checked = indexer_verify_queries(spec.T);
    std::cout << "verifying queries";
    for (int64_t t : checked) std::cout << ' ' << t;
    std::cout << " against the CPU reference\n";
    Progress progress("verifying");
    const IndexerChecker checker(workload, checked, args.tol_rel);
    std::string mismatch = checker.check(run.indices.data());
    if (mismatch.empty() && !run.warm_indices.empty()) {
      mismatch = checker.check(run.warm_indices.data());
      if (!mismatch.empty()) mismatch = "with a warm state: " + mismatch;
    }
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const double ms = run.timing.median_ms;
  const double tflops = teraflops_per_second(workload.flops(), ms);
  const double logits_bytes = static_cast<double>(spec.T) * static_cast<double>(spec.S) * 4.0;
  const double aux_ratio = static_cast<double>(run.workspace_bytes) / logits_bytes;
  const bool timed = args.bench.enabled;
  const auto when_timed = [&](const std::string& text) { return timed ? text : "-"; };
  const std::string algo_label = args.algo == run.algo ? run.algo : args.algo + " -> " + run.algo;
  const bool counted = run.candidates_per_query >= 0;
  Table table({"shape", "ranges", "algo", "ms", "min ms", "TFLOP/s", "% FP8 peak", "aux MB",
               "aux / T*S*4", "cand/query", "exact"},
              3);
  table.add_row({shape, indexer_ranges_name(spec.ranges), algo_label, when_timed(fixed(ms, 3)),
                 when_timed(fixed(run.timing.min_ms, 3)),
                 when_timed(fixed(tflops, tflops < 10 ? 3 : 1)),
                 when_timed(on_cpu ? "-" : fixed(100.0 * tflops / kFp8PeakTflops, 1)),
                 on_cpu ? "-" : fixed(static_cast<double>(run.workspace_bytes) / 1e6, 1),
                 on_cpu ? "-" : fixed(aux_ratio, 4),
                 counted ? fixed(run.candidates_per_query, 0) : "-",
                 verified ? (*verified ? "yes" : "NO") : "not checked"});
  std::cout << '\n';
  table.print(std::cout);
  if (counted) {
    std::cout << "fused: " << fixed(run.reductions_per_query, 2)
              << " list reductions per query, " << run.retried_blocks
              << " query blocks re-run after a failed speculative gate\n";
  }

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    const auto timed_json = [&](double value) { return timed ? Json(value) : Json(); };
    const Json record = {
        {"tool", "litetopk indexer"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"T", spec.T},
        {"S", spec.S},
        {"H", spec.H},
        {"D", spec.D},
        {"k", spec.k},
        {"ranges", indexer_ranges_name(spec.ranges)},
        {"seed", spec.seed},
        {"backend", on_cpu ? "cpu" : "gpu"},
        {"device", device_name},
        {"algo_requested", args.algo},
        {"algo", run.algo},
        {"candidate_capacity", args.candidate_capacity},
        {"state", args.state},
        {"cold_sample", run.algo == "fused" ? Json(!args.no_cold_sample) : Json()},
        {"state_bytes", run.state_bytes},
        {"warmup", args.bench.warmup},
        {"iters", args.bench.iters},
        {"valid_pairs", workload.valid_pairs()},
        {"flops", workload.flops()},
        {"ms_median", timed_json(ms)},
        {"ms_min", timed_json(run.timing.min_ms)},
        {"tflops", timed_json(tflops)},
        {"pct_fp8_peak", timed && !on_cpu ? Json(100.0 * tflops / kFp8PeakTflops) : Json()},
        {"fp8_peak_tflops", kFp8PeakTflops},
        {"workspace_bytes", on_cpu ? Json() : Json(run.workspace_bytes)},
        {"workspace_vs_logits", on_cpu ? Json() : Json(aux_ratio)},
        {"candidates_per_query", counted ? Json(run.candidates_per_query) : Json()},
        {"reductions_per_query", counted ? Json(run.reductions_per_query) : Json()},
        {"retried_query_blocks", counted ? Json(run.retried_blocks) : Json()},
        {"verified", verified ? Json(*verified) : Json()},  // null: not checked
        {"verified_queries", checked},
        {"tol_rel", args.tol_rel},
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return verified.value_or(true) ? kExitOk : kExitFailure;
}


// The host buffers of a run: q, kv, the weights and scales, the indices (twice with --state).
std::vector<HostBuffer> host_buffers(const IndexerSpec& spec, bool state) {
  const double T = static_cast<double>(spec.T), S = static_cast<double>(spec.S);
  const double H = static_cast<double>(spec.H), D = static_cast<double>(spec.D);
  const double k = static_cast<double>(spec.k);
  return {{"q [--T x --H x D] fp8", T * H * D},
          {"kv [--S x D] fp8 and its scales", S * (D + 4)},
          {"the weights [--T x --H] fp32", T * H * 4},
          {"the indices [--T x --k] int32" + std::string(state ? ", twice (--state)" : ""),
           T * k * 4 * (state ? 2 : 1)}};
}

int run_indexer(const IndexerArgs& args) {
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
  IndexerSpec spec;
  spec.T = args.T != 0 ? args.T : (on_cpu ? kCpuT : kGpuT);
  spec.S = args.S != 0 ? args.S : (on_cpu ? kCpuS : kGpuS);
  spec.H = args.H;
  spec.k = args.k;
  spec.seed = args.seed;
  parse_indexer_ranges(args.ranges, &spec.ranges);  // validated by the option
  if (const std::string error = indexer_spec_error(spec); !error.empty()) {
    throw CLI::ValidationError("indexer", error);
  }
  if (on_cpu && args.state) {
    throw CLI::ValidationError("--state", "--state carries the GPU kernel's IndexerState; it "
                                          "needs the GPU (this run is on the CPU)");
  }
  if (!device.note.empty()) std::cout << device.note << '\n';
  IndexerRunOptions options;
  options.on_cpu = on_cpu;
  if (!cpu_algo) parse_indexer_algo(args.algo.c_str(), &options.algo);  // validated
  options.candidate_capacity = args.candidate_capacity;
  options.state = args.state;
  options.cold_sample = !args.no_cold_sample;
  options.bench = args.bench;
  const std::string& device_name = device.device_name;
  return run_with_memory_check("indexer", host_buffers(spec, args.state),
                               [&] { return run_indexer_spec(args, spec, options, device_name); },
                               std::cerr);
}
}  // namespace

void add_indexer_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<IndexerArgs>();
  auto paged = std::make_shared<PagedIndexerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "indexer",
      "DSA lightning indexer + top-k on generated fp8 inputs (D = 128): a causal prefill chunk "
      "(--T, --S) or, with --paged, a decode batch over a paged cache (--batch, --context)");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  CLI::Option* paged_flag = cmd->add_flag(
      "--paged", args->paged,
      "The decode-phase indexer (indexer_topk_paged): B requests with next_n query tokens each "
      "over a paged fp8 cache (DeepGEMM's fp8_paged_mqa_logits layout, 64-token blocks)");
  // The prefill chunk.
  const std::vector<CLI::Option*> prefill_only = {
      cmd->add_option("--T", args->T,
                      "Queries of the prefill chunk (default " + std::to_string(kGpuT) +
                          " on the GPU, " + std::to_string(kCpuT) + " on the CPU)")
          ->check(integer_in(1, kMaxInt32)),
      cmd->add_option("--S", args->S,
                      "Keys, the context (default " + std::to_string(kGpuS) + " on the GPU, " +
                          std::to_string(kCpuS) + " on the CPU)")
          ->check(integer_in(1, kMaxInt32)),
      cmd->add_option("--ranges", args->ranges,
                      "causal: the queries are the last T of S tokens; full: every key; ragged: "
                      "random ranges, some shorter than k or empty")
          ->check(CLI::IsMember({"causal", "full", "ragged"}))
          ->capture_default_str(),
      cmd->add_option("--candidate-capacity", args->candidate_capacity,
                      "Fused kernel's candidate slots per query (0: the default)")
          ->check(integer_in(0, std::numeric_limits<int64_t>::max()))
          ->capture_default_str(),
      cmd->add_flag("--state", args->state,
                    "Carry an IndexerState across runs: the first run starts cold, later ones "
                    "reuse the hot sample of the previous run over the same chunk (optimistic)"),
      cmd->add_flag("--no-cold-sample", args->no_cold_sample,
                    "Fused: no speculative cold sample (IndexerOptions::cold_sample = false)"),
  };
  for (CLI::Option* option : prefill_only) option->excludes(paged_flag);
  // The paged decode batch.
  const std::vector<CLI::Option*> paged_only = {
      cmd->add_option("--batch", paged->batch,
                      "--paged: requests B (default " + std::to_string(kPagedGpuBatch) +
                          " on the GPU, " + std::to_string(kPagedCpuBatch) + " on the CPU)")
          ->check(integer_in(1, kMaxInt32)),
      cmd->add_option("--context", paged->context,
                      "--paged: each request's context in tokens (the longest with --contexts "
                      "ragged; default " +
                          std::to_string(kPagedGpuContext) + " on the GPU, " +
                          std::to_string(kPagedCpuContext) + " on the CPU)")
          ->check(integer_in(1, kMaxInt32)),
      cmd->add_option("--contexts", paged->contexts,
                      "--paged: fixed (every request --context tokens), ragged (request 0 "
                      "--context, others random, some shorter than k or empty) or a "
                      "comma-separated list of lengths (one per request)")
          ->capture_default_str(),
      cmd->add_option("--next-n", paged->next_n,
                      "--paged: query tokens per request (multi-token prediction)")
          ->check(integer_in(1, 4))
          ->capture_default_str(),
      cmd->add_option("--max-context", paged->max_context,
                      "--paged: the largest context the call is sized for (workspace, "
                      "block-table rows); 0: the longest context")
          ->check(integer_in(0, kMaxInt32))
          ->capture_default_str(),
      cmd->add_flag("--graphs", paged->graphs,
                    "--paged --bench on the GPU: time replays of one captured CUDA graph per "
                    "path (as engines run decode steps) instead of eager calls"),
  };
  for (CLI::Option* option : paged_only) option->needs(paged_flag);
  // Both.
  cmd->add_option("--H", args->H, "Heads")->check(CLI::IsMember({32, 64}))->capture_default_str();
  cmd->add_option("--k", args->k, "Keys selected per query (1..8192)")
      ->check(integer_in(1, 8192))
      ->capture_default_str();
  cmd->add_option("--algo", args->algo,
                  "auto (the GPU's cost model, or the CPU reference on the CPU); GPU: unfused "
                  "(logits, then select), fused; cpu: the CPU reference")
      ->check(CLI::IsMember({"auto", "unfused", "fused", "cpu"}))
      ->capture_default_str();
  add_device_option(cmd, &args->device);
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_flag("--verify", args->verify,
                "Check the first, middle and last queries (up to 7; --paged: the first, middle "
                "and last requests) against the CPU reference");
  cmd->add_option("--tol-rel", args->tol_rel,
                  "Relative score tolerance of --verify (see indexer_verify.cpp)")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  add_bench_options(cmd, &args->bench);
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, paged, exit_code] {
    if (!args->paged) {
      *exit_code = run_indexer(*args);
      return;
    }
    PagedIndexerArgs run = *paged;
    run.H = args->H;
    run.k = args->k;
    run.algo = args->algo;
    run.device = args->device;
    run.seed = args->seed;
    run.verify = args->verify;
    run.tol_rel = args->tol_rel;
    run.bench = args->bench;
    run.bench.graphs = paged->graphs;
    run.json_path = args->json_path;
    *exit_code = run_paged_indexer_command(run);
  });
}

}  // namespace litetopk::tools
