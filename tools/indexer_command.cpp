// `litetopk indexer`: generate DSA lightning-indexer inputs (fp8 q and kv, kv scales, head
// weights, per-query key ranges), run indexer_topk with one algorithm, optionally verify a few
// queries against the CPU reference and benchmark; print a table and optionally write JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "core/device_memory.h"
#include "core/fp8_e4m3.h"
#include "cpu/indexer_scores.h"
#include "environment.h"
#include "indexer_workload.h"
#include "litetopk/indexer.h"
#include "report.h"
#include "runner.h"

namespace litetopk::tools {

namespace {

// The FP8 e4m3 matmul ceiling measured on the H200 (torch._scaled_mm 8192^3; shared/H200.md).
constexpr double kFp8PeakTflops = 1322.0;
// Queries checked by --verify: evenly spaced from the first to the last (the middle included).
constexpr int64_t kVerifyQueries = 7;
// Poison for outputs: an unwritten slot reads as a negative index that is not -1.
constexpr int kPoisonByte = 0xab;

struct IndexerArgs {
  int64_t T = 0;
  int64_t S = 0;
  int64_t H = 64;
  int64_t k = 2048;
  std::string ranges = "causal";
  std::string algo = "auto";
  int64_t candidate_capacity = 0;
  bool state = false;
  uint64_t seed = 42;
  bool verify = false;
  double tol_rel = 2e-4;
  BenchOptions bench;
  std::string json_path;
};

struct IndexerRun {
  std::string algo;              // what ran ("auto" resolved to its dispatch)
  std::vector<int32_t> indices;  // [T, k], host: the first run's
  std::vector<int32_t> warm_indices;  // with --state and --bench: the last timed run's
  Timing timing;
  std::size_t workspace_bytes = 0;
  std::size_t state_bytes = 0;
};

Timing summarize(std::vector<double> samples_ms) {
  Timing timing;
  if (samples_ms.empty()) return timing;
  std::sort(samples_ms.begin(), samples_ms.end());
  const std::size_t mid = samples_ms.size() / 2;
  timing.median_ms =
      samples_ms.size() % 2 ? samples_ms[mid] : (samples_ms[mid - 1] + samples_ms[mid]) / 2;
  timing.min_ms = samples_ms.front();
  return timing;
}

template <typename T>
Status upload(const std::vector<T>& host, detail::DeviceBuffer* device) {
  const std::size_t bytes = host.size() * sizeof(T);
  if (Status s = device->allocate(bytes); !s) return s;
  return detail::copy_to_device(device->data(), host.data(), bytes);
}

Status run_gpu(const IndexerWorkload& w, const IndexerArgs& args, IndexerAlgo algo,
               IndexerRun* run) {
  detail::DeviceBuffer q, kv, kv_scale, weights, ks, ke, indices, workspace, state_buffer;
  Status uploaded = upload(w.q, &q);
  if (uploaded) uploaded = upload(w.kv, &kv);
  if (uploaded) uploaded = upload(w.kv_scale, &kv_scale);
  if (uploaded) uploaded = upload(w.weights, &weights);
  if (uploaded) uploaded = upload(w.ks, &ks);
  if (uploaded) uploaded = upload(w.ke, &ke);
  if (!uploaded) return uploaded;
  const std::size_t index_count = static_cast<std::size_t>(w.spec.T * w.spec.k);
  if (Status s = indices.allocate(index_count * sizeof(int32_t)); !s) return s;

  IndexerProblem p = w.host_problem();
  p.q = q.data();
  p.kv = kv.data();
  p.kv_scale = kv_scale.as<float>();
  p.weights = weights.as<float>();
  p.ks = ks.as<int32_t>();
  p.ke = ke.as<int32_t>();
  p.indices = indices.as<int32_t>();

  IndexerOptions options;
  options.algo = algo;
  options.candidate_capacity = args.candidate_capacity;
  IndexerState state;
  if (args.state) {
    run->state_bytes = indexer_state_bytes(w.spec.k);
    if (Status s = state_buffer.allocate(run->state_bytes); !s) return s;
    state.data = state_buffer.data();
    state.bytes = run->state_bytes;
    if (Status s = indexer_state_reset(state, nullptr); !s) return s;
    options.state = &state;
  }
  run->algo = indexer_algo_name(algo == IndexerAlgo::kAuto ? indexer_topk_dispatch(p) : algo);

  if (Status s = indexer_topk_workspace_size(p, &run->workspace_bytes, options); !s) return s;
  if (Status s = workspace.allocate(run->workspace_bytes); !s) return s;
  if (Status s = detail::fill_device(indices.data(), kPoisonByte, indices.size()); !s) return s;
  if (Status s = indexer_topk(p, workspace.data(), run->workspace_bytes, nullptr, options); !s) {
    return s;
  }
  run->indices.resize(index_count);
  if (Status s = detail::copy_to_host(run->indices.data(), indices.data(), indices.size()); !s) {
    return s;
  }
  if (!args.bench.enabled) return Status::ok();

  detail::DeviceTimer timer;
  std::vector<double> samples;
  for (int i = 0; i < args.bench.warmup + args.bench.iters; ++i) {
    if (Status s = timer.start(); !s) return s;
    if (Status s = indexer_topk(p, workspace.data(), run->workspace_bytes, nullptr, options); !s) {
      return s;
    }
    float ms = 0;
    if (Status s = timer.stop(&ms); !s) return s;
    if (i >= args.bench.warmup) samples.push_back(ms);
  }
  run->timing = summarize(std::move(samples));
  if (args.state) {
    run->warm_indices.resize(index_count);
    return detail::copy_to_host(run->warm_indices.data(), indices.data(), indices.size());
  }
  return Status::ok();
}

Status run_cpu(const IndexerWorkload& w, const IndexerArgs& args, IndexerRun* run) {
  run->algo = "cpu";
  IndexerProblem p = w.host_problem();
  run->indices.assign(static_cast<std::size_t>(w.spec.T * w.spec.k), -2);
  p.indices = run->indices.data();
  if (Status s = indexer_topk_cpu(p); !s) return s;
  if (!args.bench.enabled) return Status::ok();

  std::vector<int32_t> scratch(run->indices.size());
  p.indices = scratch.data();
  std::vector<double> samples;
  for (int i = 0; i < args.bench.warmup + args.bench.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (Status s = indexer_topk_cpu(p); !s) return s;
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    if (i >= args.bench.warmup) samples.push_back(elapsed.count());
  }
  run->timing = summarize(std::move(samples));
  return Status::ok();
}

// The queries --verify checks: first, middle and last among up to kVerifyQueries evenly spaced.
std::vector<int64_t> verify_queries(int64_t T) {
  std::vector<int64_t> queries;
  const int64_t count = std::min(T, kVerifyQueries);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = count == 1 ? 0 : i * (T - 1) / (count - 1);
    if (queries.empty() || queries.back() != t) queries.push_back(t);
  }
  return queries;
}

double l2_norm_fp8(const uint8_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = fp8::e4m3_to_float(x[i]);
    sum += v * v;
  }
  return std::sqrt(sum);
}

