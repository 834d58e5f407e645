// `litetopk dsa`: one DeepSeek sparse attention (DSA) layer end to end on a generated causal
// prefill chunk (testkit/dsa_workload.h): dsa_prefill (litetopk/dsa.h) picks each query's k
// tokens with the indexer and attends over them (dsa_runner.h). On the GPU each stage and the
// whole layer are timed (CUDA events, median); on the CPU the references run. The indices are checked against the
// CPU indexer and the attention's outputs against sparse_attention_cpu (testkit/dsa_verify.h);
// prints a table and optionally writes JSON.
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_options.h"
#include "commands.h"
#include "device_choice.h"
#include "dsa_runner.h"
#include "memory_plan.h"
#include "progress.h"
#include "litetopk/attention.h"
#include "litetopk/indexer.h"
#include "report.h"
#include "testkit/dsa_verify.h"
#include "testkit/dsa_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

// The shapes when --tokens and --context are not given: on the GPU issue 13's attention shape
// (s_q 4096, s_kv 128K); on the CPU one the references run and check in about two seconds on
// two cores (at the default k 2048).
constexpr int64_t kGpuTokens = 4096;
constexpr int64_t kGpuContext = 131072;
constexpr int64_t kCpuTokens = 16;
constexpr int64_t kCpuContext = 4096;
// Timed runs when --iters and --warmup are not given.
constexpr BenchOptions kGpuBench{true, 3, 20};
constexpr BenchOptions kCpuBench{true, 0, 1};

struct DsaArgs {
  int64_t tokens = 0;   // 0: the device's default
  int64_t context = 0;  // 0: the device's default
  int64_t heads = 16;
  int64_t indexer_heads = 64;
  int64_t topk = 2048;
  std::string algo = "auto";
  std::string indexer_algo = "auto";
  std::string device = "auto";
  int iters = kGpuBench.iters;
  int warmup = kGpuBench.warmup;
  bool iters_given = false;
  bool warmup_given = false;
  uint64_t seed = 42;
  std::string json_path;
};

std::string list(const std::vector<int64_t>& queries, std::size_t shown) {
  std::string text;
  for (std::size_t i = 0; i < queries.size() && i < shown; ++i) {
    text += (i ? " " : "") + std::to_string(queries[i]);
  }
  if (queries.size() > shown) text += " ...";
  return text;
}

std::string requested_label(const std::string& requested, const std::string& ran) {
  return requested == ran ? ran : requested + " -> " + ran;
}

// The host buffers of a run: the indexer's q and kv, the attention's q and kv, the indices and
// the outputs.
std::vector<HostBuffer> host_buffers(const DsaSpec& spec) {
  const double T = static_cast<double>(spec.T), S = static_cast<double>(spec.S);
  const double h_q = static_cast<double>(spec.h_q), d_qk = static_cast<double>(spec.d_qk);
  return {{"the indexer's q [--tokens x --indexer-heads x 128] fp8",
           T * static_cast<double>(spec.H) * static_cast<double>(spec.D)},
          {"the indexer's kv [--context x 128] fp8", S * (static_cast<double>(spec.D) + 4)},
          {"the attention's q [--tokens x --heads x 576] bf16", T * h_q * d_qk * 2},
          {"the attention's kv [--context x 576] bf16", S * d_qk * 2},
          {"the indices [--tokens x --topk] int32", T * static_cast<double>(spec.k) * 4},
          {"the outputs [--tokens x --heads x 512] bf16",
           T * h_q * static_cast<double>(spec.d_v) * 2}};
}

int run_dsa_spec(const DsaArgs& args, const DsaSpec& spec, const DsaRunOptions& options,
                 const GpuInfo& gpu);

