// The C API (liblitetopk_c.so, what ctypes bindings load): the CPU entry points agree with the C++
// API, flags map to the options, errors come back as codes with a message, nothing throws; the
// sparse-decode, paged-indexer and sparse-attention structs carry every field (the C and C++
// calls give identical results), and the GPU calls validate before reaching the backend.
#include "litetopk/c_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/select_testing.h"
#include "common/sparse_decode_testing.h"
#include "litetopk/attention.h"
#include "litetopk/indexer.h"
#include "litetopk/sparse_decode.h"
#include "testkit/paged_indexer_workload.h"
#include "testkit/sparse_attention_workload.h"

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
  EXPECT_EQ(litetopk_indexer_topk_workspace_size(&problem, LITETOPK_INDEXER_AUTO, -1, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("candidate_capacity"), std::string::npos);
  EXPECT_EQ(litetopk_indexer_topk_workspace_size(&problem, 9, 0, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  problem.num_heads = 48;
  EXPECT_EQ(litetopk_indexer_topk_cpu(&problem), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("num_heads"), std::string::npos);
}

litetopk_paged_indexer_problem c_paged_problem(const PagedIndexerProblem& p) {
  litetopk_paged_indexer_problem c{};
  c.q = p.q;
  c.kv_cache = p.kv_cache;
  c.weights = p.weights;
  c.context_lens = p.context_lens;
  c.block_table = p.block_table;
  c.batch = p.batch;
  c.next_n = p.next_n;
  c.num_heads = p.num_heads;
  c.head_dim = p.head_dim;
  c.num_blocks = p.num_blocks;
  c.block_size = p.block_size;
  c.max_blocks = p.max_blocks;
  c.max_context = p.max_context;
  c.k = p.k;
  c.indices = p.indices;
  c.values = p.values;
  return c;
}

// Each row's (position, value) pairs, sorted: the order within a row is unspecified.
std::vector<std::vector<std::pair<int32_t, float>>> sorted_rows(const std::vector<int32_t>& indices,
                                                                const std::vector<float>& values,
                                                                int64_t k) {
  std::vector<std::vector<std::pair<int32_t, float>>> rows(indices.size() / k);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    rows[i / k].emplace_back(indices[i], indices[i] < 0 ? 0.0f : values[i]);
  }
  for (auto& row : rows) std::sort(row.begin(), row.end());
  return rows;
}

TEST(CApi, PagedIndexerCpuMatchesTheCppApi) {
  testkit::PagedIndexerSpec spec;
  spec.context_lens = {300, 0, 77, 2};
  spec.next_n = 3;
  spec.H = 32;
  spec.k = 40;
  spec.max_blocks = 7;
  spec.spare_blocks = 2;
  spec.seed = 41;
  const testkit::PagedIndexerWorkload w = testkit::make_paged_indexer_workload(spec);
  PagedIndexerProblem p = w.host_problem();
  p.max_context = 200;  // cuts request 0: a field the C struct must carry
  const std::size_t outputs = static_cast<std::size_t>(p.batch * p.next_n * p.k);
  std::vector<int32_t> cpp_indices(outputs), c_indices(outputs);
  std::vector<float> cpp_values(outputs), c_values(outputs);
  p.indices = cpp_indices.data();
  p.values = cpp_values.data();
  ASSERT_TRUE(indexer_topk_paged_cpu(p).is_ok());
  p.indices = c_indices.data();
  p.values = c_values.data();
  litetopk_paged_indexer_problem problem = c_paged_problem(p);
  ASSERT_EQ(litetopk_indexer_topk_paged_cpu(&problem), LITETOPK_OK) << litetopk_last_error();
  EXPECT_STREQ(litetopk_last_error(), "");
  EXPECT_EQ(sorted_rows(c_indices, c_values, p.k), sorted_rows(cpp_indices, cpp_values, p.k));
  for (int32_t index : c_indices) EXPECT_LT(index, 200);

  EXPECT_EQ(litetopk_indexer_topk_paged_cpu(nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("problem"), std::string::npos);
  problem.next_n = 5;
  EXPECT_EQ(litetopk_indexer_topk_paged_cpu(&problem), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("next_n must be in [1, 4], got 5"),
            std::string::npos);
}

TEST(CApi, PagedIndexerLogitsCpuMatchTheCppApi) {
  testkit::PagedIndexerSpec spec;
  spec.context_lens = {130, 0, 64, 5};
  spec.next_n = 2;
  spec.H = 64;
  spec.k = 8;
  spec.max_blocks = 4;
  spec.spare_blocks = 1;
  spec.unused_entries = testkit::UnusedTableEntries::kMinusOne;
  spec.seed = 43;
  testkit::PagedIndexerWorkload w = testkit::make_paged_indexer_workload(spec);
  w.block_table[1] = -1;  // request 0's second block is out of range: NaN logits
  PagedIndexerProblem p = w.host_problem();
  const int64_t rows = p.batch * p.next_n, stride = p.max_context + 3;  // a padded row stride
  std::vector<float> cpp_logits(static_cast<std::size_t>(rows * stride), 7.0f);
  std::vector<float> c_logits = cpp_logits;
  ASSERT_TRUE(indexer_logits_paged_cpu(p, cpp_logits.data(), stride).is_ok());
  litetopk_paged_indexer_problem problem = c_paged_problem(p);
  ASSERT_EQ(litetopk_indexer_logits_paged_cpu(&problem, c_logits.data(), stride), LITETOPK_OK)
      << litetopk_last_error();
  EXPECT_STREQ(litetopk_last_error(), "");
  // Bit for bit, NaN included; the padding past max_context is left alone.
  EXPECT_EQ(std::memcmp(c_logits.data(), cpp_logits.data(), c_logits.size() * sizeof(float)), 0);
  const auto at = [&](int64_t row, int64_t position) {
    return c_logits[static_cast<std::size_t>(row * stride + position)];
  };
  EXPECT_TRUE(std::isfinite(at(1, 10)));   // request 0, query 1: block 0
  EXPECT_TRUE(std::isnan(at(1, 64)));      // block 1 is out of range
  EXPECT_TRUE(std::isfinite(at(1, 129)));  // block 2; query 1 sees all 130 tokens
  EXPECT_TRUE(std::isinf(at(0, 129)));     // query 0 sees 129
  EXPECT_TRUE(std::isinf(at(2, 0)));       // request 1 is empty
  EXPECT_EQ(at(0, p.max_context), 7.0f);   // the stride's padding is not written

  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(nullptr, c_logits.data(), stride),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("problem"), std::string::npos);
  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(&problem, c_logits.data(), p.max_context - 1),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("logits_stride must be >= max_context"),
            std::string::npos);
  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(&problem, nullptr, stride),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("logits must not be null"),
            std::string::npos);
  // A stride that fits in elements but not in bytes: the later rows would wrap round.
  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(&problem, c_logits.data(), int64_t{1} << 61),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("the logits' extent in bytes overflows"),
            std::string::npos);
  litetopk_paged_indexer_problem bad = problem;
  bad.block_size = 32;
  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(&bad, c_logits.data(), stride),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("block_size must be 64, got 32"),
            std::string::npos);
  bad = problem;
  bad.max_context = bad.max_blocks * bad.block_size + 1;
  EXPECT_EQ(litetopk_indexer_logits_paged_cpu(&bad, c_logits.data(), bad.max_context),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("max_context must be <= max_blocks"),
            std::string::npos);
}

