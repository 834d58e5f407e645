// `litetopk dsa` on the CPU (tools/dsa_runner.h, tools/dsa_command.cpp): the layer runs the
// references on a tiny causal chunk (rows short of k included) and its checks pass, its outputs
// are the references' own, dsa_run_error refuses what cannot run, and the command, parsed as
// main() parses it, runs, writes its JSON record and turns bad options into clear usage errors.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_path.h"
#include "testkit/dsa_verify.h"
#include "testkit/dsa_workload.h"
#include "tools/commands.h"
#include "tools/dsa_runner.h"

namespace litetopk::tools {
namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

DsaSpec tiny(int64_t h_q = 16) {
  DsaSpec spec;
  spec.T = 8;
  spec.S = 20;
  spec.h_q = h_q;
  spec.k = 16;  // the first queries see 13 .. 15 tokens: -1 padded rows
  spec.seed = 5;
  return spec;
}

TEST(DsaRunner, CpuLayerRunsTheReferencesAndPassesItsChecks) {
  const DsaWorkload w = make_dsa_workload(tiny());
  const DsaSpec& spec = w.spec;
  DsaRunOptions options;
  options.bench = {true, 1, 2};
  DsaRun run;
  const Status status = run_dsa_layer(w, options, &run);
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(run.indexer_algo, "cpu");
  EXPECT_EQ(run.attention_algo, "cpu");
  EXPECT_EQ(run.indexer_workspace_bytes, 0u);
  EXPECT_EQ(run.attention_workspace_bytes, 0u);
  EXPECT_GT(run.indexer.median_ms, 0.0);
  EXPECT_GT(run.attention.median_ms, 0.0);
  EXPECT_GE(run.layer.median_ms, run.layer.min_ms);
  EXPECT_GT(run.layer.min_ms, 0.0);
  ASSERT_EQ(run.indices.size(), size(spec.T * spec.k));
  ASSERT_EQ(run.out.size(), size(spec.T * spec.h_q * spec.d_v));
  ASSERT_EQ(run.lse.size(), size(spec.T * spec.h_q));

  const DsaChecker checker(w);
  EXPECT_EQ(checker.check_indices(run.indices.data()), "");
  EXPECT_EQ(checker.check_attention(run.indices.data(), run.out.data(), run.max_logits.data(),
                                    run.lse.data()),
            "");

  // Causal rows: min(k, visible) distinct visible tokens, then -1.
  for (int64_t t = 0; t < spec.T; ++t) {
    const int64_t visible = spec.S - spec.T + t + 1;
    const int32_t* row = &run.indices[size(t * spec.k)];
    const int64_t count = std::min(spec.k, visible);
    std::vector<int32_t> tokens(row, row + count);
    std::sort(tokens.begin(), tokens.end());
    EXPECT_EQ(std::unique(tokens.begin(), tokens.end()), tokens.end()) << "query " << t;
    EXPECT_GE(tokens.front(), 0) << "query " << t;
    EXPECT_LT(tokens.back(), visible) << "query " << t;
    for (int64_t j = count; j < spec.k; ++j) EXPECT_EQ(row[j], -1) << "query " << t;
  }

  // The outputs are the references' own, bit for bit.
  std::vector<int32_t> indices(run.indices.size(), -2);
  IndexerProblem ip = w.indexer_problem();
  ip.indices = indices.data();
  ASSERT_TRUE(indexer_topk_cpu(ip).is_ok());
  EXPECT_EQ(indices, run.indices);
  std::vector<uint16_t> out(run.out.size());
  std::vector<float> max_logits(run.max_logits.size()), lse(run.lse.size());
  SparseAttentionProblem ap = w.attention_problem(indices.data());
  ap.out = out.data();
  ap.max_logits = max_logits.data();
  ap.lse = lse.data();
  ASSERT_TRUE(sparse_attention_cpu(ap).is_ok());
  EXPECT_EQ(out, run.out);
  EXPECT_EQ(max_logits, run.max_logits);
  EXPECT_EQ(lse, run.lse);

  // Neighbours in a causal chunk share tokens: the union of 4 rows is smaller than their sum.
  EXPECT_EQ(dsa_union_group(spec), 4);
  const double reuse = dsa_union_reuse(spec, run.indices.data());
  EXPECT_GT(reuse, 1.0);
  EXPECT_LE(reuse, 4.0);
}

TEST(DsaRunner, WithoutBenchOneUntimedRun) {
  const DsaWorkload w = make_dsa_workload(tiny(128));
  DsaRunOptions options;
  options.bench.enabled = false;
  DsaRun run;
  ASSERT_TRUE(run_dsa_layer(w, options, &run).is_ok());
  EXPECT_EQ(run.layer.median_ms, 0.0);
  EXPECT_EQ(run.indexer.median_ms, 0.0);
  const DsaChecker checker(w);
  EXPECT_EQ(checker.check_indices(run.indices.data()), "");
  EXPECT_EQ(checker.check_attention(run.indices.data(), run.out.data(), run.max_logits.data(),
                                    run.lse.data()),
            "");
  EXPECT_EQ(dsa_union_group(w.spec), 0);
  EXPECT_EQ(dsa_union_reuse(w.spec, run.indices.data()), 0.0);
}

TEST(DsaRunner, RunErrorsNameWhatCannotRun) {
  DsaRunOptions cpu;
  EXPECT_EQ(dsa_run_error(tiny(), cpu), "");
  cpu.indexer_algo = IndexerAlgo::kFused;
  EXPECT_NE(dsa_run_error(tiny(), cpu).find("indexer algorithm fused is a GPU kernel"),
            std::string::npos);
  cpu.indexer_algo = IndexerAlgo::kAuto;
  cpu.attention_algo = SparseAttentionAlgo::kPlain;
  EXPECT_NE(dsa_run_error(tiny(), cpu).find("attention algorithm plain is a GPU kernel"),
            std::string::npos);

  DsaRunOptions gpu;
  gpu.on_gpu = true;
  gpu.attention_algo = SparseAttentionAlgo::kUnionPacked;
  EXPECT_EQ(dsa_run_error(tiny(16), gpu), "");
  EXPECT_EQ(dsa_run_error(tiny(32), gpu), "");
  EXPECT_NE(dsa_run_error(tiny(64), gpu).find("union-packed needs h_q 16 or 32"),
            std::string::npos);
  DsaSpec long_rows = tiny(16);
  long_rows.k = 4096;  // (64 / 16) * 4096 > 8192
  EXPECT_NE(dsa_run_error(long_rows, gpu).find("union-packed needs"), std::string::npos);
  long_rows.h_q = 32;  // (64 / 32) * 4096 = 8192
  EXPECT_EQ(dsa_run_error(long_rows, gpu), "");
  for (SparseAttentionAlgo algo : {SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kPerQuery,
                                   SparseAttentionAlgo::kPlain}) {
    gpu.attention_algo = algo;
    EXPECT_EQ(dsa_run_error(tiny(64), gpu), "") << sparse_attention_algo_name(algo);
  }
}

// `litetopk dsa <args>` as main() parses it: the exit code, kExitUsage for a parse or usage
// error (its message in *error); the command's stdout in *printed.
int run_command(const std::vector<std::string>& args, std::string* error,
                std::string* printed = nullptr) {
  CLI::App app;
  app.require_subcommand(1);
  int exit_code = -1;
  add_dsa_command(app, &exit_code);
  std::vector<const char*> argv = {"litetopk", "dsa"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  ::testing::internal::CaptureStdout();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    exit_code = kExitUsage;
    *error = e.what();
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  if (printed != nullptr) *printed = out;
  return exit_code;
}

TEST(DsaCommand, RunsOnTheCpuAndWritesJson) {
  const std::string json_path = testing::test_temp_path("litetopk_dsa_command_test", ".json");
  std::string error, printed;
  const int code = run_command({"--device", "cpu", "--tokens", "8", "--context", "20", "--topk",
                                "16", "--heads", "32", "--indexer-heads", "32", "--iters", "2",
                                "--json", json_path},
                               &error, &printed);
  ASSERT_EQ(code, kExitOk) << error << printed;
  EXPECT_NE(printed.find("indexer_topk_cpu then sparse_attention_cpu"), std::string::npos);
  EXPECT_NE(printed.find("yes (8 queries)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("layer"), std::string::npos);

  std::ifstream file(json_path);
  ASSERT_TRUE(file.good()) << json_path;
  const nlohmann::json record = nlohmann::json::parse(file);
  EXPECT_EQ(record["tool"], "litetopk dsa");
  EXPECT_EQ(record["backend"], "cpu");
  EXPECT_EQ(record["T"], 8);
  EXPECT_EQ(record["S"], 20);
  EXPECT_EQ(record["h_q"], 32);
  EXPECT_EQ(record["H"], 32);
  EXPECT_EQ(record["k"], 16);
  EXPECT_EQ(record["iters"], 2);
  EXPECT_EQ(record["warmup"], 0);
  EXPECT_EQ(record["attended_pairs"], dsa_attention_pairs(tiny(32)));
  EXPECT_EQ(record["verified"], true);
  EXPECT_EQ(record["indexer_checked_queries"].size(), 8u);
  EXPECT_GT(record["layer"]["ms_median"].get<double>(), 0.0);
  EXPECT_TRUE(record["layer"]["workspace_bytes"].is_null());
  EXPECT_EQ(record["union_group"], 2);
  std::remove(json_path.c_str());
}

TEST(DsaCommand, BadOptionsAreClearUsageErrors) {
  const std::vector<std::string> small = {"--tokens", "8", "--context", "20", "--topk", "16"};
  const auto with_small = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return args;
  };
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--device", "cpu", "--tokens", "8", "--context", "4"},
       "--context (4) must be >= --tokens (8)"},
      {with_small({"--device", "cpu", "--heads", "48"}), "48 not in"},
      {with_small({"--device", "cpu", "--indexer-heads", "16"}), "16 not in"},
      {{"--device", "cpu", "--topk", "9000"}, "9000 not in range"},
      {{"--device", "cpu", "--tokens", "0"}, "not in range"},
      {with_small({"--device", "tpu"}), "tpu not in"},
      {with_small({"--device", "cpu", "--algo", "fast"}), "fast not in"},
      {with_small({"--device", "cpu", "--algo", "plain"}),
       "--algo plain picks a GPU kernel, but --device cpu runs the CPU references"},
      {with_small({"--device", "cpu", "--indexer-algo", "fused"}),
       "--indexer-algo fused picks a GPU kernel, but --device cpu runs the CPU references"},
      // Checked before any GPU is needed: the same error with or without one.
      {{"--device", "gpu", "--heads", "64", "--algo", "union-packed"},
       "union-packed needs h_q 16 or 32"},
      {{"--device", "gpu", "--heads", "16", "--topk", "4096", "--algo", "union-packed"},
       "(64 / h_q) * topk <= 8192"},
  };
  for (const auto& c : cases) {
    std::string joined;
    for (const std::string& arg : c.args) joined += ' ' + arg;
    std::string error;
    EXPECT_EQ(run_command(c.args, &error), kExitUsage) << joined;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << "dsa" << joined << ": " << error << " (expected " << c.message << ")";
  }
}

}  // namespace
}  // namespace litetopk::tools