int run_dsa_command(const DsaArgs& args) {
  // The device first: it picks the default shape and the timing.
  const DeviceChoice device = choose_device(args.device);
  const GpuInfo& gpu = device.gpu;
  const bool on_gpu = device.on_gpu;
  DsaRunOptions options;
  options.on_gpu = on_gpu;
  // Both names are validated by their options.
  parse_indexer_algo(args.indexer_algo.c_str(), &options.indexer_algo);
  parse_sparse_attention_algo(args.algo.c_str(), &options.attention_algo);
  for (const auto& [name, value] : {std::pair<std::string, std::string>{"--algo", args.algo},
                                    {"--indexer-algo", args.indexer_algo}}) {
    if (on_gpu || value == "auto") continue;
    if (args.device == "cpu") {
      throw CLI::ValidationError(name, name + ' ' + value +
                                           " picks a GPU kernel, but --device cpu runs the CPU "
                                           "references (drop " + name + ")");
    }
    std::cerr << "litetopk: error: " << name << ' ' << value
              << " needs a GPU: " << gpu.absent_reason
              << " (without " << name << " the CPU references run)\n";
    return kExitFailure;
  }
  const BenchOptions bench = on_gpu ? kGpuBench : kCpuBench;
  options.bench = bench;
  if (args.iters_given) options.bench.iters = args.iters;
  if (args.warmup_given) options.bench.warmup = args.warmup;

  DsaSpec spec;
  spec.T = args.tokens != 0 ? args.tokens : (on_gpu ? kGpuTokens : kCpuTokens);
  spec.S = args.context != 0 ? args.context : (on_gpu ? kGpuContext : kCpuContext);
  spec.h_q = args.heads;
  spec.H = args.indexer_heads;
  spec.k = args.topk;
  spec.seed = args.seed;
  if (spec.S < spec.T) {
    throw CLI::ValidationError(
        "--context", "--context (" + std::to_string(spec.S) +
                         ") must be >= --tokens (" + std::to_string(spec.T) +
                         "): the chunk's queries are the last --tokens of the --context tokens");
  }
  if (const std::string error = dsa_spec_error(spec); !error.empty()) {
    throw CLI::ValidationError("dsa", error);
  }
  if (const std::string error = dsa_run_error(spec, options); !error.empty()) {
    throw CLI::ValidationError("--algo", "--algo " + args.algo + ": " + error);
  }
  if (!device.error.empty()) {
    std::cerr << "litetopk: error: " << device.error << '\n';
    return kExitFailure;
  }
  if (!device.note.empty()) std::cout << device.note << '\n';
  return run_with_memory_check("dsa", host_buffers(spec), [&] {
    return run_dsa_spec(args, spec, options, gpu);
  }, std::cerr);
}