// Checks `indices` ([T, k]) on the queries of `rows` against the CPU reference. Returns "" when
// every checked query passes, else the first failure.
//
// The tolerance. The checked result is the exact top k of the implementation's own fp32 scores,
// which differ from the reference's (fp64, rounded to fp32) by at most some e. If index s was
// chosen while a reference member r was not, then gpu(s) >= gpu(r), so
// cpu(s) >= cpu(r) - 2e >= K - 2e, with K the reference's k-th score. We bound e per query by
//   e_t = rel * sum_h |w[t,h]| * |q[t,h]|_2 * max_s(kv_scale[s] * |kv[s]|_2)
// (each head's dot product is off by at most rel * sum_d |q_d kv_d| <= rel * |q|_2 |kv|_2 by
// Cauchy-Schwarz; relu does not grow an error; the weights and kv_scale scale it). rel = 2e-4
// (--tol-rel) covers an fp32 accumulation (~1.2e-5) with room for a tensor core's fp8
// accumulator, which keeps fewer bits. It is loose but not vacuous: with these inputs at
// S = 256K, k = 2048, 2e is 0.35 to 0.75 against a score standard deviation of 6 to 8, and 10 to
// 20% more keys than k clear the bar K - 2e (out of 262144), so a key chosen outside the true
// top k's neighbourhood fails. Index-for-index agreement is the GPU tests' job, not this check's.
std::string verify_rows(const IndexerWorkload& w, const IndexerRows& rows, double rel,
                        const int32_t* indices) {
  const int64_t H = w.spec.H, D = w.spec.D, k = w.spec.k, S = w.spec.S;
  const int64_t n = static_cast<int64_t>(rows.queries.size());
  std::vector<int32_t> ref_indices(static_cast<std::size_t>(n * k), -2);
  std::vector<float> ref_values(static_cast<std::size_t>(n * k));
  IndexerProblem ref = rows.problem;
  ref.indices = ref_indices.data();
  ref.values = ref_values.data();
  if (Status s = indexer_topk_cpu(ref); !s) return "CPU reference failed: " + s.to_string();

  double kv_bound = 0.0;  // max_s kv_scale[s] * |kv[s]|_2
  for (int64_t s = 0; s < S; ++s) {
    kv_bound = std::max(kv_bound, std::fabs(static_cast<double>(w.kv_scale[s])) *
                                      l2_norm_fp8(&w.kv[s * D], D));
  }
  const cpu::IndexerScorer scorer(rows.problem);

  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = rows.queries[r];
    const int64_t begin = rows.ks[r], length = rows.ke[r] - rows.ks[r];
    std::ostringstream where;
    where << "query " << t << " (range [" << begin << ", " << rows.ke[r] << ")): ";
    const int32_t* ref_row = &ref_indices[r * k];
    const int32_t* row = &indices[t * k];
    const int64_t ref_count = std::find(ref_row, ref_row + k, -1) - ref_row;
    double kth = std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < ref_count; ++i) kth = std::min<double>(kth, ref_values[r * k + i]);

    double weight_bound = 0.0;  // sum_h |w[t,h]| * |q[t,h]|_2
    for (int64_t h = 0; h < H; ++h) {
      weight_bound += std::fabs(static_cast<double>(rows.weights[r * H + h])) *
                      l2_norm_fp8(&rows.q[(r * H + h) * D], D);
    }
    const double tol = rel * weight_bound * kv_bound;

    int64_t count = 0;
    while (count < k && row[count] != -1) ++count;
    if (count != ref_count) {
      where << count << " valid indices before the -1 padding, the reference has " << ref_count;
      return where.str();
    }
    for (int64_t i = count; i < k; ++i) {
      if (row[i] != -1) {
        where << "slot " << i << " holds " << row[i] << " after the valid prefix, expected -1";
        return where.str();
      }
    }
    std::unordered_set<int32_t> seen;
    for (int64_t i = 0; i < count; ++i) {
      const int32_t index = row[i];
      if (index < 0 || index >= length) {
        where << "slot " << i << " holds " << index << ", outside [0, " << length << ")";
        return where.str();
      }
      if (!seen.insert(index).second) {
        where << "index " << index << " is selected twice";
        return where.str();
      }
      float score = 0.0f;
      scorer.score_row_f32(r, begin + index, begin + index + 1, &score);
      if (!(score >= kth - 2.0 * tol)) {
        where << "slot " << i << " selects key " << begin + index << " with CPU score " << score
              << ", below the reference's k-th score " << kth << " - 2 * tolerance " << tol;
        return where.str();
      }
    }
  }
  return "";
}

