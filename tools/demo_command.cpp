// `litetopk demo`: a few default shapes, every algorithm of one backend, each verified against the
// CPU reference, then the DSA indexer on one causal chunk and on one paged decode batch, a DSA
// layer end to end (the indexer, then sparse attention over its indices, checked like `litetopk
// dsa`), exact retrieval of clustered embeddings (checked like `litetopk retrieval --verify`),
// and sparse decoding against dense on a synthetic workload (judged against fp64 dense
// attention), and a table of times and speedups.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_options.h"
#include "commands.h"
#include "decode_runner.h"
#include "device_choice.h"
#include "dsa_runner.h"
#include "environment.h"
#include "indexer_runner.h"
#include "paged_indexer_runner.h"
#include "retrieval_runner.h"
#include "testkit/dsa_verify.h"
#include "testkit/dsa_workload.h"
#include "testkit/indexer_verify.h"
#include "testkit/indexer_workload.h"
#include "testkit/paged_indexer_verify.h"
#include "testkit/paged_indexer_workload.h"
#include "testkit/retrieval_verify.h"
#include "testkit/retrieval_workload.h"
#include "report.h"
#include "select_runner.h"
#include "testkit/select_verify.h"
#include "testkit/select_workload.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

namespace {

struct DemoShape {
  int64_t batch;
  int64_t n;
  int64_t k;
};

// What the demo runs on one backend. The first variant (and the first run of each indexer) is
// the baseline of the speedups.
struct DemoPlan {
  std::vector<DemoShape> shapes;
  std::vector<Variant> variants;
  int64_t verify_rows;  // per shape; the CPU reference on big GPU shapes is slow
  IndexerSpec indexer;  // causal ranges
  std::vector<IndexerRunOptions> indexer_runs;
  BenchOptions bench;
  BenchOptions quick_bench;
  PagedIndexerSpec paged;  // the decode indexer's batch
  std::vector<PagedIndexerRunOptions> paged_runs;
  DsaSpec dsa;  // the DSA layer's chunk: indexer_topk, then sparse_attention (auto algorithms)
  RetrievalSpec retrieval;  // queries x a clustered corpus, retrieval_topk
};

// Sparse decoding against dense on the plan's backend. Dense is the baseline of the speedups.
struct DecodeDemo {
  DecodeSpec spec;
  std::vector<float> deltas;
  BenchOptions bench;
  BenchOptions quick_bench;
  // The dense output's largest rel L2 against fp64 dense attention.
  double dense_tolerance = 0;
};

// GPU: Llama-3.1-8B-like heads at 128K tokens, where the sparse kernel reads far fewer bytes than
// the dense one (docs/sparse_decode.md measured 1.7x at delta 5); generating and judging it takes
// a few seconds of CPU. CPU: a short context, the fp64 references being slow.
DecodeDemo decode_demo(bool on_gpu) {
  DecodeDemo demo;
  demo.spec.batch = 1;
  demo.spec.context = on_gpu ? 131072 : 16384;
  demo.spec.num_kv_heads = on_gpu ? 8 : 2;
  demo.spec.num_q_heads = on_gpu ? 32 : 8;
  demo.spec.block_size = 128;
  demo.spec.on_gpu = on_gpu;
  demo.deltas = {5.0f, 7.0f};
  demo.bench = on_gpu ? BenchOptions{true, 5, 50} : BenchOptions{true, 1, 5};
  demo.quick_bench = on_gpu ? BenchOptions{true, 2, 10} : BenchOptions{true, 0, 2};
  // CPU: the fp64 result rounded to the fp32 output. GPU: dense_decode accumulates in fp32 but
  // rounds each softmax weight to the cache dtype (unit roundoff u) for the P V product, so an
  // output element is off by at most about 2.5 u sum_t w_t |v_t| (docs/sparse_decode.md); with
  // independent roundings the rel L2 is about u / sqrt(3). 4 u leaves room for both (fp16:
  // 2^-9 = 1.95e-3, bf16: 1.56e-2); a wrong kernel is off by far more.
  const double u = std::ldexp(1.0, demo.spec.dtype == DType::kBFloat16 ? -8 : -11);
  demo.dense_tolerance = on_gpu ? 4 * u : 1e-6;
  return demo;
}

IndexerSpec causal_indexer(int64_t T, int64_t S, int64_t H, int64_t k) {
  IndexerSpec spec;
  spec.T = T;
  spec.S = S;
  spec.H = H;
  spec.k = k;
  spec.ranges = IndexerRanges::kCausal;
  spec.seed = 42;
  return spec;
}

// T queries at the end of S tokens, h_q attention heads, k tokens each; indexer H = 64.
DsaSpec dsa_layer(int64_t T, int64_t S, int64_t h_q, int64_t k) {
  DsaSpec spec;
  spec.T = T;
  spec.S = S;
  spec.h_q = h_q;
  spec.k = k;
  spec.seed = 42;
  return spec;
}

// B requests of `context` tokens with next_n = 2 query tokens each (multi-token prediction).
RetrievalSpec clustered_retrieval(int64_t batch, int64_t n, int64_t dim, int64_t k) {
  RetrievalSpec spec;
  spec.batch = batch;
  spec.n = n;
  spec.dim = dim;
  spec.k = k;
  spec.kind = RetrievalKind::kClustered;
  spec.seed = 42;
  return spec;
}

PagedIndexerSpec paged_indexer(int64_t batch, int64_t context, int64_t H, int64_t k) {
  PagedIndexerSpec spec;
  spec.context_lens = fixed_context_lens(batch, context);
  spec.next_n = 2;
  spec.H = H;
  spec.k = k;
  spec.seed = 42;
  return spec;
}

DemoPlan gpu_plan() {
  const auto gpu = [](SelectAlgo algo) {
    return Variant{Backend::kGpu, algo, CpuSelectAlgo::kFast};
  };
  const auto gpu_indexer = [](IndexerAlgo algo) {
    IndexerRunOptions options;
    options.algo = algo;
    return options;
  };
  const auto gpu_paged = [](IndexerAlgo algo) {
    PagedIndexerRunOptions options;
    options.algo = algo;
    return options;
  };
  return {{{256, 524288, 256}, {64, 131072, 2048}, {8, int64_t{1} << 20, 8192}},
          {gpu(SelectAlgo::kRadix), gpu(SelectAlgo::kSampleFilter), gpu(SelectAlgo::kAuto)},
          4,
          causal_indexer(2048, 32768, 64, 2048),
          {gpu_indexer(IndexerAlgo::kUnfused), gpu_indexer(IndexerAlgo::kFused)},
          {true, 3, 20},
          {true, 1, 5},
          paged_indexer(8, 32768, 64, 2048),
          {gpu_paged(IndexerAlgo::kUnfused), gpu_paged(IndexerAlgo::kFused),
           gpu_paged(IndexerAlgo::kAuto)},
          dsa_layer(1024, 32768, 16, 2048),
          clustered_retrieval(16, 100000, 768, 1024)};
}

DemoPlan cpu_plan() {
  const auto cpu = [](CpuSelectAlgo algo) {
    return Variant{Backend::kCpu, SelectAlgo::kAuto, algo};
  };
  IndexerRunOptions cpu_indexer;
  cpu_indexer.on_cpu = true;
  PagedIndexerRunOptions cpu_paged;
  cpu_paged.on_cpu = true;
  return {{{64, 131072, 2048}, {16, int64_t{1} << 20, 1024}},
          {cpu(CpuSelectAlgo::kReference), cpu(CpuSelectAlgo::kFast)},
          std::numeric_limits<int64_t>::max(),
          causal_indexer(16, 4096, 64, 256),
          {cpu_indexer},
          {true, 1, 5},
          {true, 0, 2},
          paged_indexer(2, 4096, 64, 256),
          {cpu_paged},
          dsa_layer(16, 4096, 16, 256),
          clustered_retrieval(8, 20000, 128, 100)};
}

// The "[step/steps] what ... outcome" lines.
class Progress {
 public:
  explicit Progress(std::size_t steps) : steps_(steps) {}
  void start(const std::string& what) {
    std::cout << '[' << ++step_ << '/' << steps_ << "] " << what << " ... " << std::flush;
  }
  // Ends the line with "error"; the status goes to stderr.
  void fail(const Status& status) {
    std::cout << "error\n";
    std::cerr << "  " << status.to_string() << '\n';
  }
  // Ends the line with the time, and MISMATCH when `mismatch` is not empty (it goes to stderr).
  // True when it is empty.
  bool finish(double ms, const std::string& mismatch) {
    std::cout << fixed(ms, 3) << " ms" << (mismatch.empty() ? "" : ", MISMATCH") << '\n';
    if (!mismatch.empty()) std::cerr << "  " << mismatch << '\n';
    return mismatch.empty();
  }

