// `litetopk retrieval`: generate queries and a corpus (testkit/retrieval_workload.h), find each
// query's exact top k corpus rows on one backend, optionally verify against the CPU reference and
// benchmark; print a table and optionally write a JSON record.
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
#include "report.h"
#include "retrieval_runner.h"
#include "litetopk/device.h"
#include "testkit/retrieval_verify.h"
#include "testkit/retrieval_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

struct RetrievalArgs {
  int64_t batch = 16;
  int64_t corpus = 20000;
  int64_t dim = 128;
  int64_t k = 100;
  std::string metric = "ip";
  std::string dtype = "fp16";
  std::string workload = "clustered";
  bool norms = false;
  bool fp8_corpus = false;
  double bitmap = -1.0;  // the fraction of rows the bitmap allows; < 0: no bitmap
  bool sorted = false;
  bool deterministic = false;
  std::string device = "auto";
  std::string path = "auto";
  uint64_t seed = 42;
  bool verify = false;
  BenchOptions bench;
  std::string json_path;
};

bool is_metric(const std::string& name) {
  RetrievalMetric metric;
  return parse_retrieval_metric(name.c_str(), &metric);
}

bool is_dtype(const std::string& name) {
  DType dtype;
  return parse_dtype(name.c_str(), &dtype) && dtype != DType::kFloat32;
}

bool is_path(const std::string& name) {
  RetrievalPath path;
  return parse_retrieval_path(name.c_str(), &path);
}

bool is_kind(const std::string& name) {
  RetrievalKind kind;
  return parse_retrieval_kind(name, &kind);
}

std::vector<HostBuffer> host_buffers(const RetrievalArgs& args) {
  const double out = static_cast<double>(args.batch) * static_cast<double>(args.k) * 8.0;
  std::vector<HostBuffer> buffers = {
      {"the corpus [--corpus x --dim] " + (args.fp8_corpus ? std::string("fp8") : args.dtype),
       static_cast<double>(args.corpus) * static_cast<double>(args.dim) *
           (args.fp8_corpus ? 1.0 : 2.0)},
      {"the queries [--batch x --dim] " + args.dtype,
       static_cast<double>(args.batch) * static_cast<double>(args.dim) * 2.0},
      {"the indices and scores [--batch x --k]", out}};
  if (args.verify) {
    buffers.push_back({"the reference's indices and scores [--batch x --k]", out});
    buffers.push_back({"the reference's fp32 corpus [--corpus x --dim]",
                       static_cast<double>(args.corpus) * static_cast<double>(args.dim) * 4.0});
  }
  return buffers;
}