int run_indexer(const IndexerArgs& args) {
  IndexerSpec spec;
  spec.T = args.T;
  spec.S = args.S;
  spec.H = args.H;
  spec.k = args.k;
  spec.seed = args.seed;
  parse_indexer_ranges(args.ranges, &spec.ranges);  // validated by the option
  if (const std::string error = indexer_spec_error(spec); !error.empty()) {
    throw CLI::ValidationError("indexer", error);
  }
  const bool on_cpu = args.algo == "cpu";
  IndexerAlgo algo = IndexerAlgo::kAuto;
  if (!on_cpu) parse_indexer_algo(args.algo.c_str(), &algo);  // validated by the option
  if (on_cpu && args.state) throw CLI::ValidationError("--state", "needs a GPU --algo");

  std::string device_name;
  if (on_cpu) {
    device_name = probe_cpu().model + " (CPU)";
  } else {
    const GpuInfo gpu = probe_gpu();
    if (!gpu.available) {
      std::cerr << "litetopk: error: --algo " << args.algo
                << " needs a GPU: " << gpu.absent_reason << " (--algo cpu runs on the CPU)\n";
      return kExitFailure;
    }
    device_name = gpu.device.name;
  }

  std::ostringstream shape_stream;
  shape_stream << "T=" << spec.T << " S=" << spec.S << " H=" << spec.H << " k=" << spec.k;
  const std::string shape = shape_stream.str();
  std::cout << "generating " << shape << " D=" << spec.D << " fp8 inputs ("
            << indexer_ranges_name(spec.ranges) << " ranges, seed " << spec.seed << ")\n";
  const IndexerWorkload workload = make_indexer_workload(spec);

  std::cout << "running " << args.algo << " on " << device_name
            << (args.bench.enabled ? " (benchmark)" : "") << '\n';
  IndexerRun run;
  const Status status = on_cpu ? run_cpu(workload, args, &run)
                               : run_gpu(workload, args, algo, &run);
  if (!status) {
    std::cerr << "litetopk: error: indexer " << args.algo << ": " << status.to_string() << '\n';
    return kExitFailure;
  }

  std::optional<bool> verified;
  std::vector<int64_t> checked;
  if (args.verify) {
    checked = verify_queries(spec.T);
    std::cout << "verifying queries";
    for (int64_t t : checked) std::cout << ' ' << t;
    std::cout << " against the CPU reference\n";
    IndexerRows rows;
    slice_indexer_rows(workload, checked, &rows);
    std::string mismatch = verify_rows(workload, rows, args.tol_rel, run.indices.data());
    if (mismatch.empty() && !run.warm_indices.empty()) {
      mismatch = verify_rows(workload, rows, args.tol_rel, run.warm_indices.data());
      if (!mismatch.empty()) mismatch = "with a warm state: " + mismatch;
    }
    verified = mismatch.empty();
    if (!mismatch.empty()) std::cerr << "litetopk: verification FAILED: " << mismatch << '\n';
  }

  const double ms = run.timing.median_ms;
  const double tflops = ms > 0 ? workload.flops() / (ms * 1e-3) / 1e12 : 0.0;
  const double logits_bytes = static_cast<double>(spec.T) * static_cast<double>(spec.S) * 4.0;
  const double aux_ratio = static_cast<double>(run.workspace_bytes) / logits_bytes;
  const bool timed = args.bench.enabled;
  const auto when_timed = [&](const std::string& text) { return timed ? text : "-"; };
  const std::string algo_label = args.algo == run.algo ? run.algo : args.algo + " -> " + run.algo;
  Table table({"shape", "ranges", "algo", "ms", "min ms", "TFLOP/s", "% FP8 peak", "aux MB",
               "aux / T*S*4", "exact"},
              3);
  table.add_row({shape, indexer_ranges_name(spec.ranges), algo_label, when_timed(fixed(ms, 3)),
                 when_timed(fixed(run.timing.min_ms, 3)),
                 when_timed(fixed(tflops, tflops < 10 ? 3 : 1)),
                 when_timed(on_cpu ? "-" : fixed(100.0 * tflops / kFp8PeakTflops, 1)),
                 on_cpu ? "-" : fixed(static_cast<double>(run.workspace_bytes) / 1e6, 1),
                 on_cpu ? "-" : fixed(aux_ratio, 4),
                 verified ? (*verified ? "yes" : "NO") : "not checked"});
  std::cout << '\n';
  table.print(std::cout);

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
        {"verified", verified ? Json(*verified) : Json()},  // null: not checked
        {"verified_queries", checked},
        {"tol_rel", args.tol_rel},
    };
    if (Status s = write_json_file(args.json_path, record); !s) {
      std::cerr << "litetopk: error: " << s.to_string() << '\n';
      return kExitFailure;
    }
    std::cout << "wrote " << args.json_path << '\n';
  }
  return verified.value_or(true) ? kExitOk : kExitFailure;
}

}  // namespace