 private:
  std::size_t steps_;
  std::size_t step_ = 0;
};

// "1.53x" against the baseline's time, or "-".
std::string speedup(double baseline_ms, double ms) {
  return baseline_ms > 0 && ms > 0 ? fixed(baseline_ms / ms, 2) + "x" : "-";
}

// One table row "<kind> <shape>" per run of `runs` on `workload`, each checked by `checker`: the
// prefill and the decode indexer steps. `run_one(workload, options, &run)` and `run_name(options)` are the
// indexer's runner functions; `bytes` (0: none) gives the GB/s column. False when one failed.
template <class Run, class Options, class Workload, class Checker, class RunOne, class RunName>
bool run_checked_indexer_rows(const std::string& kind, const std::string& shape,
                              const Workload& workload, const Checker& checker,
                              std::vector<Options> runs, double bytes, RunOne run_one,
                              RunName run_name, const BenchOptions& bench, Progress* progress,
                              Table* table) {
  const std::string label = kind + ' ' + shape;
  const std::string baseline = run_name(runs.front());
  bool all_ok = true;
  double baseline_ms = 0;
  for (Options options : runs) {
    options.bench = bench;
    const std::string name = run_name(options);
    progress->start(kind + ' ' + name + ' ' + shape);
    Run run;
    if (Status s = run_one(workload, options, &run); !s) {
      progress->fail(s);
      table->add_row({label, name, "error"});
      all_ok = false;
      continue;
    }
    const std::string mismatch = checker.check(run.indices.data());
    const double ms = run.timing.median_ms;
    if (name == baseline) baseline_ms = ms;
    all_ok = progress->finish(ms, mismatch) && all_ok;
    const double tflops = teraflops_per_second(workload.flops(), ms);
    table->add_row({label, name == run.algo ? name : name + " (" + run.algo + ")", fixed(ms, 3),
                    bytes > 0 ? fixed(bytes / (ms * 1e6), 1) : "-",
                    fixed(tflops, tflops < 10 ? 3 : 1),
                    options.on_cpu ? "-" : fixed(static_cast<double>(run.workspace_bytes) / 1e6, 1),
                    speedup(baseline_ms, ms), mismatch.empty() ? "yes" : "NO"});
  }
  return all_ok;
}

// The plan's indexer runs on one causal chunk, each checked on a few queries like
// `litetopk indexer --verify`. False when one failed.
bool run_indexer_steps(const DemoPlan& plan, const BenchOptions& bench, Progress* progress,
                       Table* table) {
  const IndexerWorkload workload = make_indexer_workload(plan.indexer);
  const IndexerChecker checker(workload, indexer_verify_queries(plan.indexer.T), kIndexerTolRel);
  const std::string shape = indexer_shape_label(plan.indexer);
  return run_checked_indexer_rows<IndexerRun>("indexer", shape, workload, checker,
                                              plan.indexer_runs, 0.0, run_indexer,
                                              indexer_run_name, bench, progress, table);
}

// The plan's decode-indexer runs on one paged batch, each checked on its first, middle and last
// requests like `litetopk indexer --paged --verify`. False when one failed.
bool run_paged_indexer_steps(const DemoPlan& plan, const BenchOptions& bench, Progress* progress,
                             Table* table) {
  const PagedIndexerWorkload workload = make_paged_indexer_workload(plan.paged);
  const PagedIndexerChecker checker(workload, paged_indexer_verify_requests(workload.batch),
                                    kIndexerTolRel);
  const std::string shape = paged_indexer_shape_label(plan.paged);
  return run_checked_indexer_rows<PagedIndexerRun>(
      "paged indexer", shape, workload, checker, plan.paged_runs,
      paged_indexer_bytes_read(workload), run_paged_indexer, paged_indexer_run_name, bench,
      progress, table);
}

// The plan's DSA layer on the backend: indexer_topk, then sparse_attention over its indices (the
// GPU's auto algorithms, or the CPU references), each stage and the layer timed (dsa_runner.h),
// the indices and the attention checked like `litetopk dsa` (testkit/dsa_verify.h): a table row
// each. False when it failed.
bool run_dsa_step(const DemoPlan& plan, bool on_gpu, const BenchOptions& bench,
                  Progress* progress, Table* table) {
  const DsaSpec& spec = plan.dsa;
  const std::string shape = dsa_shape_label(spec);
  const std::string label = "dsa " + shape;
  DsaRunOptions options;
  options.on_gpu = on_gpu;
  options.bench = bench;
  progress->start("dsa layer " + shape +
                  (on_gpu ? ": indexer_topk auto, then sparse_attention auto"
                          : ": indexer_topk_cpu, then sparse_attention_cpu"));
  const DsaWorkload workload = make_dsa_workload(spec);
  DsaRun run;
  if (Status s = run_dsa_layer(workload, options, &run); !s) {
    progress->fail(s);
    table->add_row({label, "layer", "error"});
    return false;
  }
  const DsaChecker checker(workload);
  const std::string index_mismatch = checker.check_indices(run.indices.data());
  const std::string attention_mismatch = checker.check_attention(
      run.indices.data(), run.out.data(), run.max_logits.data(), run.lse.data());
  std::string mismatch;
  if (!index_mismatch.empty()) mismatch = "dsa indexer: " + index_mismatch;
  if (!attention_mismatch.empty()) {
    mismatch += (mismatch.empty() ? "" : "\n  ") + std::string("dsa attention: ") +
                attention_mismatch;
  }
  const bool ok = progress->finish(run.layer.median_ms, mismatch);
  const auto name = [&](const std::string& ran) { return on_gpu ? "auto (" + ran + ")" : ran; };
  const auto tflops = [](double flops, double ms) {
    const double value = teraflops_per_second(flops, ms);
    return fixed(value, value < 10 ? 3 : 1);
  };
  const auto megabytes = [&](std::size_t bytes) {
    return on_gpu ? fixed(static_cast<double>(bytes) / 1e6, 1) : "-";
  };
  const double gathered_bytes = static_cast<double>(dsa_attention_pairs(spec)) *
                                static_cast<double>(spec.d_qk) * 2.0;
  table->add_row({label, "indexer " + name(run.indexer_algo), fixed(run.indexer.median_ms, 3),
                  "-", tflops(workload.indexer_flops(), run.indexer.median_ms),
                  megabytes(run.indexer_workspace_bytes), "-",
                  index_mismatch.empty() ? "yes" : "NO"});
  table->add_row({label, "attention " + name(run.attention_algo),
                  fixed(run.attention.median_ms, 3),
                  fixed(gathered_bytes / (run.attention.median_ms * 1e6), 1),
                  tflops(workload.attention_flops(), run.attention.median_ms),
                  megabytes(run.attention_workspace_bytes), "-",
                  attention_mismatch.empty() ? "bf16" : "NO"});
  table->add_row({label, "layer", fixed(run.layer.median_ms, 3), "-",
                  tflops(workload.indexer_flops() + workload.attention_flops(),
                         run.layer.median_ms),
                  megabytes(run.indexer_workspace_bytes + run.attention_workspace_bytes), "-",
                  ok ? "yes" : "NO"});
  return ok;
}

// The plan's retrieval on the backend (the GPU's auto path or the CPU reference), every query
// checked against the CPU reference like `litetopk retrieval --verify`: a table row. False when it
// failed.
bool run_retrieval_step(const DemoPlan& plan, bool on_gpu, const BenchOptions& bench,
                        Progress* progress, Table* table) {
  const RetrievalSpec& spec = plan.retrieval;
  const std::string shape = shape_label(spec.batch, spec.n, spec.k) + " d=" +
                            std::to_string(spec.dim);
  const std::string label = "retrieval " + shape;
  const std::string name = on_gpu ? "unfused (cuBLAS, select, merge)" : "cpu reference";
  progress->start("retrieval " + name + ' ' + shape + " clustered fp16");
  const RetrievalWorkload workload = make_retrieval_workload(spec);
  const RetrievalProblem problem = workload.host_problem();
  RetrievalRun run, reference;
  Status status = on_gpu ? run_retrieval_gpu(problem, bench, &run)
                         : run_retrieval_cpu(problem, bench, &run);
  if (status) status = run_retrieval_cpu(problem, BenchOptions{}, &reference);
  if (!status) {
    progress->fail(status);
    table->add_row({label, name, "error"});
    return false;
  }
  const float tolerance = on_gpu ? retrieval_tolerance(problem, reference.scores.data()) : 0.0f;
  const std::string mismatch =
      compare_retrieval(problem, run.indices.data(), run.scores.data(), reference.indices.data(),
                        reference.scores.data(), tolerance);
  const double ms = run.timing.median_ms;
  const bool ok = progress->finish(ms, mismatch);
  const double flops = 2.0 * static_cast<double>(spec.batch) * static_cast<double>(spec.n) *
                       static_cast<double>(spec.dim);
  const double tflops = teraflops_per_second(flops, ms);
  table->add_row({label, name, fixed(ms, 3),
                  fixed(gigabytes_per_second(workload.corpus_bytes(), ms), 1),
                  fixed(tflops, tflops < 10 ? 3 : 1), "-", "-", ok ? "yes" : "NO"});
  return ok;
}

// Sparse decoding at each delta of `demo` and dense decoding on its synthetic workload, each
// judged against fp64 dense attention (the dense one must be within demo.dense_tolerance): a
// table row each. False when one failed.
bool run_decode_steps(const DecodeDemo& demo, bool quick, const std::string& note,
                      Progress* progress, Table* table) {
  const BenchOptions bench = quick ? demo.quick_bench : demo.bench;
  const bool on_gpu = demo.spec.on_gpu;
  const std::string shape = decode_shape_label(demo.spec);
  const std::string label = "decode " + shape;
  DecodeRunner runner(demo.spec);
  progress->start("decode " + shape +
                  (on_gpu ? ": generate (CPU), upload and convert to the sparse cache (GPU)"
                          : ": generate and quantize (CPU)"));
  if (Status s = runner.prepare(/*selection_error=*/false); !s) {
    progress->fail(s);
    table->add_row({label, "error"});
    return false;
  }
  progress->finish(runner.generate_ms() + runner.quantize_ms(), "");

  bool all_ok = true;
  double dense_ms = 0;
  const auto add = [&](const std::string& name, const DecodeRow& row, const std::string& exact) {
    const DecodeFidelity& f = row.fidelity;
    table->add_row({label, name, fixed(row.timing.median_ms, 3), "-", "-",
                    on_gpu ? fixed(static_cast<double>(row.workspace_bytes) / 1e6, 1) : "-",
                    speedup(dense_ms, row.timing.median_ms), exact, fixed(f.kept_fraction, 3),
                    fixed(f.kept_mass_mean, 4), scientific(f.rel_l2, 2)});
  };
  {
    progress->start("decode dense " + shape + note);
    DecodeRow row;
    if (Status s = runner.run_dense(bench, &row); !s) {
      progress->fail(s);
      table->add_row({label, "dense", "error"});
      return false;
    }
    dense_ms = row.timing.median_ms;
    const std::string mismatch =
        row.fidelity.rel_l2 <= demo.dense_tolerance
            ? std::string()
            : "dense decode: rel L2 " + scientific(row.fidelity.rel_l2, 2) +
                  " against fp64 dense attention, above " + scientific(demo.dense_tolerance, 2);
    all_ok = progress->finish(row.timing.median_ms, mismatch) && all_ok;
    add("dense", row, mismatch.empty() ? "yes" : "NO");
  }
  for (const float delta : demo.deltas) {
    const std::string name = "sparse delta=" + delta_label(delta);
    progress->start("decode " + name + ' ' + shape + note);
    DecodeRow row;
    if (Status s = runner.run_sparse({SparseSelection::kDelta, delta}, bench, &row); !s) {
      progress->fail(s);
      table->add_row({label, name, "error"});
      all_ok = false;
      continue;
    }
    progress->finish(row.timing.median_ms, "");
    add(name, row, "approx");
  }
  return all_ok;
}

int run_demo(const std::string& device, bool quick) {
  const DeviceChoice choice = choose_device(device);
  if (!choice.error.empty()) {
    std::cerr << "litetopk: error: " << choice.error << '\n';
    return kExitFailure;
  }
  if (!choice.note.empty()) std::cout << choice.note << '\n';
  const GpuInfo& gpu = choice.gpu;
  const bool on_gpu = choice.on_gpu;
  const DemoPlan plan = on_gpu ? gpu_plan() : cpu_plan();
  const BenchOptions bench = quick ? plan.quick_bench : plan.bench;
  const CpuInfo cpu = probe_cpu();
  const std::size_t indexer_queries = indexer_verify_queries(plan.indexer.T).size();
  const std::size_t paged_requests =
      paged_indexer_verify_requests(static_cast<int64_t>(plan.paged.context_lens.size())).size();
  const DecodeDemo decode = decode_demo(on_gpu);
  const std::string decode_note = on_gpu ? "" : " (CPU reference)";
  std::cout << "litetopk demo on "
            << (on_gpu ? gpu.device.name
                       : cpu.model + " (CPU, " + std::to_string(cpu.hardware_threads) + " threads)")
            << ": exact top-k of random normal fp32 rows and the DSA lightning indexer + top-k "
               "on random fp8 inputs (a causal chunk and a paged decode batch), median of "
            << bench.iters << " runs, checked against the CPU reference ("
            << (on_gpu ? "rows 0.." + std::to_string(plan.verify_rows - 1) + " of each shape"
                       : std::string("every row"))
            << "; " << indexer_queries
            << " queries of the indexer, " << paged_requests
            << " requests of the paged one); then a DSA layer (the indexer, then sparse attention "
               "over its indices; the attention checked on a sample of queries within bf16 "
               "tolerance); then sparse decoding against dense on a synthetic workload with the "
            << (on_gpu ? "GPU kernels (inputs generated on the CPU, the sparse cache built on the "
                         "GPU)"
                       : "CPU references")
            << ", median of " << (quick ? decode.quick_bench : decode.bench).iters
            << " runs, judged against fp64 dense attention; and exact retrieval over clustered "
               "embeddings, every query checked against the CPU reference\n\n";

  const std::string baseline = variant_name(plan.variants.front());
  Table table({"shape", "algo", "ms", "GB/s", "TFLOP/s", "aux MB", "speedup", "exact",
               "kept blocks", "kept mass", "rel L2"},
              2);
  Progress progress(plan.shapes.size() * plan.variants.size() + plan.indexer_runs.size() +
                    plan.paged_runs.size() + 1 + 1 + 2 + decode.deltas.size());
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
      progress.start(name + ' ' + label);
      RunResult result;
      if (Status s = runner.run(variant, &result); !s) {
        progress.fail(s);
        table.add_row({label, name, "error"});
        all_ok = false;
        continue;
      }
      const std::string mismatch =
          compare_topk(problem, result.indices.data(), reference.data(), rows);
      const double ms = result.timing.median_ms;
      if (name == baseline) baseline_ms = ms;
      all_ok = progress.finish(ms, mismatch) && all_ok;
      table.add_row({label, name == result.algo ? name : name + " (" + result.algo + ")",
                     fixed(ms, 3), fixed(gigabytes_per_second(workload.bytes_read(), ms), 1), "-",
                     "-", speedup(baseline_ms, ms), mismatch.empty() ? "yes" : "NO"});
    }
  }
  all_ok = run_indexer_steps(plan, bench, &progress, &table) && all_ok;
  all_ok = run_paged_indexer_steps(plan, bench, &progress, &table) && all_ok;
  all_ok = run_dsa_step(plan, on_gpu, bench, &progress, &table) && all_ok;
  all_ok = run_retrieval_step(plan, on_gpu, bench, &progress, &table) && all_ok;
  all_ok = run_decode_steps(decode, quick, decode_note, &progress, &table) && all_ok;
  std::cout << '\n';
  table.print(std::cout);
  std::cout << "\nspeedup: against " << baseline << " on the same shape";
  if (plan.indexer_runs.size() > 1) {
    std::cout << ", the indexer against " << indexer_run_name(plan.indexer_runs.front());
  }
  if (plan.paged_runs.size() > 1) {
    std::cout << ", the paged indexer against " << paged_indexer_run_name(plan.paged_runs.front());
  }
  std::cout << ", sparse decoding against dense"
            << (on_gpu ? "; aux MB: the indexers', the attention's and the decoders' workspace"
                       : "")
            << "; paged indexer GB/s: its keys and scales read once per request\n";
  std::cout << "dsa" << (on_gpu ? "" : " (CPU references)")
            << ": the indexer's top " << plan.dsa.k << " of each query's causal range, then "
               "sparse attention over them (h_q " << plan.dsa.h_q << ", d_qk " << plan.dsa.d_qk
            << "); attention GB/s: the kv rows it gathers, one query at a time; its check is "
               "bf16-level (2^"
            << kDsaOutToleranceExponent << " (max |v| + |out|)), not exact; `litetopk dsa` "
               "runs other shapes and algorithms\n";
  std::cout << "decode" << decode_note
            << ": kept blocks: full blocks read / full blocks; kept mass: the fp64 reference "
               "softmax mass in the read blocks (mean over heads); rel L2: against fp64 dense "
               "attention, fp32 outputs (`litetopk decode` prints the whole trade-off); dense "
               "must be within "
            << scientific(decode.dense_tolerance, 2)
            << (on_gpu ? " (4 unit roundoffs of " + std::string(dtype_name(decode.spec.dtype)) +
                             ": the kernel rounds the softmax weights to it for P V)"
                       : " (fp32 rounding of the fp64 result)")
            << '\n';
  std::cout << (all_ok ? "\nall results exact (the DSA attention and dense decoding within "
                         "their tolerances; sparse decoding approximates by design: see kept "
                         "mass and rel L2)\n"
                       : "\nFAILED: see the errors above\n");
  return all_ok ? kExitOk : kExitFailure;
}

}  // namespace

void add_demo_command(CLI::App& app, int* exit_code) {
  auto device = std::make_shared<std::string>("auto");
  auto quick = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "demo", "Run every algorithm on a few default shapes, verify and time them");
  add_device_option(cmd, device.get());
  cmd->add_flag("--quick", *quick, "Fewer timed runs");
  cmd->callback([device, quick, exit_code] { *exit_code = run_demo(*device, *quick); });
}

}  // namespace litetopk::tools