// Generates the layer, runs it, checks and reports (run_dsa_command chose the device).
int run_dsa_spec(const DsaArgs& args, const DsaSpec& spec, const DsaRunOptions& options,
                 const GpuInfo& gpu) {
  const bool on_gpu = options.on_gpu;
  const CpuInfo cpu = probe_cpu();
  const std::string device_name =
      on_gpu ? gpu.device.name
             : cpu.model + " (CPU, " + std::to_string(cpu.hardware_threads) + " threads)";

  std::cout << "generating a DSA layer: T=" << spec.T << " queries, the last of S=" << spec.S
            << " tokens (causal); indexer H=" << spec.H << " D=" << spec.D
            << " fp8, k=" << spec.k << "; attention h_q=" << spec.h_q << " d_qk=" << spec.d_qk
            << " d_v=" << spec.d_v << " bf16 (seed " << spec.seed << ")\n";
  const DsaWorkload workload = [&] {
    Progress progress("generating the layer's inputs");
    return make_dsa_workload(spec);
  }();
  if (on_gpu) {
    std::cout << "running dsa_prefill: indexer_topk (" << args.indexer_algo
              << ") then sparse_attention (" << args.algo << ") on " << device_name;
  } else {
    std::cout << "running dsa_prefill_cpu, the CPU references indexer_topk_cpu then "
                 "sparse_attention_cpu (fp64 scores and softmax; not GPU kernels) on "
              << device_name;
  }
  std::cout << ": each stage and the layer, median of " << options.bench.iters << " run"
            << (options.bench.iters == 1 ? "" : "s") << " after " << options.bench.warmup
            << (on_gpu ? " (CUDA events)" : " (wall clock)") << '\n';
  DsaRun run;
  Status run_status;
  {
    Progress progress(on_gpu ? "running the layer" : "running the CPU references");
    run_status = run_dsa_layer(workload, options, &run);
  }
  if (const Status status = run_status; !status) {
    std::cerr << "litetopk: error: dsa: " << status.to_string() << '\n';
    return kExitFailure;
  }

  const DsaChecker checker(workload);
  const auto& index_queries = checker.indexer_queries();
  const auto& attention_queries = checker.attention_queries();
  std::cout << "checking the layer's indices on " << index_queries.size() << " of " << spec.T
            << " queries (" << list(index_queries, 8) << ") against indexer_topk_cpu and its "
            << "attention on " << attention_queries.size() << " (" << list(attention_queries, 8)
            << ") against sparse_attention_cpu\n";
  std::string index_mismatch, attention_mismatch;
  {
    Progress progress("checking against the CPU references");
    index_mismatch = checker.check_indices(run.indices.data());
    attention_mismatch = checker.check_attention(run.indices.data(), run.out.data(),
                                                 run.max_logits.data(), run.lse.data());
  }
  if (!index_mismatch.empty()) {
    std::cerr << "litetopk: indexer check FAILED: " << index_mismatch << '\n';
  }
  if (!attention_mismatch.empty()) {
    std::cerr << "litetopk: attention check FAILED: " << attention_mismatch << '\n';
  }
  const bool passed = index_mismatch.empty() && attention_mismatch.empty();

  const double indexer_flops = workload.indexer_flops();
  const double attention_flops = workload.attention_flops();
  // The kv rows the attention gathers, one query at a time (a union-packed kernel reads fewer).
  const double gathered_bytes = static_cast<double>(dsa_attention_pairs(spec)) *
                                static_cast<double>(spec.d_qk) * 2.0;
  const double reuse = dsa_union_reuse(spec, run.indices.data());
  const auto tflops = [](double flops, double ms) {
    const double value = teraflops_per_second(flops, ms);
    return fixed(value, value < 10 ? 3 : 1);
  };
  const auto megabytes = [&](std::size_t bytes) {
    return on_gpu ? fixed(static_cast<double>(bytes) / 1e6, 1) : "-";
  };
  const auto verdict = [](const std::string& mismatch, std::size_t queries) {
    return (mismatch.empty() ? "yes (" : "NO (") + std::to_string(queries) + " queries)";
  };
  Table table({"stage", "algo", "ms", "min ms", "TFLOP/s", "GB/s", "aux MB", "checked"}, 2);
  table.add_row({"indexer_topk", requested_label(args.indexer_algo, run.indexer_algo),
                 fixed(run.indexer.median_ms, 3), fixed(run.indexer.min_ms, 3),
                 tflops(indexer_flops, run.indexer.median_ms), "-",
                 megabytes(run.indexer_workspace_bytes),
                 verdict(index_mismatch, index_queries.size())});
  table.add_row({"sparse_attention",
                 requested_label(args.algo, run.attention_algo),
                 fixed(run.attention.median_ms, 3), fixed(run.attention.min_ms, 3),
                 tflops(attention_flops, run.attention.median_ms),
                 fixed(gathered_bytes / (run.attention.median_ms * 1e6), 1),
                 megabytes(run.attention_workspace_bytes),
                 verdict(attention_mismatch, attention_queries.size())});
  table.add_row({"layer", "dsa_prefill", fixed(run.layer.median_ms, 3),
                 fixed(run.layer.min_ms, 3),
                 tflops(indexer_flops + attention_flops, run.layer.median_ms), "-",
                 megabytes(run.layer_workspace_bytes),
                 passed ? "yes" : "NO"});
  std::cout << '\n';
  table.print(std::cout);
  std::cout << "TFLOP/s: the indexer's scores (2 x scored pairs x H x D = "
            << scientific(indexer_flops, 2) << ") and both attention products (2 x attended "
            << "pairs x h_q x (d_qk + d_v) = " << scientific(attention_flops, 2)
            << "); GB/s: the kv rows the attention gathers, one query at a time ("
            << fixed(gathered_bytes / 1e6, 1) << " MB)";
  if (reuse > 0) {
    std::cout << "; union packing (" << dsa_union_group(spec) << " neighbouring queries): "
              << fixed(reuse, 3) << "x fewer kv rows on these indices";
  }
  std::cout << "\nchecked: indices within tolerance of the reference's k-th score ("
            << kIndexerTolRel << " relative), attention within bf16 tolerance (2^"
            << kDsaOutToleranceExponent << " (max |v| + |out|))\n";

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    const auto stage = [&](const Timing& timing, double flops, std::size_t workspace) {
      return Json{{"ms_median", timing.median_ms},
                  {"ms_min", timing.min_ms},
                  {"flops", flops},
                  {"tflops", teraflops_per_second(flops, timing.median_ms)},
                  {"workspace_bytes", on_gpu ? Json(workspace) : Json()}};
    };
    const Json record = {
        {"tool", "litetopk dsa"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"T", spec.T},
        {"S", spec.S},
        {"h_q", spec.h_q},
        {"d_qk", spec.d_qk},
        {"d_v", spec.d_v},
        {"H", spec.H},
        {"D", spec.D},
        {"k", spec.k},
        {"seed", spec.seed},
        {"backend", on_gpu ? "gpu" : "cpu"},
        {"device", device_name},
        {"indexer_algo_requested", args.indexer_algo},
        {"indexer_algo", run.indexer_algo},
        {"attention_algo_requested", args.algo},
        {"attention_algo", run.attention_algo},
        {"warmup", options.bench.warmup},
        {"iters", options.bench.iters},
        {"attended_pairs", dsa_attention_pairs(spec)},
        {"indexer", stage(run.indexer, indexer_flops, run.indexer_workspace_bytes)},
        {"attention", stage(run.attention, attention_flops, run.attention_workspace_bytes)},
        {"layer", stage(run.layer, indexer_flops + attention_flops, run.layer_workspace_bytes)},
        {"attention_gathered_bytes", gathered_bytes},
        {"union_group", dsa_union_group(spec)},
        {"union_reuse", reuse > 0 ? Json(reuse) : Json()},
        {"indexer_checked", index_mismatch.empty()},
        {"indexer_checked_queries", index_queries},
        {"indexer_tol_rel", kIndexerTolRel},
        {"attention_checked", attention_mismatch.empty()},
        {"attention_checked_queries", attention_queries},
        {"verified", passed},
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return passed ? kExitOk : kExitFailure;
}

}  // namespace

