// The C API (liblitetopk_c.so, what ctypes bindings load): the CPU entry points agree with the C++
// API, flags map to the options, errors come back as codes with a message, nothing throws.
#include "litetopk/c_api.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/select_testing.h"

namespace litetopk::testing {
namespace {

litetopk_select_problem c_problem(const SelectProblem& p, uint32_t flags) {
  litetopk_select_problem c{};
  c.scores = p.scores;
  c.dtype = static_cast<int32_t>(p.dtype);
  c.batch = p.batch;
  c.n = p.n;
  c.row_stride = p.row_stride;
  c.row_starts = p.row_starts;
  c.row_ends = p.row_ends;
  c.k = p.k;
  c.flags = flags;
  c.indices = p.indices;
  c.values = p.values;
  return c;
}

TEST(CApi, SelectCpuMatchesTheCppApiForEveryFlag) {
  for (uint32_t flags = 0; flags < 8; ++flags) {  // smallest, sorted, deterministic
    SelectCase c;
    c.name = "CApi";
    c.batch = 3;
    c.n = 5000;
    c.k = 40;
    c.pattern = Pattern::kTiesAtKth;
    c.with_ranges = true;
    c.largest = (flags & LITETOPK_SMALLEST) == 0;
    c.sorted = (flags & LITETOPK_SORTED) != 0;
    c.deterministic = (flags & LITETOPK_DETERMINISTIC) != 0;
    const HostRows rows = make_rows(c);
    HostResult ref;
    ASSERT_TRUE(run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref).is_ok());
    std::vector<int32_t> indices(static_cast<std::size_t>(c.batch * c.k), 0x5a5a5a5a);
    std::vector<float> values(indices.size());
    const litetopk_select_problem problem =
        c_problem(make_problem(c, rows, indices.data(), values.data()), flags);
    ASSERT_EQ(litetopk_select_topk_cpu(&problem, LITETOPK_CPU_FAST, 2), LITETOPK_OK)
        << litetopk_last_error();
    EXPECT_STREQ(litetopk_last_error(), "");
    EXPECT_TRUE(check_selection(c, rows, indices.data(), values.data(), ref.indices.data(),
                                ref.values.data()))
        << "flags " << flags;
  }
}

TEST(CApi, ErrorsAreCodesWithMessages) {
  EXPECT_EQ(litetopk_select_topk_cpu(nullptr, LITETOPK_CPU_FAST, 0), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("problem"), std::string::npos);

  float scores[8] = {};
  int32_t indices[2] = {};
  litetopk_select_problem problem{};
  problem.scores = scores;
  problem.dtype = LITETOPK_FLOAT32;
  problem.batch = 1;
  problem.n = 8;
  problem.k = 0;
  problem.indices = indices;
  EXPECT_EQ(litetopk_select_topk_cpu(&problem, LITETOPK_CPU_FAST, 0), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("k must be"), std::string::npos);
  problem.k = 2;
  EXPECT_EQ(litetopk_select_topk_cpu(&problem, 7, 0), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("cpu_algo"), std::string::npos);
  problem.dtype = 9;
  EXPECT_EQ(litetopk_select_topk_cpu(&problem, LITETOPK_CPU_FAST, 0), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("dtype"), std::string::npos);
  problem.dtype = LITETOPK_FLOAT32;
  EXPECT_EQ(litetopk_select_topk_cpu(&problem, LITETOPK_CPU_FAST, 0), LITETOPK_OK);
  EXPECT_STREQ(litetopk_last_error(), "");
  EXPECT_NE(std::strlen(litetopk_version()), 0u);
}

TEST(CApi, IndexerOptionsAreCheckedBeforeAnyDeviceWork) {
  std::vector<uint8_t> q(2 * 32 * 128, 0x38), kv(10 * 128, 0x38);  // 1.0 in e4m3
  std::vector<float> scale(10, 1.0f), weights(2 * 32, 1.0f);
  std::vector<int32_t> ks = {0, 0}, ke = {10, 5}, indices(2 * 4);
  litetopk_indexer_problem problem{};
  problem.q = q.data();
  problem.kv = kv.data();
  problem.kv_scale = scale.data();
  problem.weights = weights.data();
  problem.ks = ks.data();
  problem.ke = ke.data();
  problem.num_queries = 2;
  problem.num_heads = 32;
  problem.head_dim = 128;
  problem.num_keys = 10;
  problem.k = 4;
  problem.indices = indices.data();
  ASSERT_EQ(litetopk_indexer_topk_cpu(&problem), LITETOPK_OK) << litetopk_last_error();
  for (int32_t index : indices) EXPECT_GE(index, 0);  // all scores tie: any 4 of the range
  std::size_t bytes = 0;
  EXPECT_EQ(litetopk_indexer_topk_workspace_size(&problem, LITETOPK_INDEXER_AUTO, 5, &bytes),
            LITETOPK_UNSUPPORTED);
  EXPECT_NE(std::string(litetopk_last_error()).find("candidate_capacity"), std::string::npos);
  EXPECT_EQ(litetopk_indexer_topk_workspace_size(&problem, 9, 0, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  problem.num_heads = 48;
  EXPECT_EQ(litetopk_indexer_topk_cpu(&problem), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("num_heads"), std::string::npos);
}

}  // namespace
}  // namespace litetopk::testing
