// The C API's dsa_prefill (liblitetopk_c.so): the struct carries every field (the C and C++ CPU
// calls give identical results), and errors come back as codes with the DSA problem's names.
#include "litetopk/c_api.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/dsa.h"
#include "testkit/dsa_workload.h"
#include "tools/dsa_runner.h"

namespace litetopk {
namespace {

litetopk_dsa_prefill_problem c_problem(const DsaPrefillProblem& p) {
  litetopk_dsa_prefill_problem c{};
  c.index_q = p.index_q;
  c.index_kv = p.index_kv;
  c.index_kv_scale = p.index_kv_scale;
  c.index_weights = p.index_weights;
  c.ks = p.ks;
  c.ke = p.ke;
  c.num_queries = p.num_queries;
  c.num_keys = p.num_keys;
  c.index_heads = p.index_heads;
  c.index_head_dim = p.index_head_dim;
  c.k = p.k;
  c.q = p.q;
  c.kv = p.kv;
  c.h_q = p.h_q;
  c.d_qk = p.d_qk;
  c.d_v = p.d_v;
  c.sm_scale = p.sm_scale;
  c.out = p.out;
  c.max_logits = p.max_logits;
  c.lse = p.lse;
  c.indices = p.indices;
  return c;
}

struct Outputs {
  std::vector<int32_t> indices;
  std::vector<uint16_t> out;
  std::vector<float> max_logits, lse;
};

DsaPrefillProblem with_outputs(DsaPrefillProblem p, const testkit::DsaSpec& spec, Outputs* o) {
  o->indices.assign(static_cast<std::size_t>(spec.T * spec.k), 7);
  o->out.assign(static_cast<std::size_t>(spec.T * spec.h_q * spec.d_v), 7);
  o->max_logits.assign(static_cast<std::size_t>(spec.T * spec.h_q), 7.0f);
  o->lse = o->max_logits;
  p.indices = o->indices.data();
  p.out = o->out.data();
  p.max_logits = o->max_logits.data();
  p.lse = o->lse.data();
  return p;
}

testkit::DsaWorkload small_workload() {
  testkit::DsaSpec spec;
  spec.T = 8;
  spec.S = 40;
  spec.k = 16;
  spec.h_q = 16;
  spec.H = 32;
  spec.seed = 9;
  testkit::DsaWorkload w = testkit::make_dsa_workload(spec);
  w.indexer.ks[3] = 20;  // a range past 0: the offset shows in the kv rows
  return w;
}

TEST(DsaCApi, CpuMatchesTheCppApi) {
  const testkit::DsaWorkload w = small_workload();
  Outputs cpp, c;
  const DsaPrefillProblem p = tools::dsa_prefill_problem(w);
  ASSERT_TRUE(dsa_prefill_cpu(with_outputs(p, w.spec, &cpp)).is_ok());
  const litetopk_dsa_prefill_problem cp = c_problem(with_outputs(p, w.spec, &c));
  ASSERT_EQ(litetopk_dsa_prefill_cpu(&cp), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(c.indices, cpp.indices);
  EXPECT_EQ(c.out, cpp.out);
  EXPECT_EQ(c.max_logits, cpp.max_logits);
  EXPECT_EQ(c.lse, cpp.lse);
}

TEST(DsaCApi, ErrorsAreCodesNamingTheArgument) {
  EXPECT_EQ(litetopk_dsa_prefill_cpu(nullptr), LITETOPK_INVALID_ARGUMENT);
  const testkit::DsaWorkload w = small_workload();
  Outputs o;
  litetopk_dsa_prefill_problem cp =
      c_problem(with_outputs(tools::dsa_prefill_problem(w), w.spec, &o));
  cp.index_heads = 16;
  EXPECT_EQ(litetopk_dsa_prefill_cpu(&cp), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("index_heads must be 32 or 64"),
            std::string::npos)
      << litetopk_last_error();
  cp.index_heads = 32;
  std::size_t bytes = 0;
  EXPECT_EQ(litetopk_dsa_prefill_workspace_size(&cp, 9, LITETOPK_ATTENTION_AUTO, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("algo must be 0 (auto)"), std::string::npos)
      << litetopk_last_error();
  EXPECT_EQ(litetopk_dsa_prefill_workspace_size(&cp, LITETOPK_INDEXER_AUTO, 9, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("attention_algo must be a"),
            std::string::npos)
      << litetopk_last_error();
  EXPECT_EQ(litetopk_dsa_prefill(&cp, LITETOPK_INDEXER_AUTO, LITETOPK_ATTENTION_AUTO, nullptr, 4,
                                 nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("state_data is null but state_bytes is 4"),
            std::string::npos)
      << litetopk_last_error();
}

}  // namespace
}  // namespace litetopk