void add_indexer_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<IndexerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "indexer", "DSA lightning indexer + top-k on generated fp8 inputs (D = 128)");
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  cmd->add_option("--T", args->T, "Queries (a prefill chunk)")
      ->required()
      ->check(CLI::Range(int64_t{1}, kMaxInt32));
  cmd->add_option("--S", args->S, "Keys (the context)")
      ->required()
      ->check(CLI::Range(int64_t{1}, kMaxInt32));
  cmd->add_option("--H", args->H, "Heads")->check(CLI::IsMember({32, 64}))->capture_default_str();
  cmd->add_option("--k", args->k, "Keys selected per query (1..8192)")
      ->check(CLI::Range(int64_t{1}, int64_t{8192}))
      ->capture_default_str();
  cmd->add_option("--ranges", args->ranges,
                  "causal: the queries are the last T of S tokens; full: every key; ragged: "
                  "random ranges, some shorter than k or empty")
      ->check(CLI::IsMember({"causal", "full", "ragged"}))
      ->capture_default_str();
  cmd->add_option("--algo", args->algo,
                  "GPU: auto (cost model), unfused (logits, then select), fused; cpu: the "
                  "reference")
      ->check(CLI::IsMember({"auto", "unfused", "fused", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--candidate-capacity", args->candidate_capacity,
                  "Fused kernel's candidate slots per query (0: the default)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  cmd->add_flag("--state", args->state,
                "Carry an IndexerState across runs: the first run starts cold, later ones reuse "
                "the hot sample of the previous run over the same chunk (optimistic)");
  cmd->add_option("--seed", args->seed, "Generator seed")->capture_default_str();
  cmd->add_flag("--verify", args->verify,
                "Check the first, middle and last queries (up to 7) against the CPU reference");
  cmd->add_option("--tol-rel", args->tol_rel,
                  "Relative score tolerance of --verify (see indexer_command.cpp)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_flag("--bench", args->bench.enabled, "Time it: median over --iters after --warmup");
  cmd->add_option("--iters", args->bench.iters, "Timed iterations")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", args->bench.warmup, "Untimed iterations first")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--json", args->json_path, "Write a JSON record to this file");
  cmd->callback([args, exit_code] { *exit_code = run_indexer(*args); });
}

}  // namespace litetopk::tools
