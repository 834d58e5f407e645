// The `litetopk` command line as a user meets it (tools/cli.h, run as main() runs it): a usage
// message without arguments, --version, "unknown subcommand", options that name themselves when
// malformed, every subcommand on --device cpu with its defaults, --device auto falling back to
// the CPU the same way in each (indexer and indexer --paged too), --device gpu without a GPU
// naming --device, JSON records that report the algorithm asked for, sizes beyond the machine's
// memory named by their options, and stdout flushed line by line into a pipe.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/temp_path.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/environment.h"

namespace litetopk::tools {
namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

// `litetopk <args>` through run_cli, its stdout and stderr captured.
Outcome run(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"litetopk"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  Outcome outcome;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  outcome.code = run_cli(static_cast<int>(argv.size()), argv.data());
  outcome.err = ::testing::internal::GetCapturedStderr();
  outcome.out = ::testing::internal::GetCapturedStdout();
  return outcome;
}

std::string joined(const std::vector<std::string>& args) {
  std::string text = "litetopk";
  for (const std::string& arg : args) text += ' ' + arg;
  return text;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliConvention, NoArgumentsPrintsTheUsage) {
  const Outcome o = run({});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_TRUE(has(o.err, "a subcommand is required (info, select, indexer, decode, dsa, demo, "
                         "retrieval)"))
      << o.err;
  EXPECT_TRUE(has(o.err, "Usage:")) << o.err;
}

TEST(CliConvention, VersionPrintsTheVersion) {
  const Outcome o = run({"--version"});
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_TRUE(has(o.out, std::string("litetopk ") + build_info().version + " (CUDA backend: "))
      << o.out;
}

TEST(CliConvention, UnknownSubcommandIsNamed) {
  const Outcome o = run({"selectt", "--k", "4"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_TRUE(has(o.err, "unknown subcommand 'selectt'")) << o.err;
  EXPECT_TRUE(has(o.err, "info, select, indexer, decode, dsa, demo")) << o.err;
}

TEST(CliConvention, MalformedNumbersNameTheOption) {
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"select", "--n", "abc"}, "--n: expected an integer, got 'abc'"},
      {{"select", "--k", "2.5"}, "--k: expected an integer, got '2.5'"},
      {{"select", "--batch", "0"}, "--batch: Value 0 not in range"},
      {{"indexer", "--T", "x"}, "--T: expected an integer, got 'x'"},
      {{"indexer", "--tol-rel", "tight"}, "--tol-rel: expected a number, got 'tight'"},
      {{"indexer", "--paged", "--next-n", "many"}, "--next-n: expected an integer, got 'many'"},
      {{"decode", "--context", "1e5"}, "--context: expected an integer, got '1e5'"},
      {{"dsa", "--topk", "abc"}, "--topk: expected an integer, got 'abc'"},
      {{"dsa", "--iters", "-1"}, "--iters: Value -1 not in range"},
      {{"select", "--iters", "abc"}, "--iters: expected an integer, got 'abc'"},
      {{"decode", "--warmup", "few"}, "--warmup: expected an integer, got 'few'"},
      {{"select", "--device", "tpu"}, "--device: tpu not in {auto,gpu,cpu}"},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_EQ(o.code, kExitUsage) << joined(c.args);
    EXPECT_TRUE(has(o.err, c.message)) << joined(c.args) << ": " << o.err;
  }
}

// Each subcommand with --device cpu and its defaults (the demo with --quick), as a new user
// would first try it.
TEST(CliConvention, EverySubcommandRunsOnTheCpuWithItsDefaults) {
  const std::vector<std::vector<std::string>> commands = {
      {"info", "--device", "cpu"},    {"select", "--device", "cpu", "--verify"},
      {"indexer", "--device", "cpu", "--verify"},
      {"indexer", "--paged", "--device", "cpu", "--verify"},
      {"decode", "--device", "cpu"},  {"dsa", "--device", "cpu"},
  };
  for (const auto& args : commands) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, kExitOk) << joined(args) << ":\n" << o.out << o.err;
  }
}

