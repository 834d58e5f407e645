// `litetopk decode`: sparse decoding (docs/sparse_decode.md) on a generated workload: build the
// sparse cache, run the sparse decode at each delta and the dense decode, judge them against fp64
// dense attention, and print the delta trade-off table (optionally time the runs and write JSON).
// The GPU kernels run when there is a GPU (--device auto or gpu), else the CPU references.
#include <cmath>
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
#include "decode_runner.h"
#include "device_choice.h"
#include "memory_plan.h"
#include "progress.h"
#include "report.h"

namespace litetopk::tools {

namespace {

struct DecodeArgs {
  DecodeSpec spec;
  std::string dtype = "fp16";
  std::string pattern = "synthetic";
  std::vector<std::string> deltas{"3", "5", "7", "9"};  // or "m<mass target>"
  std::string device = "auto";
  BenchOptions bench;
  std::string json_path;
};

std::string megabytes(std::size_t bytes) {
  return fixed(static_cast<double>(bytes) / 1e6, 1) + " MB";
}

// The spec and deltas from the options; throws CLI::ValidationError on bad values.
DecodeSpec parse_spec(const DecodeArgs& args, std::vector<DecodeSelection>* deltas) {
  DecodeSpec spec = args.spec;
  parse_dtype(args.dtype.c_str(), &spec.dtype);            // validated by the option
  parse_decode_pattern(args.pattern, &spec.pattern);       // validated by the option
  if (const std::string error = decode_spec_error(spec); !error.empty()) {
    throw CLI::ValidationError("decode", error);
  }
  deltas->clear();
  for (const std::string& text : args.deltas) {
    DecodeSelection selection;
    if (!parse_selection(text, &selection)) {
      throw CLI::ValidationError("--deltas",
                                 "each entry must be a delta (a number >= 0 or inf) or m and a "
                                 "mass target in [0, 1), got '" + text + "'");
    }
    deltas->push_back(selection);
  }
  if (deltas->empty()) throw CLI::ValidationError("--deltas", "give at least one delta");
  return spec;
}

// The host buffers of a run: the dense keys and values (the cache dtype, and the fp32 copies the
// references and the rebuild use) and the sparse cache.
std::vector<HostBuffer> host_buffers(const DecodeArgs& args) {
  const DecodeSpec& spec = args.spec;
  const double slots = static_cast<double>(spec.batch) * static_cast<double>(spec.num_kv_heads) *
                       static_cast<double>(spec.context) *
                       static_cast<double>(kSparseDecodeHeadDim);
  return {{"the keys and values [--batch x --kv-heads x --context x 128] " + args.dtype,
           slots * 2 * 2},
          {"their fp32 copies [--batch x --kv-heads x --context x 128]", slots * 4 * 2},
          {"the sparse cache [--batch x --kv-heads x --context x 128]", slots * 2}};
}

nlohmann::ordered_json row_json(const DecodeRow& row, bool on_gpu) {
  using Json = nlohmann::ordered_json;
  const DecodeFidelity& f = row.fidelity;
  return Json{
      {"kind", row.dense ? "dense" : "sparse"},
      {"selection", row.dense ? Json() : Json(row.rule == SparseSelection::kMass ? "mass" : "delta")},
      {"delta", row.dense || row.rule == SparseSelection::kMass ? Json()
                : std::isinf(row.delta) ? Json("inf") : Json(row.delta)},
      {"mass_target", !row.dense && row.rule == SparseSelection::kMass ? Json(row.delta) : Json()},
      {"kept_fraction", f.kept_fraction},
      {"read_fraction", f.read_fraction},
      {"kept_mass_mean", f.kept_mass_mean},
      {"kept_mass_min", f.kept_mass_min},
      {"rel_l2", f.rel_l2},
      {"max_head_rel_l2", f.max_head_rel_l2},
      {"selection_rel_l2", row.selection_rel_l2 >= 0 ? Json(row.selection_rel_l2) : Json()},
      {"top1_block_recall", f.top1_block_recall},
      {"top1_block_recall_min", f.top1_block_recall_min},
      {"top1_token_blocks_recall", f.top1_recall},
      {"top1_token_blocks_recall_min", f.top1_recall_min},
      {"ms_median", row.timing.median_ms},
      {"ms_min", row.timing.min_ms},
      {"workspace_bytes", on_gpu ? Json(row.workspace_bytes) : Json()},
  };
}

int run_decode(const DecodeArgs& args) {
  std::vector<DecodeSelection> deltas;
  DecodeSpec spec = parse_spec(args, &deltas);

  const DeviceChoice device = choose_device(args.device);
  if (!device.error.empty()) {
    std::cerr << "litetopk: error: " << device.error << '\n';
    return kExitFailure;
  }
  spec.on_gpu = device.on_gpu;
  const GpuInfo& gpu = device.gpu;
  const CpuInfo cpu = probe_cpu();
  const std::string& device_name = device.device_name;
  if (!device.note.empty()) {
    std::cout << device.note << (spec.on_gpu ? ": the GPU kernels" : ": the CPU references")
              << '\n';
  }

  const int64_t group = spec.num_q_heads / spec.num_kv_heads;
  std::cout << "generating " << decode_pattern_label(spec.pattern) << " decode inputs: "
            << spec.batch << " x " << spec.context << " tokens, " << spec.num_kv_heads
            << " KV heads x " << group << " query heads, D=" << kSparseDecodeHeadDim << ", "
            << dtype_name(spec.dtype) << ", seed " << spec.seed << '\n';
  DecodeRunner runner(spec);
  Status prepared;
  {
    Progress progress("generating and quantizing the cache");
    prepared = runner.prepare(/*selection_error=*/true);
  }
  if (const Status s = prepared; !s) {
    std::cerr << "litetopk: error: decode inputs: " << s.to_string() << '\n';
    return kExitFailure;
  }
  const DecodeCacheMemory memory = runner.memory();
  const std::string cache_label = "the sparse cache (BS " + std::to_string(spec.block_size) + ")";
  std::cout << "generated in " << fixed(runner.generate_ms(), 0) << " ms, "
            << (spec.on_gpu ? "converted into " + cache_label +
                                  " on the GPU by sparse_kv_from_dense in " +
                                  fixed(runner.quantize_ms(), 3)
                            : "quantized into " + cache_label + " in " +
                                  fixed(runner.quantize_ms(), 0))
            << " ms\n";
  std::cout << "cache: " << megabytes(memory.sparse_bytes) << " = "
            << fixed(static_cast<double>(memory.sparse_bytes) /
                         static_cast<double>(memory.dense_bytes),
                     3)
            << " of " << dtype_name(spec.dtype) << " K+V (" << megabytes(memory.dense_bytes)
            << "); full blocks: " << fixed(memory.per_token_bytes, 0)
            << " B per token per KV head = "
            << fixed(memory.per_token_bytes / memory.per_token_dense_bytes, 3) << " of "
            << fixed(memory.per_token_dense_bytes, 0) << " B\n";

  std::cout << "running " << (spec.on_gpu ? "sparse_decode" : "sparse_decode_cpu") << " at delta";
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    std::cout << (i ? ", " : " ") << selection_label(deltas[i]);
  }
  if (spec.on_gpu) {
    std::cout << " and dense_decode (fp32 outputs) on " << gpu.device.name;
  } else {
    std::cout << " and dense_decode_cpu (fp64 references) on " << cpu.model << " ("
              << cpu.hardware_threads << " threads)";
  }
  std::cout << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  std::vector<DecodeRow> rows;
  std::optional<Progress> progress(std::in_place, "running sparse and dense decoding");
  for (const DecodeSelection& delta : deltas) {
    DecodeRow row;
    if (const Status s = runner.run_sparse(delta, args.bench, &row); !s) {
      std::cerr << "litetopk: error: sparse decode at " << selection_label(delta) << ": "
                << s.to_string() << '\n';
      return kExitFailure;
    }
    rows.push_back(row);
  }
  DecodeRow dense;
  if (const Status s = runner.run_dense(args.bench, &dense); !s) {
    std::cerr << "litetopk: error: dense decode: " << s.to_string() << '\n';
    return kExitFailure;
  }
  rows.push_back(dense);
  progress.reset();

