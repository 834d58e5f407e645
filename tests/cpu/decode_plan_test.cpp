// sparse_decode_plan / dense_decode_plan and their launches on the host: a plan needs only shapes
// (no array), errors name the argument, a failed plan does not look planned, and a launch checks
// the addresses (and refuses a plan that was never made) before anything reaches a device.
#include <gtest/gtest.h>

#include <string>

#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

SparseDecodeProblem sparse_shapes() {
  SparseDecodeProblem p;  // no arrays
  p.cache.batch = 2;
  p.cache.num_kv_heads = 2;
  p.cache.max_blocks = 4;
  p.num_q_heads = 8;
  return p;
}

DenseDecodeProblem dense_shapes() {
  DenseDecodeProblem p;
  p.cache.batch = 2;
  p.cache.num_kv_heads = 2;
  p.cache.capacity = 512;
  p.num_q_heads = 8;
  return p;
}

void expect_named(const Status& status, const char* mention) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find(mention), std::string::npos)
      << "message \"" << status.message() << "\" does not name " << mention;
}

TEST(DecodePlan, SparseShapesChecked) {
  SparseDecodePlan plan;
  SparseDecodeProblem p = sparse_shapes();
  p.cache.block_size = 64;
  expect_named(sparse_decode_plan(p, {}, &plan), "block_size must be 128 or 256");
  EXPECT_FALSE(plan.planned);
  p = sparse_shapes();
  p.delta = -1.0f;
  expect_named(sparse_decode_plan(p, {}, &plan), "delta must be >= 0");
  p = sparse_shapes();
  p.num_q_heads = 7;
  expect_named(sparse_decode_plan(p, {}, &plan), "num_q_heads");
  DecodeOptions options;
  options.blocks_per_split = -2;
  expect_named(sparse_decode_plan(sparse_shapes(), options, &plan), "blocks_per_split");
  expect_named(sparse_decode_plan(sparse_shapes(), {}, nullptr), "plan");
}

TEST(DecodePlan, DenseShapesChecked) {
  DenseDecodePlan plan;
  DenseDecodeProblem p = dense_shapes();
  p.cache.head_dim = 64;
  expect_named(dense_decode_plan(p, {}, &plan), "head_dim must be 128");
  EXPECT_FALSE(plan.planned);
  p = dense_shapes();
  p.softmax_scale = -1.0f;
  expect_named(dense_decode_plan(p, {}, &plan), "softmax_scale");
}

TEST(DecodePlan, LaunchChecksAddressesAndPlan) {
  expect_named(sparse_decode_launch(SparseDecodePlan{}, {}, nullptr, nullptr),
               "sparse_decode_plan");
  expect_named(dense_decode_launch(DenseDecodePlan{}, {}, nullptr, nullptr), "dense_decode_plan");
  SparseDecodePlan sparse;
  ASSERT_TRUE(sparse_decode_plan(sparse_shapes(), {}, &sparse).is_ok());
  EXPECT_TRUE(sparse.planned);
  EXPECT_FALSE(sparse.paged);
  expect_named(sparse_decode_launch(sparse, {}, nullptr, nullptr), "cache.lengths");
  DenseDecodePlan dense;
  ASSERT_TRUE(dense_decode_plan(dense_shapes(), {}, &dense).is_ok());
  expect_named(dense_decode_launch(dense, {}, nullptr, nullptr), "cache.lengths");
}

}  // namespace
}  // namespace litetopk