// --device auto (the default) without a GPU: every command falls back to the CPU and says so.
TEST(CliConvention, DeviceAutoFallsBackToTheCpuInEveryCommand) {
  if (probe_gpu().available) GTEST_SKIP() << "a GPU is present: auto runs on it";
  const std::vector<std::vector<std::string>> commands = {
      {"select", "--batch", "4", "--n", "1000", "--k", "8", "--verify"},
      {"indexer", "--T", "8", "--S", "300", "--k", "16", "--verify"},
      {"indexer", "--paged", "--batch", "2", "--context", "300", "--k", "16", "--verify"},
      {"decode", "--context", "1024"},
      {"dsa", "--tokens", "4", "--context", "64", "--topk", "16"},
  };
  for (const auto& args : commands) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, kExitOk) << joined(args) << ":\n" << o.out << o.err;
    EXPECT_TRUE(has(o.out, "device auto: the CPU (no GPU: ")) << joined(args) << ":\n" << o.out;
  }
}

TEST(CliConvention, DeviceGpuWithoutAGpuNamesDevice) {
  if (probe_gpu().available) GTEST_SKIP() << "a GPU is present";
  const std::vector<std::vector<std::string>> commands = {
      {"info", "--device", "gpu"},    {"select", "--device", "gpu"},
      {"indexer", "--device", "gpu"}, {"indexer", "--paged", "--device", "gpu"},
      {"decode", "--device", "gpu"},  {"dsa", "--device", "gpu"},
      {"demo", "--device", "gpu"},
  };
  for (const auto& args : commands) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, kExitFailure) << joined(args);
    EXPECT_TRUE(has(o.err, "--device gpu, but there is no GPU")) << joined(args) << ": " << o.err;
    EXPECT_FALSE(has(o.err, "--algo")) << joined(args) << ": " << o.err;
  }
}

TEST(CliConvention, AlgorithmAndDeviceContradictions) {
  const struct {
    std::vector<std::string> args;
    int code;
    std::string message;
  } cases[] = {
      {{"select", "--device", "cpu", "--algo", "radix"}, kExitUsage,
       "--algo radix is a GPU kernel, but --device cpu runs on the CPU"},
      {{"select", "--device", "gpu", "--algo", "cpu"}, kExitUsage,
       "--algo cpu runs on the CPU, but --device gpu asks for the GPU"},
      {{"indexer", "--device", "cpu", "--algo", "fused"}, kExitUsage,
       "--algo fused is a GPU kernel, but --device cpu runs on the CPU"},
      {{"indexer", "--paged", "--device", "cpu", "--algo", "unfused"}, kExitUsage,
       "--algo unfused is a GPU kernel, but --device cpu runs on the CPU"},
      {{"indexer", "--device", "cpu", "--state"}, kExitUsage, "--state"},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_EQ(o.code, c.code) << joined(c.args);
    EXPECT_TRUE(has(o.err, c.message)) << joined(c.args) << ": " << o.err;
  }
  if (!probe_gpu().available) {
    const Outcome o = run({"indexer", "--algo", "fused"});
    EXPECT_EQ(o.code, kExitFailure);
    EXPECT_TRUE(has(o.err, "--algo fused needs a GPU, but there is none")) << o.err;
  }
}

nlohmann::json run_json(std::vector<std::string> args) {
  const std::string path = testing::test_temp_path("litetopk_cli_convention_test", ".json");
  std::remove(path.c_str());
  args.push_back("--json");
  args.push_back(path);
  const Outcome o = run(args);
  EXPECT_EQ(o.code, kExitOk) << joined(args) << ":\n" << o.out << o.err;
  std::ifstream file(path);
  if (!file.good()) return nlohmann::json();
  nlohmann::json record = nlohmann::json::parse(file);
  std::remove(path.c_str());
  return record;
}

TEST(CliConvention, JsonReportsTheAlgorithmAskedFor) {
  const nlohmann::json select =
      run_json({"select", "--device", "cpu", "--batch", "2", "--n", "100", "--k", "4"});
  EXPECT_EQ(select["algo_requested"], "auto");
  EXPECT_EQ(select["algo"], "cpu");
  EXPECT_EQ(select["backend"], "cpu");
  const nlohmann::json cpu_reference = run_json(
      {"select", "--batch", "2", "--n", "100", "--k", "4", "--algo", "cpu-reference"});
  EXPECT_EQ(cpu_reference["algo_requested"], "cpu-reference");
  const nlohmann::json indexer =
      run_json({"indexer", "--device", "cpu", "--T", "4", "--S", "100", "--k", "8"});
  EXPECT_EQ(indexer["algo_requested"], "auto");
  EXPECT_EQ(indexer["backend"], "cpu");
  const nlohmann::json paged = run_json(
      {"indexer", "--paged", "--device", "cpu", "--batch", "2", "--context", "100", "--k", "8"});
  EXPECT_EQ(paged["algo_requested"], "auto");
  EXPECT_EQ(paged["backend"], "cpu");
  const nlohmann::json dsa =
      run_json({"dsa", "--device", "cpu", "--tokens", "4", "--context", "64", "--topk", "16"});
  EXPECT_EQ(dsa["indexer_algo_requested"], "auto");
  EXPECT_EQ(dsa["attention_algo_requested"], "auto");
  EXPECT_EQ(dsa["indexer_algo"], "cpu");
}