// The GPU entry points of the paged indexer: null problems, bad algorithms and bad shapes come
// back as codes with messages before any device work; with valid arguments a build without CUDA
// answers LITETOPK_NOT_COMPILED (with CUDA the valid calls would run kernels on host pointers, so
// only errors are tried).
TEST(CApi, PagedIndexerGpuCallsValidateFirst) {
  testkit::PagedIndexerSpec spec;
  spec.context_lens = {100, 3};
  spec.next_n = 1;
  spec.H = 32;
  spec.k = 16;
  spec.seed = 44;
  const testkit::PagedIndexerWorkload w = testkit::make_paged_indexer_workload(spec);
  PagedIndexerProblem p = w.host_problem();
  std::vector<int32_t> indices(static_cast<std::size_t>(p.batch * p.next_n * p.k));
  std::vector<float> logits(static_cast<std::size_t>(p.batch * p.next_n * p.max_context));
  p.indices = indices.data();
  litetopk_paged_indexer_problem problem = c_paged_problem(p);
  const auto message_has = [](const char* what) {
    return std::string(litetopk_last_error()).find(what) != std::string::npos;
  };
  std::size_t bytes = 1;

  EXPECT_EQ(litetopk_indexer_topk_paged_workspace_size(nullptr, LITETOPK_INDEXER_AUTO, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("problem")) << litetopk_last_error();
  EXPECT_EQ(litetopk_indexer_topk_paged(nullptr, LITETOPK_INDEXER_AUTO, nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_EQ(litetopk_indexer_logits_paged(nullptr, logits.data(), p.max_context, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_EQ(litetopk_indexer_topk_paged_dispatch(nullptr), LITETOPK_INDEXER_UNFUSED);

  EXPECT_EQ(litetopk_indexer_topk_paged_workspace_size(&problem, 3, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("algo must be 0 (auto), 1 (unfused) or 2 (fused), got 3"))
      << litetopk_last_error();
  EXPECT_EQ(litetopk_indexer_topk_paged(&problem, -1, nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("algo must be")) << litetopk_last_error();
  EXPECT_EQ(litetopk_indexer_topk_paged_workspace_size(&problem, LITETOPK_INDEXER_AUTO, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("workspace_bytes")) << litetopk_last_error();

  litetopk_paged_indexer_problem bad = problem;
  bad.num_heads = 48;
  EXPECT_EQ(litetopk_indexer_topk_paged_workspace_size(&bad, LITETOPK_INDEXER_AUTO, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("num_heads must be 32 or 64, got 48")) << litetopk_last_error();
  EXPECT_EQ(bytes, 0u);  // cleared on failure
  EXPECT_EQ(litetopk_indexer_logits_paged(&bad, logits.data(), p.max_context, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("num_heads")) << litetopk_last_error();
  bad = problem;
  bad.k = 0;
  EXPECT_EQ(litetopk_indexer_topk_paged(&bad, LITETOPK_INDEXER_FUSED, nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("k must be in [1, 8192], got 0")) << litetopk_last_error();
  bad = problem;
  bad.indices = nullptr;
  EXPECT_EQ(litetopk_indexer_topk_paged(&bad, LITETOPK_INDEXER_UNFUSED, nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("indices must not be null")) << litetopk_last_error();
  EXPECT_EQ(litetopk_indexer_logits_paged(&problem, logits.data(), p.max_context - 1, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("logits_stride")) << litetopk_last_error();

#ifndef LITETOPK_WITH_CUDA
  EXPECT_EQ(litetopk_indexer_topk_paged_dispatch(&problem), LITETOPK_INDEXER_FUSED);
  for (int32_t algo : {LITETOPK_INDEXER_AUTO, LITETOPK_INDEXER_UNFUSED, LITETOPK_INDEXER_FUSED}) {
    EXPECT_EQ(litetopk_indexer_topk_paged_workspace_size(&problem, algo, &bytes),
              LITETOPK_NOT_COMPILED);
    EXPECT_TRUE(message_has("CUDA")) << litetopk_last_error();
    EXPECT_EQ(litetopk_indexer_topk_paged(&problem, algo, nullptr, 0, nullptr),
              LITETOPK_NOT_COMPILED);
  }
  EXPECT_EQ(litetopk_indexer_logits_paged(&problem, logits.data(), p.max_context, nullptr),
            LITETOPK_NOT_COMPILED);
#endif
}

litetopk_sparse_kv_cache c_cache(const SparseKvCache& p) {
  litetopk_sparse_kv_cache c{};
  c.dtype = static_cast<int32_t>(p.dtype);
  c.batch = p.batch;
  c.num_kv_heads = p.num_kv_heads;
  c.head_dim = p.head_dim;
  c.block_size = p.block_size;
  c.max_blocks = p.max_blocks;
  c.block_table = p.block_table;
  c.num_pages = p.num_pages;
  c.lengths = p.lengths;
  c.key_codes = p.key_codes;
  c.key_scales = p.key_scales;
  c.key_residuals = p.key_residuals;
  c.values = p.values;
  c.tail_keys = p.tail_keys;
  return c;
}

litetopk_dense_kv_cache c_dense(const DenseKvCache& p) {
  litetopk_dense_kv_cache c{};
  c.dtype = static_cast<int32_t>(p.dtype);
  c.batch = p.batch;
  c.num_kv_heads = p.num_kv_heads;
  c.head_dim = p.head_dim;
  c.capacity = p.capacity;
  c.keys = p.keys;
  c.values = p.values;
  c.batch_stride = p.batch_stride;
  c.head_stride = p.head_stride;
  c.token_stride = p.token_stride;
  c.lengths = p.lengths;
  return c;
}

litetopk_sparse_decode_problem c_sparse_problem(const SparseDecodeProblem& p) {
  litetopk_sparse_decode_problem c{};
  c.cache = c_cache(p.cache);
  c.q = p.q;
  c.num_q_heads = p.num_q_heads;
  c.softmax_scale = p.softmax_scale;
  c.delta = p.delta;
  c.out = p.out;
  c.out_dtype = static_cast<int32_t>(p.out_dtype);
  c.lse = p.lse;
  c.kept_mask = p.kept_mask;
  return c;
}

litetopk_dense_decode_problem c_dense_problem(const DenseDecodeProblem& p) {
  litetopk_dense_decode_problem c{};
  c.cache = c_dense(p.cache);
  c.q = p.q;
  c.num_q_heads = p.num_q_heads;
  c.softmax_scale = p.softmax_scale;
  c.out = p.out;
  c.out_dtype = static_cast<int32_t>(p.out_dtype);
  c.lse = p.lse;
  return c;
}

// A small paged workload (lengths across block edges, two KV heads, G = 4) and its quantized
// cache with room for appends.
struct SmallDecode {
  DecodeWorkload w;
  HostSparseCache cache{DType::kFloat16, 0, 1, 128, 1, false};
  SmallDecode() {
    DecodeWorkloadSpec spec;
    spec.num_kv_heads = 2;
    spec.group_size = 4;
    spec.lengths = {1000, 127, 0};
    spec.seed = 77;
    w = make_decode_workload(spec);
    EXPECT_TRUE(quantize_workload(&w, 128, true, &cache, true).is_ok());
  }
};

TEST(CApi, SparseDecodeCpuMatchesTheCppApi) {
  SmallDecode d;
  const std::size_t outputs = static_cast<std::size_t>(d.w.batch * d.w.num_q_heads);
  const std::size_t mask_size =
      static_cast<std::size_t>(d.w.batch * d.w.num_kv_heads * d.cache.shape.max_blocks);
  std::vector<float> out_cpp(outputs * 128), out_c(outputs * 128, -1.0f);
  std::vector<float> lse_cpp(outputs), lse_c(outputs, -1.0f);
  std::vector<uint8_t> mask_cpp(mask_size, 7), mask_c(mask_size, 7);
  std::vector<double> pm_cpp(outputs), pm_c(outputs);
  double kept_cpp = -1, kept_c = -1;
  SparseDecodeProblem p = d.w.sparse_problem(d.cache.view(), 2.0f, out_cpp.data(), mask_cpp.data());
  p.lse = lse_cpp.data();
  SparseDecodeCpuDiagnostics diagnostics;
  diagnostics.pseudo_max = pm_cpp.data();
  diagnostics.kept_fraction = &kept_cpp;
  ASSERT_TRUE(sparse_decode_cpu(p, diagnostics).is_ok());
  p.out = out_c.data();
  p.lse = lse_c.data();
  p.kept_mask = mask_c.data();
  const litetopk_sparse_decode_problem cp = c_sparse_problem(p);
  ASSERT_EQ(litetopk_sparse_decode_cpu(&cp, pm_c.data(), nullptr, &kept_c), LITETOPK_OK)
      << litetopk_last_error();
  EXPECT_EQ(out_c, out_cpp);
  EXPECT_EQ(lse_c, lse_cpp);
  EXPECT_EQ(mask_c, mask_cpp);
  EXPECT_EQ(pm_c, pm_cpp);
  EXPECT_EQ(kept_c, kept_cpp);
  EXPECT_LT(kept_c, 1.0);  // delta = 2 skipped something: the mask comparison means something

  // Dense decode and the fidelity of the sparse result, both ways.
  std::vector<float> dense_cpp(outputs * 128), dense_c(outputs * 128, -1.0f);
  DenseDecodeProblem dp = d.w.dense_problem(dense_cpp.data(), DType::kFloat32);
  ASSERT_TRUE(dense_decode_cpu(dp).is_ok());
  dp.out = dense_c.data();
  const litetopk_dense_decode_problem cdp = c_dense_problem(dp);
  ASSERT_EQ(litetopk_dense_decode_cpu(&cdp), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(dense_c, dense_cpp);

  const DecodeFidelityProblem fp =
      d.w.fidelity_problem(out_cpp.data(), mask_cpp.data(), 128, d.cache.shape.max_blocks);
  DecodeFidelity f;
  ASSERT_TRUE(decode_fidelity_cpu(fp, &f).is_ok());
  litetopk_decode_fidelity_problem cfp{};
  cfp.reference = c_dense_problem(fp.reference);
  cfp.out = fp.out;
  cfp.out_dtype = static_cast<int32_t>(fp.out_dtype);
  cfp.kept_mask = fp.kept_mask;
  cfp.block_size = fp.block_size;
  cfp.mask_blocks = fp.mask_blocks;
  litetopk_decode_fidelity cf{};
  ASSERT_EQ(litetopk_decode_fidelity_cpu(&cfp, &cf), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(cf.rel_l2, f.rel_l2);
  EXPECT_EQ(cf.max_head_rel_l2, f.max_head_rel_l2);
  EXPECT_EQ(cf.kept_fraction, f.kept_fraction);
  EXPECT_EQ(cf.kept_mass_mean, f.kept_mass_mean);
  EXPECT_EQ(cf.kept_mass_min, f.kept_mass_min);
  EXPECT_EQ(cf.top1_recall, f.top1_recall);
  EXPECT_EQ(cf.top1_recall_min, f.top1_recall_min);
  EXPECT_EQ(cf.top1_block_recall, f.top1_block_recall);
  EXPECT_EQ(cf.top1_block_recall_min, f.top1_block_recall_min);
  EXPECT_EQ(cf.read_fraction, f.read_fraction);
  EXPECT_GT(cf.rel_l2, 0.0);
}

TEST(CApi, SparseKvAppendRebuildAndBytesMatchTheCppApi) {
  SmallDecode a, b;  // identical caches
  std::vector<uint16_t> keys(static_cast<std::size_t>(a.w.batch * a.w.num_kv_heads * 128));
  std::vector<uint16_t> values(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = static_cast<uint16_t>(0x3000 + i % 1024);  // fp16 in [0.125, 0.25)
    values[i] = static_cast<uint16_t>(0xb000 + i % 512);
  }
  const litetopk_sparse_kv_cache cb = c_cache(b.cache.view());
  for (int step = 0; step < 2; ++step) {  // 127 -> 129 crosses a block edge
    ASSERT_TRUE(sparse_kv_append_cpu(a.cache.view(), keys.data(), values.data()).is_ok());
    ASSERT_EQ(litetopk_sparse_kv_append_cpu(&cb, keys.data(), values.data()), LITETOPK_OK)
        << litetopk_last_error();
  }
  EXPECT_EQ(b.cache.lengths, (std::vector<int32_t>{1002, 129, 2}));
  EXPECT_EQ(b.cache.lengths, a.cache.lengths);
  EXPECT_EQ(b.cache.key_codes, a.cache.key_codes);
  EXPECT_EQ(b.cache.key_scales, a.cache.key_scales);
  EXPECT_EQ(b.cache.key_residuals, a.cache.key_residuals);
  EXPECT_EQ(b.cache.values, a.cache.values);
  EXPECT_EQ(b.cache.tail_keys, a.cache.tail_keys);

  const int64_t capacity = a.cache.shape.max_blocks * 128;
  const std::size_t elements = static_cast<std::size_t>(a.w.batch * a.w.num_kv_heads * capacity * 128);
  std::vector<float> keys_cpp(elements), values_cpp(elements), keys_c(elements), values_c(elements);
  std::vector<int32_t> lengths_cpp(3), lengths_c(3);
  DenseKvCache out;
  out.dtype = DType::kFloat32;
  out.batch = a.w.batch;
  out.num_kv_heads = a.w.num_kv_heads;
  out.capacity = capacity;
  out.keys = keys_cpp.data();
  out.values = values_cpp.data();
  out.lengths = lengths_cpp.data();
  ASSERT_TRUE(sparse_kv_rebuild_cpu(a.cache.view(), out).is_ok());
  out.keys = keys_c.data();
  out.values = values_c.data();
  out.lengths = lengths_c.data();
  const litetopk_dense_kv_cache cout = c_dense(out);
  ASSERT_EQ(litetopk_sparse_kv_rebuild_cpu(&cb, &cout), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(keys_c, keys_cpp);
  EXPECT_EQ(values_c, values_cpp);
  EXPECT_EQ(lengths_c, lengths_cpp);

  SparseKvCacheBytes bytes;
  ASSERT_TRUE(sparse_kv_cache_bytes(a.cache.view(), &bytes).is_ok());
  litetopk_sparse_kv_bytes cbytes{};
  ASSERT_EQ(litetopk_sparse_kv_cache_bytes(&cb, &cbytes), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(cbytes.key_codes, bytes.key_codes);
  EXPECT_EQ(cbytes.key_scales, bytes.key_scales);
  EXPECT_EQ(cbytes.key_residuals, bytes.key_residuals);
  EXPECT_EQ(cbytes.values, bytes.values);
  EXPECT_EQ(cbytes.tail_keys, bytes.tail_keys);
  EXPECT_EQ(cbytes.lengths, bytes.lengths);
  EXPECT_EQ(cbytes.block_table, bytes.block_table);
  EXPECT_EQ(cbytes.total, bytes.total());
  EXPECT_GT(cbytes.block_table, 0u);  // paged
  EXPECT_EQ(litetopk_sparse_kv_num_slots(&cb), sparse_kv_num_slots(a.cache.view()));
  EXPECT_EQ(litetopk_sparse_kv_num_slots(nullptr), 0);
  EXPECT_EQ(litetopk_sparse_kv_bytes_per_token(128, 128), sparse_kv_bytes_per_token(128, 128));
  EXPECT_EQ(litetopk_sparse_kv_bytes_per_token(64, 128), 0.0);
}

// Errors of the sparse-decode mirror: null structs, validation (the message names the argument),
// then, with valid arguments, the backend: LITETOPK_NOT_COMPILED in a build without CUDA (with
// CUDA the valid calls would run kernels on these host pointers, so only errors are tried).
TEST(CApi, SparseDecodeErrorsAreCodesWithMessages) {
  SmallDecode d;
  litetopk_sparse_kv_cache cache = c_cache(d.cache.view());
  DenseKvCache dense_cpp = d.w.dense();
  litetopk_dense_kv_cache dense = c_dense(dense_cpp);
  std::vector<uint16_t> token(static_cast<std::size_t>(d.w.batch * d.w.num_kv_heads * 128));
  std::vector<float> out(static_cast<std::size_t>(d.w.batch * d.w.num_q_heads * 128));
  litetopk_sparse_decode_problem sp = c_sparse_problem(d.w.sparse_problem(d.cache.view(), 5.0f, out.data(), nullptr));
  litetopk_dense_decode_problem dp = c_dense_problem(d.w.dense_problem(out.data(), DType::kFloat32));
  const auto message_has = [](const char* what) {
    return std::string(litetopk_last_error()).find(what) != std::string::npos;
  };
  std::size_t bytes = 0;

  EXPECT_EQ(litetopk_sparse_kv_append(nullptr, token.data(), token.data(), nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("cache")) << litetopk_last_error();
  EXPECT_EQ(litetopk_sparse_kv_from_dense(&dense, nullptr, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_EQ(litetopk_sparse_decode_workspace_size(nullptr, nullptr, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("problem")) << litetopk_last_error();
  EXPECT_EQ(litetopk_dense_decode_cpu(nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_EQ(litetopk_sparse_kv_cache_bytes(&cache, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("bytes")) << litetopk_last_error();
  EXPECT_EQ(litetopk_decode_fidelity_cpu(nullptr, nullptr), LITETOPK_INVALID_ARGUMENT);

  EXPECT_EQ(litetopk_sparse_kv_append(&cache, nullptr, token.data(), nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("new_keys must not be null")) << litetopk_last_error();
  litetopk_sparse_kv_cache bad = cache;
  bad.block_size = 64;
  EXPECT_EQ(litetopk_sparse_kv_append(&bad, token.data(), token.data(), nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("block_size")) << litetopk_last_error();
  EXPECT_EQ(litetopk_sparse_kv_append_cpu(&bad, token.data(), token.data()),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("block_size")) << litetopk_last_error();
  litetopk_dense_kv_cache bad_dense = dense;
  bad_dense.num_kv_heads = 1;
  EXPECT_EQ(litetopk_sparse_kv_from_dense(&bad_dense, &cache, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("dense.num_kv_heads")) << litetopk_last_error();
  litetopk_decode_options options{};
  options.blocks_per_split = -1;
  EXPECT_EQ(litetopk_sparse_decode_workspace_size(&sp, &options, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("blocks_per_split")) << litetopk_last_error();
  EXPECT_EQ(litetopk_dense_decode(&dp, &options, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("blocks_per_split")) << litetopk_last_error();
  litetopk_sparse_decode_problem bad_sp = sp;
  bad_sp.num_q_heads = 3;
  EXPECT_EQ(litetopk_sparse_decode(&bad_sp, nullptr, nullptr, 0, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("num_q_heads")) << litetopk_last_error();
  bad_sp = sp;
  bad_sp.delta = -1.0f;
  EXPECT_EQ(litetopk_sparse_decode_cpu(&bad_sp, nullptr, nullptr, nullptr),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("delta")) << litetopk_last_error();
  litetopk_dense_decode_problem bad_dp = dp;
  bad_dp.out_dtype = 9;
  EXPECT_EQ(litetopk_dense_decode_workspace_size(&bad_dp, nullptr, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("out_dtype")) << litetopk_last_error();

#ifndef LITETOPK_WITH_CUDA
  EXPECT_EQ(litetopk_sparse_kv_append(&cache, token.data(), token.data(), nullptr),
            LITETOPK_NOT_COMPILED);
  EXPECT_TRUE(message_has("CUDA")) << litetopk_last_error();
  EXPECT_EQ(litetopk_sparse_kv_from_dense(&dense, &cache, nullptr), LITETOPK_NOT_COMPILED);
  EXPECT_EQ(litetopk_sparse_decode(&sp, nullptr, nullptr, 0, nullptr), LITETOPK_NOT_COMPILED);
  EXPECT_EQ(litetopk_dense_decode(&dp, nullptr, nullptr, 0, nullptr), LITETOPK_NOT_COMPILED);
#endif
}

// Every field of the sparse attention struct reaches the C++ call: the same bytes out, optional
// stats, and errors as codes with the argument named.
TEST(CApi, SparseAttentionCpuMatchesTheCppApi) {
  testkit::SparseAttentionSpec spec;
  spec.s_q = 5;
  spec.s_kv = 300;
  spec.h_q = 32;
  spec.d_qk = 576;
  spec.topk = 45;
  spec.pattern = testkit::IndexPattern::kGroupShared;
  spec.group = 2;
  spec.shared_fraction = 0.5;
  spec.padding_fraction = 0.2;
  spec.out_of_range_fraction = 0.1;
  spec.seed = 47;
  const testkit::SparseAttentionWorkload w = testkit::make_sparse_attention_workload(spec);
  SparseAttentionProblem p = w.host_problem();
  p.sm_scale = -0.07f;  // a field the C struct must carry (not the workload's default)
  const std::size_t rows = static_cast<std::size_t>(p.s_q * p.h_q);
  std::vector<uint16_t> cpp_out(rows * 512), c_out(rows * 512, 1);
  std::vector<float> cpp_max(rows), c_max(rows, 1.0f), cpp_lse(rows), c_lse(rows, 1.0f);
  p.out = cpp_out.data();
  p.max_logits = cpp_max.data();
  p.lse = cpp_lse.data();
  ASSERT_TRUE(sparse_attention_cpu(p).is_ok());

  litetopk_sparse_attention_problem c{};
  c.q = p.q;
  c.kv = p.kv;
  c.indices = p.indices;
  c.s_q = p.s_q;
  c.s_kv = p.s_kv;
  c.h_q = p.h_q;
  c.d_qk = p.d_qk;
  c.d_v = p.d_v;
  c.topk = p.topk;
  c.sm_scale = p.sm_scale;
  c.out = c_out.data();
  c.max_logits = c_max.data();
  c.lse = c_lse.data();
  ASSERT_EQ(litetopk_sparse_attention_cpu(&c), LITETOPK_OK) << litetopk_last_error();
  EXPECT_STREQ(litetopk_last_error(), "");
  EXPECT_EQ(c_out, cpp_out);
  EXPECT_EQ(c_max, cpp_max);
  EXPECT_EQ(c_lse, cpp_lse);

  std::vector<uint16_t> bare_out(rows * 512, 1);
  c.out = bare_out.data();
  c.max_logits = nullptr;
  c.lse = nullptr;
  ASSERT_EQ(litetopk_sparse_attention_cpu(&c), LITETOPK_OK) << litetopk_last_error();
  EXPECT_EQ(bare_out, cpp_out);

  EXPECT_EQ(litetopk_sparse_attention_cpu(nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("problem"), std::string::npos);
  c.h_q = 48;
  EXPECT_EQ(litetopk_sparse_attention_cpu(&c), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("h_q must be 16, 32, 64 or 128, got 48"),
            std::string::npos);
  c.h_q = 32;
  c.d_v = 0;  // a zeroed struct's d_v
  EXPECT_EQ(litetopk_sparse_attention_cpu(&c), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("d_v must be 512, got 0"), std::string::npos);
}

// The GPU entry points of sparse attention: null problems and bad shapes come back as codes with
// messages before any device work; the workspace query answers the plan's bytes for a valid problem
// (in every build: it only validates and plans); with valid arguments a build without CUDA answers
// LITETOPK_NOT_COMPILED (with CUDA the valid call would run the kernel on host pointers, so only
// errors are tried).
TEST(CApi, SparseAttentionGpuCallsValidateFirst) {
  testkit::SparseAttentionSpec spec;
  spec.s_q = 3;
  spec.s_kv = 100;
  spec.h_q = 16;
  spec.d_qk = 512;
  spec.topk = 20;
  spec.seed = 48;
  const testkit::SparseAttentionWorkload w = testkit::make_sparse_attention_workload(spec);
  SparseAttentionProblem p = w.host_problem();
  const std::size_t rows = static_cast<std::size_t>(p.s_q * p.h_q);
  std::vector<uint16_t> out(rows * 512);
  std::vector<float> lse(rows);
  p.out = out.data();
  p.lse = lse.data();

  litetopk_sparse_attention_problem c{};
  c.q = p.q;
  c.kv = p.kv;
  c.indices = p.indices;
  c.s_q = p.s_q;
  c.s_kv = p.s_kv;
  c.h_q = p.h_q;
  c.d_qk = p.d_qk;
  c.d_v = p.d_v;
  c.topk = p.topk;
  c.sm_scale = p.sm_scale;
  c.out = p.out;
  c.lse = p.lse;
  const auto message_has = [](const char* what) {
    return std::string(litetopk_last_error()).find(what) != std::string::npos;
  };

  std::size_t bytes = 7;
  EXPECT_EQ(litetopk_sparse_attention_workspace_size(nullptr, &bytes), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("problem must not be null")) << litetopk_last_error();
  EXPECT_EQ(litetopk_sparse_attention(nullptr, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("problem must not be null")) << litetopk_last_error();
  EXPECT_EQ(litetopk_sparse_attention_workspace_size(&c, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("workspace_bytes")) << litetopk_last_error();

  ASSERT_EQ(litetopk_sparse_attention_workspace_size(&c, &bytes), LITETOPK_OK)
      << litetopk_last_error();
  EXPECT_GT(bytes, 0u);  // auto packs the unions at h_q 16
  c.algo = LITETOPK_ATTENTION_PER_QUERY;
  ASSERT_EQ(litetopk_sparse_attention_workspace_size(&c, &bytes), LITETOPK_OK);
  EXPECT_EQ(bytes, 0u);
  c.algo = LITETOPK_ATTENTION_UNION_PACKED;
  ASSERT_EQ(litetopk_sparse_attention_workspace_size(&c, &bytes), LITETOPK_OK);
  p.algo = SparseAttentionAlgo::kUnionPacked;
  std::size_t cpp_bytes = 7;
  ASSERT_TRUE(sparse_attention_workspace_size(p, &cpp_bytes).is_ok());
  EXPECT_EQ(bytes, cpp_bytes);
  c.algo = LITETOPK_ATTENTION_PER_QUERY;  // no workspace: the calls below pass none

  litetopk_sparse_attention_problem bad = c;
  bad.h_q = 48;
  bytes = 7;
  EXPECT_EQ(litetopk_sparse_attention_workspace_size(&bad, &bytes), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("h_q must be 16, 32, 64 or 128, got 48")) << litetopk_last_error();
  EXPECT_EQ(bytes, 0u);  // cleared on failure
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("h_q must be 16, 32, 64 or 128, got 48")) << litetopk_last_error();
  bad = c;
  bad.d_qk = 128;
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("d_qk")) << litetopk_last_error();
  bad = c;
  bad.d_v = 0;  // a zeroed struct's d_v
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("d_v must be 512, got 0")) << litetopk_last_error();
  bad = c;
  bad.topk = 0;
  EXPECT_EQ(litetopk_sparse_attention_workspace_size(&bad, &bytes), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("topk")) << litetopk_last_error();
  bad = c;
  bad.out = nullptr;
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("out must not be null")) << litetopk_last_error();
  bad = c;
  bad.sm_scale = std::numeric_limits<float>::infinity();
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("sm_scale")) << litetopk_last_error();
  bad = c;
  bad.q = static_cast<const char*>(c.q) + 2;  // bf16-aligned, not 16-byte aligned
  EXPECT_EQ(litetopk_sparse_attention(&bad, nullptr, 0, nullptr), LITETOPK_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("q must be 16-byte aligned")) << litetopk_last_error();

#ifndef LITETOPK_WITH_CUDA
  EXPECT_EQ(litetopk_sparse_attention(&c, nullptr, 0, nullptr), LITETOPK_NOT_COMPILED);
  EXPECT_TRUE(message_has("CUDA")) << litetopk_last_error();
#endif
}

}  // namespace
}  // namespace litetopk::testing