int run_retrieval(const RetrievalArgs& args) {
  const DeviceChoice device = choose_device(args.device);
  if (!device.error.empty()) {
    std::cerr << "litetopk: error: " << device.error << '\n';
    return kExitFailure;
  }
  if (!device.note.empty()) std::cout << device.note << '\n';

  RetrievalSpec spec;
  spec.batch = args.batch;
  spec.n = args.corpus;
  spec.dim = args.dim;
  spec.k = args.k;
  parse_dtype(args.dtype.c_str(), &spec.dtype);          // validated by the option
  parse_retrieval_metric(args.metric.c_str(), &spec.metric);
  parse_retrieval_kind(args.workload, &spec.kind);
  spec.seed = args.seed;
  if (args.fp8_corpus) spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
  const std::string shape = shape_label(spec.batch, spec.n, spec.k) + " d=" + std::to_string(spec.dim);
  const std::string corpus_type = args.fp8_corpus ? "fp8_e4m3" : dtype_name(spec.dtype);
  std::cout << "generating " << shape << ' ' << dtype_name(spec.dtype) << " queries and "
            << corpus_type << " corpus (" << args.workload << ", seed " << spec.seed << ")\n";
  const RetrievalWorkload workload = [&] {
    Progress progress("generating the corpus");
    return make_retrieval_workload(spec);
  }();
  RetrievalProblem problem = workload.host_problem();
  problem.corpus_norms = args.norms ? workload.corpus_norms.data() : nullptr;
  const std::vector<uint8_t> bitmap =
      args.bitmap >= 0.0 ? make_retrieval_bitmap(spec.n, args.bitmap, spec.seed) : std::vector<uint8_t>{};
  problem.corpus_bitmap = bitmap.empty() ? nullptr : bitmap.data();
  problem.sorted = args.sorted;
  problem.deterministic = args.deterministic;

  RetrievalPath path = RetrievalPath::kAuto;
  parse_retrieval_path(args.path.c_str(), &path);  // validated by the option
  const std::string backend =
      device.on_gpu ? "gpu (path " + args.path + ")" : std::string("cpu reference");
  std::cout << "running " << backend << " on " << device.device_name
            << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  RetrievalRun run;
  Status run_status;
  {
    Progress progress("running retrieval_topk");
    run_status = device.on_gpu ? run_retrieval_gpu(problem, args.bench, &run, path)
                               : run_retrieval_cpu(problem, args.bench, &run);
  }
  if (Status s = run_status; !s) {
    std::cerr << "litetopk: error: " << s.to_string() << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  if (args.verify) {
    std::cout << "verifying against the CPU reference\n";
    RetrievalRun reference;
    Status reference_status;
    {
      Progress progress("verifying against the CPU reference");
      reference_status = run_retrieval_cpu(problem, BenchOptions{}, &reference);
    }
    if (Status s = reference_status; !s) {
      std::cerr << "litetopk: error: reference: " << s.to_string() << '\n';
      return kExitFailure;
    }
    // The GPU's fp32 dot products differ from the reference's rounded fp64 ones by rounding.
    const float tolerance =
        device.on_gpu ? retrieval_tolerance(problem, reference.scores.data()) : 0.0f;
    const std::string mismatch =
        compare_retrieval(problem, run.indices.data(), run.scores.data(),
                          reference.indices.data(), reference.scores.data(), tolerance);
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const double ms = run.timing.median_ms;
  const double flops = 2.0 * static_cast<double>(spec.batch) * static_cast<double>(spec.n) *
                       static_cast<double>(spec.dim);
  const std::size_t corpus_bytes = workload.corpus_bytes();
  const double tflops = teraflops_per_second(flops, ms);
  const double gbps = gigabytes_per_second(corpus_bytes, ms);
  Table table({"shape", "corpus", "metric", "device", "ms", "min ms", "TFLOP/s", "corpus GB/s",
               "exact"},
              4);
  const auto timed = [&](const std::string& text) { return args.bench.enabled ? text : "-"; };
  table.add_row({shape, corpus_type, retrieval_metric_name(spec.metric),
                 device.on_gpu ? std::string("gpu ") + retrieval_path_name(run.path) : "cpu",
                 timed(fixed(ms, 4)),
                 timed(fixed(run.timing.min_ms, 4)), timed(fixed(tflops, 2)),
                 timed(fixed(gbps, 1)), verified ? (*verified ? "yes" : "NO") : "not checked"});
  std::cout << '\n';
  table.print(std::cout);

  if (!args.json_path.empty()) {
    using Json = nlohmann::ordered_json;
    const auto timed_json = [&](double value) { return args.bench.enabled ? Json(value) : Json(); };
    const Json record = {
        {"tool", "litetopk retrieval"},
        {"version", build_info().version},
        {"date", utc_timestamp()},
        {"batch", spec.batch},
        {"corpus", spec.n},
        {"dim", spec.dim},
        {"k", spec.k},
        {"dtype", dtype_name(spec.dtype)},
        {"corpus_format", retrieval_corpus_format_name(spec.corpus_format)},
        {"metric", retrieval_metric_name(spec.metric)},
        {"corpus_norms", args.norms},
        {"bitmap_allowed", args.bitmap >= 0.0 ? Json(args.bitmap) : Json()},  // null: no bitmap
        {"workload", args.workload},
        {"sorted", problem.sorted},
        {"deterministic", problem.deterministic},
        {"seed", spec.seed},
        {"backend", device.on_gpu ? "gpu" : "cpu"},
        {"device", device.device_name},
        {"chunks", run.chunks},
        {"path", device.on_gpu ? retrieval_path_name(run.path) : "cpu"},
        {"warmup", args.bench.warmup},
        {"iters", args.bench.iters},
        {"ms_median", timed_json(ms)},
        {"ms_min", timed_json(run.timing.min_ms)},
        {"tflops", timed_json(tflops)},
        {"corpus_gbps", timed_json(gbps)},
        {"verified", verified ? Json(*verified) : Json()},  // null: not checked
    };
    if (!write_json_record(args.json_path, record)) return kExitFailure;
  }
  return verified.value_or(true) ? kExitOk : kExitFailure;
}

}  // namespace

void add_retrieval_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RetrievalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "retrieval",
      "Exact top-k corpus rows of generated queries (by default 16 queries x 20000 rows, d 128, "
      "k 100)");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--batch", args->batch, "Queries")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--corpus", args->corpus, "Corpus rows")
      ->check(integer_in(1, kMaxInt32))
      ->capture_default_str();
  cmd->add_option("--dim", args->dim, "Vector dimension (64 to 1024, a multiple of 16)")
      ->check(integer_in(kRetrievalMinDim, kRetrievalMaxDim))
      ->capture_default_str();
  cmd->add_option("--k", args->k, "Rows selected per query (above --corpus: -1 padded)")
      ->check(integer_in(1, kRetrievalMaxK))
      ->capture_default_str();
  cmd->add_option("--metric", args->metric, "ip, cosine (normalised inputs) or l2")
      ->check(one_of("ip|cosine|l2", is_metric))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Vector type")
      ->check(one_of("fp16|bf16", is_dtype))
      ->capture_default_str();
  cmd->add_option("--workload", args->workload, "Vectors")
      ->check(one_of(retrieval_kind_choices(), is_kind))
      ->capture_default_str();
  cmd->add_flag("--norms", args->norms, "l2: pass the corpus' squared norms (else computed)");
  cmd->add_flag("--fp8-corpus", args->fp8_corpus,
                "Corpus as fp8 e4m3 with a per-row fp32 scale (queries stay --dtype)");
  cmd->add_option("--bitmap", args->bitmap,
                  "Pass a corpus bitmap allowing this fraction of the rows (random, from --seed)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--sorted", args->sorted, "Best first, ties by ascending row");
  cmd->add_flag("--deterministic", args->deterministic, "Ties at the k-th score: smallest rows");
  add_device_option(cmd, &args->device);
  cmd->add_option("--path", args->path,
                  "GPU path: auto (the cost model), unfused (cuBLAS, select, merge) or fused (the "
                  "gate in the GEMM's epilogue; fp16/bf16 corpus, sm_90)")
      ->check(one_of("auto|unfused|fused", is_path))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_flag("--verify", args->verify, "Compare with the CPU reference (all queries)");
  add_bench_options(cmd, &args->bench);
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, exit_code] {
    if (args->dim % kRetrievalDimMultiple != 0) {
      throw CLI::ValidationError("--dim", "must be a multiple of " +
                                              std::to_string(kRetrievalDimMultiple) + ", got " +
                                              std::to_string(args->dim));
    }
    if (args->norms && args->metric != "l2") {
      throw CLI::ValidationError("--norms", "needs --metric l2, got --metric " + args->metric);
    }
    *exit_code = run_with_memory_check("retrieval", host_buffers(*args),
                                       [&] { return run_retrieval(*args); }, std::cerr);
  });
}

}  // namespace litetopk::tools
