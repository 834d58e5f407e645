// `litetopk retrieval` on the CPU (tools/retrieval_command.cpp) and the verifier its --verify
// uses (testkit/retrieval_verify.h): the defaults run and verify (read from the JSON record),
// bad options are usage errors, and the verifier catches wrong results.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_path.h"
#include "testkit/retrieval_verify.h"
#include "testkit/retrieval_workload.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace litetopk::tools {
namespace {

// `litetopk <args>` through run_cli, as main() runs it; the exit code.
int run(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"litetopk"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return run_cli(static_cast<int>(argv.size()), argv.data());
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `litetopk retrieval --device cpu --verify <args> --json <file>`: the record written.
nlohmann::json record_of(std::vector<std::string> args) {
  const std::string path = testing::test_temp_path("retrieval_command_test", ".json");
  args.insert(args.begin(), {"retrieval", "--device", "cpu", "--verify"});
  args.insert(args.end(), {"--json", path});
  EXPECT_EQ(run(args), kExitOk);
  std::ifstream in(path);
  nlohmann::json record = nlohmann::json::parse(in, nullptr, false);
  std::remove(path.c_str());
  return record;
}

TEST(RetrievalCommand, DefaultsRunAndVerifyOnTheCpu) {
  const nlohmann::json record = record_of({});
  EXPECT_EQ(record["tool"], "litetopk retrieval");
  EXPECT_EQ(record["batch"], 16);
  EXPECT_EQ(record["corpus"], 20000);
  EXPECT_EQ(record["dim"], 128);
  EXPECT_EQ(record["verified"], true);
}

TEST(RetrievalCommand, L2WithNormsBenchmarked) {
  const nlohmann::json record =
      record_of({"--batch", "3", "--corpus", "500", "--dim", "64", "--k", "600", "--metric", "l2",
                 "--norms", "--dtype", "bf16", "--workload", "anisotropic", "--sorted", "--bench",
                 "--iters", "2", "--warmup", "0"});
  EXPECT_EQ(record["metric"], "l2");
  EXPECT_EQ(record["dtype"], "bfloat16");
  EXPECT_EQ(record["k"], 600);
  EXPECT_EQ(record["verified"], true);
  EXPECT_GT(record["ms_median"].get<double>(), 0.0);
}

TEST(RetrievalCommand, Fp8CorpusWithABitmap) {
  const nlohmann::json record =
      record_of({"--batch", "4", "--corpus", "3000", "--dim", "96", "--k", "50", "--metric", "l2",
                 "--fp8-corpus", "--bitmap", "0.25", "--sorted"});
  EXPECT_EQ(record["corpus_format"], "fp8_e4m3");
  EXPECT_EQ(record["bitmap_allowed"], 0.25);
  EXPECT_EQ(record["verified"], true);
}

TEST(RetrievalCommand, BadOptionsAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"retrieval", "--dim", "72"},     {"retrieval", "--dim", "32"},
      {"retrieval", "--k", "8193"},     {"retrieval", "--metric", "dot"},
      {"retrieval", "--dtype", "fp32"}, {"retrieval", "--norms"},
      {"retrieval", "--bitmap", "1.5"},
  };
  for (const auto& args : cases) EXPECT_EQ(run(args), kExitUsage) << args[1];
}

TEST(RetrievalVerify, CatchesWrongResults) {
  testkit::RetrievalSpec spec;
  spec.batch = 2;
  spec.n = 100;
  spec.dim = 64;
  spec.k = 10;
  spec.kind = testkit::RetrievalKind::kNormal;
  spec.seed = 1;
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
  std::vector<int32_t> indices(20);
  std::vector<float> scores(20);
  RetrievalProblem p = w.host_problem();
  p.indices = indices.data();
  p.scores = scores.data();
  ASSERT_TRUE(retrieval_topk_cpu(p).is_ok());
  const auto compare = [&](const std::vector<int32_t>& got_i, const std::vector<float>& got_s) {
    return testkit::compare_retrieval(p, got_i.data(), got_s.data(), indices.data(),
                                      scores.data(), 1e-6f);
  };
  EXPECT_EQ(compare(indices, scores), "");
  std::vector<int32_t> repeated = indices;
  repeated[1] = repeated[0];
  EXPECT_TRUE(has(compare(repeated, scores), "query 0 slot 1")) << compare(repeated, scores);
  // The query's worst row in place of its 10th best.
  std::vector<float> all(100);
  int32_t worst = 0;
  for (int32_t c = 0; c < 100; ++c) {
    // Query 0's score of row c: its top 1 over the range [c, c + 1).
    RetrievalProblem one = p;
    one.batch = 1;
    one.k = 1;
    std::vector<int32_t> i1(1);
    std::vector<float> s1(1);
    std::vector<int32_t> start = {c}, end = {c + 1};
    one.range_starts = start.data();
    one.range_ends = end.data();
    one.indices = i1.data();
    one.scores = s1.data();
    ASSERT_TRUE(retrieval_topk_cpu(one).is_ok());
    all[c] = s1[0];
    if (all[c] < all[worst]) worst = c;
  }
  std::vector<int32_t> poor = indices;
  poor[9] = worst;
  EXPECT_TRUE(has(compare(poor, scores), "below the k-th best")) << compare(poor, scores);
  std::vector<float> shifted = scores;
  shifted[3] += 0.5f;
  EXPECT_TRUE(has(compare(indices, shifted), "query 0 slot 3: score")) << compare(indices, shifted);
  // A row the bitmap filters out.
  std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(spec.n, 1.0, 1);
  bitmap[static_cast<std::size_t>(indices[2] >> 3)] =
      static_cast<uint8_t>(bitmap[static_cast<std::size_t>(indices[2] >> 3)] & ~(1u << (indices[2] & 7)));
  p.corpus_bitmap = bitmap.data();
  EXPECT_TRUE(has(compare(indices, scores), "filtered out by the bitmap")) << compare(indices, scores);
}

}  // namespace
}  // namespace litetopk::tools