void add_dsa_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DsaArgs>();
  CLI::App* cmd = app.add_subcommand(
      "dsa",
      "A DSA attention layer end to end on a generated causal prefill chunk: dsa_prefill, "
      "indexer_topk (fp8 lightning indexer + exact top-k) then sparse_attention over its "
      "indices; each stage and the layer timed and checked against the CPU references");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--tokens", args->tokens,
                  "T: the chunk's queries, the last T of the --context tokens (default " +
                      std::to_string(kGpuTokens) + " on the GPU, " + std::to_string(kCpuTokens) +
                      " on the CPU)")
      ->check(integer_in(1, kMaxInt32));
  cmd->add_option("--context", args->context,
                  "S: tokens of the context, the chunk included; query t sees tokens [0, S - T + "
                  "t] (default " +
                      std::to_string(kGpuContext) + " on the GPU, " +
                      std::to_string(kCpuContext) + " on the CPU)")
      ->check(integer_in(1, kMaxInt32));
  cmd->add_option("--heads", args->heads, "h_q: MLA query heads (d_qk 576, d_v 512, one kv head)")
      ->check(CLI::IsMember({16, 32, 64, 128}))
      ->capture_default_str();
  cmd->add_option("--topk", args->topk, "k: tokens the indexer selects per query (1..8192)")
      ->check(integer_in(1, 8192))
      ->capture_default_str();
  cmd->add_option("--indexer-heads", args->indexer_heads, "H: the indexer's heads (D = 128)")
      ->check(CLI::IsMember({32, 64}))
      ->capture_default_str();
  cmd->add_option("--algo", args->algo,
                  "The attention's GPU kernel: auto (union-packed where it applies, else "
                  "per-query), per-query, union-packed (h_q 16 and 32), plain")
      ->check(CLI::IsMember({"auto", "per-query", "union-packed", "plain"}))
      ->capture_default_str();
  cmd->add_option("--indexer-algo", args->indexer_algo,
                  "The indexer's GPU path: auto (cost model), unfused (logits, then select), fused")
      ->check(CLI::IsMember({"auto", "unfused", "fused"}))
      ->capture_default_str();
  add_device_option(cmd, &args->device);
  CLI::Option* iters =
      cmd->add_option("--iters", args->iters,
                      "Timed runs of each stage and of the layer (the median; default " +
                          std::to_string(kGpuBench.iters) + " on the GPU, " +
                          std::to_string(kCpuBench.iters) + " on the CPU)")
          ->check(integer_in(1, 1000000));
  CLI::Option* warmup =
      cmd->add_option("--warmup", args->warmup,
                      "Untimed runs first (default " + std::to_string(kGpuBench.warmup) +
                          " on the GPU, " + std::to_string(kCpuBench.warmup) + " on the CPU)")
          ->check(integer_in(0, 1000000));
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, iters, warmup, exit_code] {
    args->iters_given = iters->count() > 0;
    args->warmup_given = warmup->count() > 0;
    *exit_code = run_dsa_command(*args);
  });
}

}  // namespace litetopk::tools