// --graphs times the paged indexer's GPU paths as CUDA graph replays: it needs --paged, and the
// CPU reference says it runs plain calls (its record: "graphs" false).
TEST(CliConvention, PagedGraphsNeedPagedAndSayWhatTheCpuTimes) {
  const Outcome prefill = run({"indexer", "--device", "cpu", "--graphs"});
  EXPECT_EQ(prefill.code, kExitUsage);
  EXPECT_NE(prefill.err.find("--graphs"), std::string::npos) << prefill.err;
  const Outcome cpu = run({"indexer", "--paged", "--device", "cpu", "--batch", "1", "--context",
                           "64", "--k", "8", "--bench", "--iters", "1", "--warmup", "0",
                           "--graphs"});
  EXPECT_EQ(cpu.code, kExitOk) << cpu.err;
  EXPECT_NE(cpu.out.find("--graphs: the CPU reference is timed as plain calls"),
            std::string::npos)
      << cpu.out;
  const nlohmann::json record =
      run_json({"indexer", "--paged", "--device", "cpu", "--batch", "1", "--context", "64",
                "--k", "8", "--bench", "--iters", "1", "--warmup", "0", "--graphs"});
  EXPECT_EQ(record["graphs"], false);
}

TEST(CliConvention, SizesBeyondMemoryNameTheirOptions) {
  const std::string max = "2147483647";
  const struct {
    std::vector<std::string> args;
    std::vector<std::string> named;
  } cases[] = {
      {{"select", "--device", "cpu", "--batch", max, "--n", max}, {"[--batch x --n]"}},
      {{"select", "--device", "cpu", "--batch", "100000", "--k", max}, {"[--batch x --k]"}},
      {{"indexer", "--device", "cpu", "--T", max, "--S", max}, {"[--T x --H x D]", "[--S x D]"}},
      {{"indexer", "--paged", "--device", "cpu", "--batch", max, "--context", max},
       {"[--batch x --context tokens x (D + 4)]"}},
      {{"decode", "--device", "cpu", "--batch", max, "--context", max},
       {"[--batch x --kv-heads x --context x 128]"}},
      {{"dsa", "--device", "cpu", "--tokens", max, "--context", max},
       {"[--tokens x --indexer-heads x 128]", "[--context x 576]"}},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_EQ(o.code, kExitFailure) << joined(c.args);
    EXPECT_TRUE(has(o.err, "of host memory, more than the")) << joined(c.args) << ": " << o.err;
    EXPECT_TRUE(has(o.err, " bytes)")) << joined(c.args) << ": " << o.err;
    for (const std::string& name : c.named) {
      EXPECT_TRUE(has(o.err, name)) << joined(c.args) << ": " << o.err << " (expected " << name
                                    << ")";
    }
    EXPECT_FALSE(has(o.err, "bad_alloc")) << o.err;
    EXPECT_FALSE(has(o.err, "_M_default_append")) << o.err;
  }
}

// The built `litetopk` next to this test's executable, run through a pipe (stdout and stderr
// into it): a line printed before a late error arrives before that error, so stdout is flushed
// line by line, not at exit.
TEST(CliConvention, StdoutIsLineBufferedIntoAPipe) {
  std::array<char, 4096> self{};
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  ASSERT_GT(length, 0);
  std::string dir(self.data(), static_cast<std::size_t>(length));
  dir = dir.substr(0, dir.rfind('/'));
  const std::string binary = dir + "/litetopk";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << binary;
  const std::string command = binary +
                              " select --device cpu --batch 2 --n 50 --k 4 --json "
                              "/nonexistent-litetopk-dir/out.json 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe) << command;
  std::string output;
  std::array<char, 512> chunk{};
  while (std::fgets(chunk.data(), static_cast<int>(chunk.size()), pipe.get()) != nullptr) {
    output += chunk.data();
  }
  const std::size_t generating = output.find("generating 2x50 k=4");
  const std::size_t error = output.find("cannot write the JSON file");
  ASSERT_NE(generating, std::string::npos) << output;
  ASSERT_NE(error, std::string::npos) << output;
  EXPECT_LT(generating, error) << output;
}

}  // namespace
}  // namespace litetopk::tools