  std::vector<std::string> header{"delta",  "kept blocks",      "bytes read",
                                  "kept mass mean", "kept mass min", "rel L2",
                                  "rel L2 selection", "top-1% blocks recall", "ms"};
  if (spec.on_gpu) header.push_back("vs dense");
  Table table(header, 1);
  for (const DecodeRow& row : rows) {
    const DecodeFidelity& f = row.fidelity;
    std::vector<std::string> cells{
        row.dense ? "dense" : selection_label({row.rule, row.delta}), fixed(f.kept_fraction, 3),
        fixed(f.read_fraction, 3), fixed(f.kept_mass_mean, 5), fixed(f.kept_mass_min, 5),
        scientific(f.rel_l2, 2),
        row.selection_rel_l2 >= 0 ? scientific(row.selection_rel_l2, 2) : "-",
        fixed(f.top1_block_recall, 3), fixed(row.timing.median_ms, spec.on_gpu ? 4 : 2)};
    if (spec.on_gpu) {
      cells.push_back(row.timing.median_ms > 0
                          ? fixed(dense.timing.median_ms / row.timing.median_ms, 2) + "x"
                          : "-");
    }
    table.add_row(cells);
  }
  std::cout << '\n';
  table.print(std::cout);
  std::cout << "\nkept blocks: full blocks read / full blocks (block 0, the last full block and "
               "the open block are always read)\n"
               "bytes read: what a sparse kernel reads (2-bit codes and scales of every block, "
               "residuals and values of the kept ones) / what a dense "
            << dtype_name(spec.dtype)
            << " kernel reads (a model, not a measurement)\n"
               "kept mass: the fp64 reference softmax mass in the read blocks, mean and worst "
               "over (sequence, query head)\n"
               "rel L2: ||out - ref|| / ||ref|| against fp64 dense attention over the original "
               "keys; selection: against dense attention over the same rebuilt keys\n"
               "top-1% blocks recall: share of the heaviest 1% of blocks (by reference mass) "
               "that were read\n"
               "ms: "
            << (args.bench.enabled ? "median of " + std::to_string(args.bench.iters) +
                                         " runs after " + std::to_string(args.bench.warmup) +
                                         " warmup"
                                   : std::string(spec.on_gpu ? "one run (after a warm-up run)"
                                                             : "one run"));
  if (spec.on_gpu) {
    std::cout << " of the GPU kernel (CUDA events around each call on the default stream; every "
                 "run reads the same cache, which stays in L2 when it fits); vs dense: dense ms / "
                 "ms\n"
                 "dense row: dense_decode accumulates in fp32 but rounds the softmax weights to "
              << dtype_name(spec.dtype) << " for the P V product (docs/sparse_decode.md)\n";
  } else {
    std::cout << " of the fp64 CPU reference (not a kernel; the sparse one scans every block's "
                 "codes)\n";
  }

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    Json json_rows = Json::array();
    for (const DecodeRow& row : rows) json_rows.push_back(row_json(row, spec.on_gpu));
    const Json record = {
        {"tool", "litetopk decode"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"pattern", decode_pattern_label(spec.pattern)},
        {"dtype", dtype_name(spec.dtype)},
        {"batch", spec.batch},
        {"context", spec.context},
        {"kv_heads", spec.num_kv_heads},
        {"q_heads", spec.num_q_heads},
        {"head_dim", kSparseDecodeHeadDim},
        {"block_size", spec.block_size},
        {"seed", spec.seed},
        {"backend", spec.on_gpu ? "gpu" : "cpu"},
        {"device", device_name},
        {"bench", args.bench.enabled},
        {"warmup", args.bench.enabled ? args.bench.warmup : 0},
        {"iters", args.bench.enabled ? args.bench.iters : 1},
        {"generate_ms", runner.generate_ms()},
        {"quantize_ms", runner.quantize_ms()},
        {"cache_bytes", memory.sparse_bytes},
        {"dense_cache_bytes", memory.dense_bytes},
        {"cache_ratio",
         static_cast<double>(memory.sparse_bytes) / static_cast<double>(memory.dense_bytes)},
        {"bytes_per_token", memory.per_token_bytes},
        {"bytes_per_token_ratio", memory.per_token_bytes / memory.per_token_dense_bytes},
        {"rows", json_rows},
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_decode_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DecodeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "decode",
      "Sparse decoding vs dense on a generated KV cache: the delta trade-off table");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--batch", args->spec.batch, "Sequences")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--context", args->spec.context, "Tokens in every sequence")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--kv-heads", args->spec.num_kv_heads, "KV heads")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--q-heads", args->spec.num_q_heads,
                  "Query heads: kv-heads times a GQA group of 1..16")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--block-size", args->spec.block_size, "Tokens per KV block")
      ->check(CLI::IsMember({128, 256}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Cache and query dtype")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--pattern", args->pattern,
                  "synthetic: sinks, a local window, needles and a heavy tail; flat: no "
                  "structure (the worst case); spread: mass over a quarter of the tokens; "
                  "passages: a few hot passages; rope: synthetic with RoPE-rotated keys")
      ->check(CLI::IsMember({"synthetic", "flat", "spread", "passages", "rope"}))
      ->capture_default_str();
  cmd->add_option("--deltas", args->deltas,
                  "Comma-separated selections: deltas (natural-log units of the softmax weight; "
                  "inf keeps every block) or bounded-mass targets as m<target> (m0.01: skip at "
                  "most 1% of the estimated mass)")
      ->delimiter(',')
      ->capture_default_str();
  add_device_option(cmd, &args->device);
  cmd->add_option("--seed", args->spec.seed, "Generator seed")->capture_default_str();
  add_bench_options(cmd, &args->bench);
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, exit_code] {
    *exit_code = run_with_memory_check("decode", host_buffers(*args),
                                       [&] { return run_decode(*args); }, std::cerr);
  });
}

}  // namespace litetopk::tools
