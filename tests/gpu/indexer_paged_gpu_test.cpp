// The paged decode indexer on the GPU (indexer_topk_paged, both paths, and indexer_logits_paged)
// against the CPU reference: each request gathered into a prefill problem and held to the fp64
// oracle with the GPU tolerance; the fused and unfused paths against each other (same scores, so
// the same selection up to ties); random and adversarial inputs (next_n 1-4, ragged, empty and
// block-edge contexts, contexts shorter than k, ties and score levels around k, NaN and inf, scores
// past fp16's range, out-of-range block entries and lengths); CUDA graph replay while the contexts
// grow; bad calls.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/indexer_testing.h"
#include "common/paged_indexer_testing.h"
#include "gpu/gpu_select_runner.h"
#include "litetopk/fp8_e4m3.h"
#include "litetopk/paged_kv_layout.h"
#include "testkit/device_memory.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testing {
namespace {

using testkit::DeviceBuffer;
using testkit::PagedIndexerSpec;
using testkit::PagedIndexerWorkload;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }


// A workload's arrays on the device and problems over them.
struct DevicePaged {
  DeviceBuffer q, kv_cache, weights, context_lens, block_table, indices, values, workspace;

  void upload(const PagedIndexerWorkload& w, const PagedIndexerProblem& host) {
    ASSERT_TRUE(testkit::upload(w.q, &q).is_ok());
    ASSERT_TRUE(kv_cache.allocate(std::max<std::size_t>(w.kv_cache.size(), 16)).is_ok());
    ASSERT_TRUE(testkit::copy_to_device(kv_cache.data(), w.kv_cache.data(), w.kv_cache.size()).is_ok());
    ASSERT_TRUE(testkit::upload(w.weights, &weights).is_ok());
    set_tables(host);
    const std::size_t out = size(std::max<int64_t>(host.batch * host.next_n * host.k, 1)) * 4;
    ASSERT_TRUE(indices.allocate(out).is_ok());
    ASSERT_TRUE(values.allocate(out).is_ok());
  }

  // (Re)writes the lengths and the table from the host problem.
  void set_tables(const PagedIndexerProblem& host) {
    const std::vector<int32_t> lens(host.context_lens, host.context_lens + host.batch);
    const std::vector<int32_t> table(host.block_table,
                                     host.block_table + std::max<int64_t>(host.batch * host.max_blocks, 1));
    if (context_lens.size() == 0) {
      ASSERT_TRUE(testkit::upload(lens, &context_lens).is_ok());
      ASSERT_TRUE(testkit::upload(table, &block_table).is_ok());
    } else {
      ASSERT_TRUE(testkit::copy_to_device(context_lens.data(), lens.data(), lens.size() * 4).is_ok());
      ASSERT_TRUE(testkit::copy_to_device(block_table.data(), table.data(), table.size() * 4).is_ok());
    }
  }

  PagedIndexerProblem problem(PagedIndexerProblem p) const {
    p.q = q.data();
    p.kv_cache = kv_cache.data();
    p.weights = weights.as<float>();
    p.context_lens = context_lens.as<int32_t>();
    p.block_table = block_table.as<int32_t>();
    p.indices = indices.as<int32_t>();
    p.values = values.as<float>();
    return p;
  }
};

struct Result {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

Result download(const DevicePaged& d, const PagedIndexerProblem& p) {
  Result r;
  r.indices.resize(size(p.batch * p.next_n * p.k));
  r.values.resize(r.indices.size());
  EXPECT_TRUE(testkit::copy_to_host(r.indices.data(), d.indices.data(), r.indices.size() * 4).is_ok());
  EXPECT_TRUE(testkit::copy_to_host(r.values.data(), d.values.data(), r.values.size() * 4).is_ok());
  return r;
}

// Runs indexer_topk_paged with `algo` on the workload (host problem `host`); outputs start as
// sentinels.
Result run_gpu(const PagedIndexerWorkload& w, const PagedIndexerProblem& host, IndexerAlgo algo) {
  DevicePaged d;
  d.upload(w, host);
  const PagedIndexerProblem p = d.problem(host);
  EXPECT_TRUE(testkit::fill_device(d.indices.data(), 0x5a, d.indices.size()).is_ok());
  EXPECT_TRUE(testkit::fill_device(d.values.data(), 0x5a, d.values.size()).is_ok());
  IndexerOptions options;
  options.algo = algo;
  std::size_t bytes = 0;
  Status s = indexer_topk_paged_workspace_size(p, &bytes, options);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(d.workspace.allocate(std::max<std::size_t>(bytes, 1)).is_ok());
  s = indexer_topk_paged(p, d.workspace.data(), bytes, nullptr, options);
  EXPECT_TRUE(s.is_ok()) << indexer_algo_name(algo) << ": " << s.to_string();
  EXPECT_TRUE(testkit::device_synchronize().is_ok());
  return download(d, p);
}

// Structure of one row: the valid prefix, then -1 (values NaN); positions distinct, visible,
// never of a block outside the cache.
::testing::AssertionResult check_row_structure(const PagedIndexerProblem& host, const Result& r,
                                               int64_t row, int64_t* valid) {
  const int64_t b = row / host.next_n, k = host.k;
  const int64_t n = visible(host, b, row % host.next_n);
  std::set<int32_t> seen;
  *valid = 0;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t position = r.indices[size(row * k + i)];
    if (position == -1) {
      if (!std::isnan(r.values[size(row * k + i)])) {
        return ::testing::AssertionFailure() << "row " << row << " slot " << i << ": -1 without NaN";
      }
      continue;
    }
    if (*valid != i) {
      return ::testing::AssertionFailure() << "row " << row << " slot " << i << " after a -1";
    }
    ++*valid;
    if (position < 0 || position >= n) {
      return ::testing::AssertionFailure()
             << "row " << row << " slot " << i << ": position " << position << " not in [0, " << n
             << ")";
    }
    if (!seen.insert(position).second) {
      return ::testing::AssertionFailure() << "row " << row << ": duplicate " << position;
    }
    const int32_t entry = host.block_table[b * host.max_blocks + position / host.block_size];
    if (entry < 0 || entry >= host.num_blocks) {
      return ::testing::AssertionFailure()
             << "row " << row << ": position " << position << " of block entry " << entry;
    }
  }
  return ::testing::AssertionSuccess();
}

// Every request of a GPU result: row structure, and with `oracle` (finite inputs) the fp64 oracle
// at the GPU tolerance.
::testing::AssertionResult check_result(const PagedIndexerWorkload& w,
                                        const PagedIndexerProblem& host, const Result& r,
                                        bool oracle) {
  for (int64_t row = 0; row < host.batch * host.next_n; ++row) {
    int64_t valid = 0;
    ::testing::AssertionResult structure = check_row_structure(host, r, row, &valid);
    if (!structure) return structure;
  }
  if (!oracle) return ::testing::AssertionSuccess();
  for (int64_t b = 0; b < host.batch; ++b) {
    const GatheredRequest g = gather_request(w, host, b);
    const int64_t offset = b * host.next_n * host.k;
    ::testing::AssertionResult result =
        check_indexer_oracle(g.c, g.in, r.indices.data() + offset, r.values.data() + offset,
                             indexer_tolerance_rel_gpu(host.head_dim, host.num_heads));
    if (!result) return result << " (request " << b << ", context " << host.context_lens[b] << ")";
  }
  return ::testing::AssertionSuccess();
}

// The fused and unfused results agree (they score with the same arithmetic).
::testing::AssertionResult check_paths_agree(const PagedIndexerProblem& host, const Result& a,
                                             const Result& b) {
  IndexerCase c;
  c.name = "paged";
  c.T = host.batch * host.next_n;
  c.k = host.k;
  return check_indexer_agreement(c, a.indices.data(), a.values.data(), b.indices.data(),
                                 b.values.data());
}

// The GPU's own logits (indexer_logits_paged), [rows, max_context].
std::vector<float> gpu_logits(const DevicePaged& d, const PagedIndexerProblem& host) {
  const int64_t rows = host.batch * host.next_n;
  std::vector<float> logits(size(std::max<int64_t>(rows * host.max_context, 1)));
  DeviceBuffer buffer;
  EXPECT_TRUE(buffer.allocate(logits.size() * 4).is_ok());
  const Status s = indexer_logits_paged(d.problem(host), buffer.as<float>(), host.max_context, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(testkit::copy_to_host(logits.data(), buffer.data(), logits.size() * 4).is_ok());
  return logits;
}

// Exactness on the GPU's own scores (the selection paths score with the logits kernel's
// arithmetic): per row, min(k, non-NaN visible logits) positions, each value equal to its logit,
// and no unselected non-NaN logit above the smallest selected value. Holds for any input, NaN and
// inf included.
::testing::AssertionResult check_exact_on_logits(const PagedIndexerProblem& host,
                                                 const std::vector<float>& logits,
                                                 const Result& r) {
  for (int64_t row = 0; row < host.batch * host.next_n; ++row) {
    const int64_t n = visible(host, row / host.next_n, row % host.next_n);
    const float* scores = logits.data() + row * host.max_context;
    int64_t selectable = 0;
    for (int64_t p = 0; p < n; ++p) selectable += !std::isnan(scores[p]);
    std::vector<bool> chosen(size(n), false);
    int64_t valid = 0;
    float smallest = kInf;
    for (int64_t i = 0; i < host.k; ++i) {
      const int32_t position = r.indices[size(row * host.k + i)];
      if (position < 0 || position >= n) continue;
      ++valid;
      chosen[size(position)] = true;
      const float value = r.values[size(row * host.k + i)];
      if (!(value == scores[position])) {
        return ::testing::AssertionFailure() << "row " << row << " position " << position
                                             << ": value " << value << ", logit " << scores[position];
      }
      smallest = std::min(smallest, value);
    }
    if (valid != std::min(host.k, selectable)) {
      return ::testing::AssertionFailure() << "row " << row << ": " << valid << " selected, "
                                           << selectable << " selectable, k " << host.k;
    }
    for (int64_t p = 0; p < n; ++p) {
      if (!chosen[size(p)] && !std::isnan(scores[p]) && scores[p] > smallest) {
        return ::testing::AssertionFailure() << "row " << row << ": position " << p << " ("
                                             << scores[p] << ") beats the selected " << smallest;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Both paths (every case here fits the fused kernel): each exact on the GPU's own logits, with
// the oracle (finite inputs), and the two against each other.
void check_both_paths(const PagedIndexerWorkload& w, const PagedIndexerProblem& host, bool oracle) {
  DevicePaged d;
  d.upload(w, host);
  const std::vector<float> logits = gpu_logits(d, host);
  const Result unfused = run_gpu(w, host, IndexerAlgo::kUnfused);
  EXPECT_TRUE(check_result(w, host, unfused, oracle)) << "unfused";
  EXPECT_TRUE(check_exact_on_logits(host, logits, unfused)) << "unfused";
  const Result fused = run_gpu(w, host, IndexerAlgo::kFused);
  EXPECT_TRUE(check_result(w, host, fused, oracle)) << "fused";
  EXPECT_TRUE(check_exact_on_logits(host, logits, fused)) << "fused";
  EXPECT_TRUE(check_paths_agree(host, fused, unfused));
}

// ---- random inputs ----

TEST(PagedIndexerGpu, RandomRaggedEveryNextN) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t next_n = 1; next_n <= 4; ++next_n) {
    for (int64_t H : {int64_t{32}, int64_t{64}}) {
      SCOPED_TRACE("next_n " + std::to_string(next_n) + " H " + std::to_string(H));
      const uint64_t seed = static_cast<uint64_t>(10 * next_n + H);
      const PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
          paged_spec(testkit::ragged_context_lens(9, 700, 64, seed), next_n, H, 64, seed));
      check_both_paths(w, w.host_problem(), true);
    }
  }
}

TEST(PagedIndexerGpu, ShortEmptyAndBlockEdgeContexts) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int32_t> lens = {0, 1, 2, 3, 4, 5, 63, 64, 65, 127, 128, 129, 300};
  for (int64_t next_n : {int64_t{1}, int64_t{4}}) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    const PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec(lens, next_n, 64, 100, 3));
    check_both_paths(w, w.host_problem(), true);
  }
}

TEST(PagedIndexerGpu, LongContextsK2048) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t next_n : {int64_t{1}, int64_t{2}, int64_t{3}}) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    const PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
        paged_spec({20000, 9000, 2047, 4096}, next_n, 64, 2048, 77 + static_cast<uint64_t>(next_n)));
    check_both_paths(w, w.host_problem(), true);
  }
}

TEST(PagedIndexerGpu, OneRequest128KAndLargeK) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({131072}, 1, 64, 2048, 5));
  check_both_paths(w, w.host_problem(), true);
  const PagedIndexerWorkload big_k =
      testkit::make_paged_indexer_workload(paged_spec({40000, 7000}, 2, 32, 8192, 6));
  check_both_paths(big_k, big_k.host_problem(), true);
}

// Eight requests of 128K: the fused kernel's blocks hold 8192 scores each, so its histograms see
// thousands of keys per bin. Exact on the GPU's own logits and equal to the unfused path.
TEST(PagedIndexerGpu, EightRequests128KFused) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
      paged_spec(testkit::fixed_context_lens(8, 131072), 1, 64, 2048, 23));
  check_both_paths(w, w.host_problem(), /*oracle=*/false);
}

// A ragged batch (long, short, empty and one-token requests; next_n 1 and 2): the fused kernel
// shares the batch's tiles over its blocks from the device's lengths, so requests get different
// numbers of blocks and some blocks none. Exact on the GPU's own logits and equal to unfused.
TEST(PagedIndexerGpu, RaggedBatchBalancedFused) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t next_n : {int64_t{1}, int64_t{2}}) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    const PagedIndexerWorkload w = testkit::make_paged_indexer_workload(paged_spec(
        {131072, 70001, 0, 1, 65, 99999, 4096, 33000, 2048, 120000, 7, 64000}, next_n, 64, 2048,
        51 + static_cast<uint64_t>(next_n)));
    check_both_paths(w, w.host_problem(), /*oracle=*/false);
  }
}

// A batch whose contexts do not fit the fused kernel's shared memory: auto takes the unfused
// path and an explicit fused call is refused.
TEST(PagedIndexerGpu, LargeBatchRunsUnfused) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
      paged_spec(testkit::fixed_context_lens(64, 65536), 2, 64, 2048, 8));
  const PagedIndexerProblem host = w.host_problem();
  DevicePaged d;
  d.upload(w, host);
  const PagedIndexerProblem p = d.problem(host);
  EXPECT_EQ(indexer_topk_paged_dispatch(p), IndexerAlgo::kUnfused);
  IndexerOptions fused;
  fused.algo = IndexerAlgo::kFused;
  std::size_t bytes = 0;
  ASSERT_TRUE(indexer_topk_paged_workspace_size(p, &bytes, fused).is_ok());
  ASSERT_TRUE(d.workspace.allocate(std::max<std::size_t>(bytes, 1)).is_ok());
  EXPECT_EQ(indexer_topk_paged(p, d.workspace.data(), bytes, nullptr, fused).code(),
            StatusCode::kUnsupported);
  // Only a few requests checked against the oracle (the whole batch is 8M scores).
  PagedIndexerProblem few = host;
  few.batch = 3;
  const Result r = run_gpu(w, host, IndexerAlgo::kAuto);
  Result head;
  head.indices.assign(r.indices.begin(), r.indices.begin() + few.batch * few.next_n * few.k);
  head.values.assign(r.values.begin(), r.values.begin() + few.batch * few.next_n * few.k);
  EXPECT_TRUE(check_result(w, few, head, true));
}

// The best scores crowded into one stretch of the context (the last 8192 tokens scaled up, as
// recent tokens often score): a few blocks hold most of the top k. Both paths exact on the
// oracle, for a small k and DSA's.
TEST(PagedIndexerGpu, CrowdedTopKAcrossFewBlocks) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t k : {int64_t{256}, int64_t{2048}}) {
    SCOPED_TRACE("k " + std::to_string(k));
    PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
        paged_spec({131072, 40000}, 1, 64, k, 90 + static_cast<uint64_t>(k)));
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t blocks = w.context_lens[size(b)] / w.spec.block_size;
      for (int64_t i = blocks - 128; i < blocks; ++i) {  // the last 8192 tokens
        const int64_t block = w.block_table[size(b * w.max_blocks + i)];
        for (int64_t slot = 0; slot < w.spec.block_size; ++slot) {
          write_scale(&w, block, slot, 64.0f * read_scale(w, block, slot));
        }
      }
    }
    check_both_paths(w, w.host_problem(), true);
  }
}

// ---- ties ----

TEST(PagedIndexerGpu, ConstantScoresTieEverywhere) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (bool zero_weights : {false, true}) {
    SCOPED_TRACE(zero_weights ? "zero weights" : "identical keys");
    PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec({2000, 37, 64, 130, 5000}, 3, 32, 500, 5));
    make_keys_identical(&w);
    if (zero_weights) std::fill(w.weights.begin(), w.weights.end(), 0.0f);
    check_both_paths(w, w.host_problem(), true);
  }
}

// Three levels of scores (identical keys; scales 4, 2 and 1 over three stretches of the context;
// positive weights): k at the end of the middle level takes its bin whole, k inside it selects
// among tied candidates, k inside the top level selects among its ties. Both paths, exact.
TEST(PagedIndexerGpu, ThreeScoreLevelsAroundK) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t k : {int64_t{1500}, int64_t{1000}, int64_t{300}}) {
    SCOPED_TRACE("k " + std::to_string(k));
    PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec({3000, 40000}, 1, 64, k, 31));
    make_keys_identical(&w);
    for (float& weight : w.weights) weight = std::fabs(weight);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t t = 0; t < w.context_lens[size(b)]; ++t) {
        const int64_t block = w.block_table[size(b * w.max_blocks + t / w.spec.block_size)];
        const float level = t < 600 ? 4.0f : (t < 1500 ? 2.0f : 1.0f);
        write_scale(&w, block, t % w.spec.block_size, level);
      }
    }
    check_both_paths(w, w.host_problem(), true);
  }
}

// Scores far outside fp16's range (huge and tiny weights: every first digit of the fp32 keys at
// the edges of the exponent range), one long and a few short requests. Both paths, exact.
TEST(PagedIndexerGpu, ScoresBeyondHalfPrecisionRange) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (float factor : {1e9f, 1e-12f}) {
    SCOPED_TRACE("weights times " + std::to_string(factor));
    PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
        paged_spec({131072, 9000, 700}, 2, 64, 2048, 41));
    for (float& weight : w.weights) weight *= factor;
    check_both_paths(w, w.host_problem(), true);
  }
}

// ---- NaN and inf ----

TEST(PagedIndexerGpu, NanAndInfInScalesAndWeights) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
      paged_spec(testkit::ragged_context_lens(8, 400, 30, 11), 2, 64, 30, 11));
  write_special_scales(&w);
  const int64_t H = w.spec.H;
  w.weights[size(0 * H + 3)] = kNaN;
  w.weights[size(3 * H + 5)] = kInf;
  w.weights[size(4 * H + 1)] = -kInf;
  check_both_paths(w, w.host_problem(), /*oracle=*/false);
  const Result r = run_gpu(w, w.host_problem(), IndexerAlgo::kFused);
  for (int64_t i = 0; i < w.spec.k; ++i) EXPECT_EQ(r.indices[size(i)], -1) << "all-NaN row";
}

// ---- the caller's contract: out-of-range device values ----

TEST(PagedIndexerGpu, OutOfRangeBlockEntriesAreUnselectable) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({500, 300, 64, 200}, 2, 32, 40, 13));
  break_block_entries(&w);
  check_both_paths(w, w.host_problem(), true);
}

TEST(PagedIndexerGpu, ContextsAreCutAtMaxContextAndNegativeOnesAreEmpty) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({900, 500, 700, 100}, 3, 64, 64, 17));
  PagedIndexerProblem p = w.host_problem();
  p.max_context = 600;
  w.context_lens[1] = -5;
  w.context_lens[3] = std::numeric_limits<int32_t>::min();
  check_both_paths(w, p, true);
  w.context_lens[0] = std::numeric_limits<int32_t>::max();
  check_both_paths(w, p, true);
}

TEST(PagedIndexerGpu, UnusedTableEntriesAreNeverRead) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerSpec spec = paged_spec({130, 10, 0, 257}, 4, 32, 16, 19);
  spec.max_blocks = 9;
  const PagedIndexerWorkload stale = testkit::make_paged_indexer_workload(spec);
  spec.unused_entries = testkit::UnusedTableEntries::kMinusOne;
  const PagedIndexerWorkload minus_one = testkit::make_paged_indexer_workload(spec);
  for (IndexerAlgo algo : {IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    const Result a = run_gpu(stale, stale.host_problem(), algo);
    const Result b = run_gpu(minus_one, minus_one.host_problem(), algo);
    EXPECT_TRUE(check_result(stale, stale.host_problem(), a, true));
    EXPECT_TRUE(check_paths_agree(stale.host_problem(), a, b));
  }
}

TEST(PagedIndexerGpu, NoVisibleTokenAnywhere) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(paged_spec({0, 0, 3}, 4, 64, 8, 21));
  PagedIndexerProblem p = w.host_problem();
  check_both_paths(w, p, true);
  p.max_context = 0;  // nothing is visible: every slot -1 without a launch
  const Result r = run_gpu(w, p, IndexerAlgo::kAuto);
  for (int32_t index : r.indices) EXPECT_EQ(index, -1);
}

// ---- logits ----

// indexer_logits_paged against the CPU logits at the GPU tolerance, over a row stride past
// max_context (the positions past it untouched), -inf past each row's visible tokens.
void check_logits_match_cpu(const PagedIndexerWorkload& w) {
  const PagedIndexerProblem host = w.host_problem();
  const int64_t rows = host.batch * host.next_n;
  const int64_t stride = host.max_context + 5;
  std::vector<float> cpu(size(rows * stride), 7.0f);
  ASSERT_TRUE(indexer_logits_paged_cpu(host, cpu.data(), stride).is_ok());
  DevicePaged d;
  d.upload(w, host);
  DeviceBuffer logits;
  ASSERT_TRUE(logits.allocate(cpu.size() * 4).is_ok());
  std::vector<float> init(cpu.size(), 7.0f);
  ASSERT_TRUE(testkit::copy_to_device(logits.data(), init.data(), init.size() * 4).is_ok());
  ASSERT_TRUE(indexer_logits_paged(d.problem(host), logits.as<float>(), stride, nullptr).is_ok());
  std::vector<float> gpu(cpu.size());
  ASSERT_TRUE(testkit::copy_to_host(gpu.data(), logits.data(), gpu.size() * 4).is_ok());
  // Per row the oracle's bound: rel * sum_h |w_h| |q_h|_2 * max_s |scale_s| |kv_s|_2.
  const double rel = indexer_tolerance_rel_gpu(host.head_dim, host.num_heads);
  auto norm = [](const uint8_t* v, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::pow(static_cast<double>(fp8::e4m3_to_float(v[i])), 2);
    return std::sqrt(sum);
  };
  for (int64_t row = 0; row < rows; ++row) {
    const GatheredRequest g = gather_request(w, host, row / host.next_n);
    const int64_t j = row % host.next_n, H = host.num_heads, D = host.head_dim;
    double key_bound = 0.0;
    for (int64_t s = 0; s < g.c.S; ++s) {
      const float scale = g.in.kv_scale[size(s)];
      if (!std::isnan(scale)) key_bound = std::max(key_bound, std::fabs(scale) * norm(&g.in.kv[size(s * D)], D));
    }
    double query_bound = 0.0;
    for (int64_t h = 0; h < H; ++h) {
      query_bound += std::fabs(g.in.weights[size(j * H + h)]) * norm(&g.in.q[size((j * H + h) * D)], D);
    }
    const double tol = rel * query_bound * key_bound + 1e-30;
    for (int64_t p = 0; p < stride; ++p) {
      const float want = cpu[size(row * stride + p)];
      const float got = gpu[size(row * stride + p)];
      if (p >= host.max_context) {
        ASSERT_EQ(got, 7.0f) << "row " << row << " position " << p << " past max_context";
      } else if (std::isnan(want) || std::isinf(want)) {
        ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
            << "row " << row << " position " << p << ": " << got << " vs " << want;
      } else {
        ASSERT_LE(std::fabs(static_cast<double>(got) - want), tol)
            << "row " << row << " position " << p;
      }
    }
  }
}

TEST(PagedIndexerGpu, LogitsMatchCpu) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
      paged_spec(testkit::ragged_context_lens(6, 1500, 64, 31), 3, 64, 1, 31));
  w.block_table[1] = -1;  // request 0's second block: NaN
  check_logits_match_cpu(w);
}

// The logits kernel's blocks share the batch's tiles by the device's context lengths: a batch
// larger than a wave and than one scan round of requests (288 threads, 416 with three math
// warpgroups at 128 columns), mostly tiny or empty requests
// around a few long ones, so that blocks score many requests one after another and others a
// range inside one long request; every tenth request's length negative (empty).
std::vector<int32_t> many_segment_lens(int64_t batch) {
  std::vector<int32_t> lens(size(batch));
  const int32_t tiny[] = {0, 1, 63, 64, 65, 3, 130, 0, 7, 200};
  for (int64_t b = 0; b < batch; ++b) lens[size(b)] = tiny[b % 10];
  lens[size(batch / 3)] = 30000;
  lens[size(batch / 3 + 1)] = 12345;
  lens[size(batch - 1)] = 20000;
  return lens;
}

TEST(PagedIndexerGpu, BalancedScheduleAcrossManyRequests) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t next_n : {int64_t{1}, int64_t{2}}) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
        paged_spec(many_segment_lens(421), next_n, 64, 64, 40 + static_cast<uint64_t>(next_n)));
    for (std::size_t b = 5; b < w.context_lens.size(); b += 10) w.context_lens[b] = -3;
    const PagedIndexerProblem host = w.host_problem();
    DevicePaged d;
    d.upload(w, host);
    const Result unfused = run_gpu(w, host, IndexerAlgo::kUnfused);
    EXPECT_TRUE(check_result(w, host, unfused, true));
    EXPECT_TRUE(check_exact_on_logits(host, gpu_logits(d, host), unfused));
  }
  check_logits_match_cpu(testkit::make_paged_indexer_workload(
      paged_spec(many_segment_lens(290), 2, 32, 1, 43)));
}

// ---- CUDA graphs: one capture serves every step up to max_context ----

TEST(PagedIndexerGpu, GraphReplayWhileContextsGrow) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerSpec spec = paged_spec({3000, 1000, 10, 2500}, 2, 64, 256, 41);
  spec.max_context = 4096;
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(spec);
  for (IndexerAlgo algo : {IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    SCOPED_TRACE(indexer_algo_name(algo));
    PagedIndexerProblem host = w.host_problem();
    std::vector<int32_t> lens = {200, 1, 0, 64};
    host.context_lens = lens.data();
    DevicePaged d;
    d.upload(w, host);
    const PagedIndexerProblem p = d.problem(host);
    IndexerOptions options;
    options.algo = algo;
    std::size_t bytes = 0;
    ASSERT_TRUE(indexer_topk_paged_workspace_size(p, &bytes, options).is_ok());
    ASSERT_TRUE(d.workspace.allocate(std::max<std::size_t>(bytes, 1)).is_ok());
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const Status captured = indexer_topk_paged(p, d.workspace.data(), bytes, stream, options);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(captured.is_ok()) << captured.to_string();
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int step = 0; step < 4; ++step) {
      for (std::size_t b = 0; b < lens.size(); ++b) {
        lens[b] = std::min<int32_t>(w.context_lens[b], lens[b] + 700 * step + 1);
      }
      d.set_tables(host);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const Result r = download(d, p);
      EXPECT_TRUE(check_result(w, host, r, true)) << "step " << step;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// ---- bad calls ----

TEST(PagedIndexerGpu, WorkspaceTooSmallAndBadAlgo) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({1000, 200}, 1, 64, 64, 51));
  DevicePaged d;
  d.upload(w, w.host_problem());
  const PagedIndexerProblem p = d.problem(w.host_problem());
  for (IndexerAlgo algo : {IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    IndexerOptions options;
    options.algo = algo;
    std::size_t bytes = 0;
    ASSERT_TRUE(indexer_topk_paged_workspace_size(p, &bytes, options).is_ok());
    ASSERT_GT(bytes, 0u);
    ASSERT_TRUE(d.workspace.allocate(bytes).is_ok());
    EXPECT_EQ(indexer_topk_paged(p, d.workspace.data(), bytes - 1, nullptr, options).code(),
              StatusCode::kWorkspaceTooSmall);
  }
  IndexerOptions bad;
  bad.algo = static_cast<IndexerAlgo>(9);
  std::size_t bytes = 0;
  EXPECT_EQ(indexer_topk_paged_workspace_size(p, &bytes, bad).code(), StatusCode::kInvalidArgument);
}

// ---- the decode state: the previous step's top-k gates the fused path ----

// One request slot's decode steps on the device: the workload's arrays, a state carried between
// steps, and each step checked against the GPU's own logits and the unfused path.
struct DecodeSteps {
  const PagedIndexerWorkload* w;
  PagedIndexerProblem host;
  DevicePaged d;
  DeviceBuffer state;

  DecodeSteps(const PagedIndexerWorkload& workload, const PagedIndexerProblem& p)
      : w(&workload), host(p) {
    d.upload(workload, p);
    const std::size_t bytes = paged_indexer_state_bytes(p.batch, p.next_n, p.k);
    EXPECT_TRUE(state.allocate(std::max<std::size_t>(bytes, 4)).is_ok());
    EXPECT_TRUE(testkit::fill_device(state.data(), 0, state.size()).is_ok());
  }

  std::vector<int32_t> state_contents() const {
    std::vector<int32_t> out(state.size() / 4);
    EXPECT_TRUE(testkit::copy_to_host(out.data(), state.data(), out.size() * 4).is_ok());
    return out;
  }
  void write_state(const std::vector<int32_t>& contents) {
    ASSERT_TRUE(testkit::copy_to_device(state.data(), contents.data(), contents.size() * 4).is_ok());
  }

  // Runs the fused path with the state (algo fused, or auto), then checks it.
  Result step(IndexerAlgo algo = IndexerAlgo::kFused) {
    const PagedIndexerProblem p = d.problem(host);
    EXPECT_TRUE(testkit::fill_device(d.indices.data(), 0x5a, d.indices.size()).is_ok());
    EXPECT_TRUE(testkit::fill_device(d.values.data(), 0x5a, d.values.size()).is_ok());
    IndexerState decode_state{state.data(), state.size()};
    IndexerOptions options;
    options.algo = algo;
    options.state = &decode_state;
    std::size_t bytes = 0;
    Status s = indexer_topk_paged_workspace_size(p, &bytes, options);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    DeviceBuffer workspace;
    EXPECT_TRUE(workspace.allocate(std::max<std::size_t>(bytes, 1)).is_ok());
    EXPECT_TRUE(testkit::fill_device(workspace.data(), 0xa5, workspace.size()).is_ok());
    s = indexer_topk_paged(p, workspace.data(), bytes, nullptr, options);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(testkit::device_synchronize().is_ok());
    return download(d, p);
  }

  // The step's result exact on the GPU's logits, against the oracle (finite inputs) and the
  // unfused path, and the state holding the selected positions.
  void check(const Result& r, bool oracle) {
    const std::vector<float> logits = gpu_logits(d, host);
    EXPECT_TRUE(check_exact_on_logits(host, logits, r)) << "gated";
    EXPECT_TRUE(check_result(*w, host, r, oracle)) << "gated";
    const Result unfused = run_gpu(*w, host, IndexerAlgo::kUnfused);
    EXPECT_TRUE(check_paths_agree(host, r, unfused));
    const std::vector<int32_t> written = state_contents();
    for (int64_t i = 0; i < host.batch * host.next_n * host.k; ++i) {
      ASSERT_EQ(written[size(i)], r.indices[size(i)]) << "state slot " << i;
    }
  }

  void run_and_check(bool oracle) { check(step(), oracle); }
};

// Perturbs every query byte's lowest mantissa bit with probability 1/4 (a nearby query: the
// previous top-k mostly stays) and re-uploads q.
void perturb_queries(PagedIndexerWorkload* w, DevicePaged* d, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint8_t& byte : w->q) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if ((x & 3) == 0 && (byte & 0x7f) != 0x7e && (byte & 0x7f) != 0) byte ^= 1;
  }
  ASSERT_TRUE(testkit::copy_to_device(d->q.data(), w->q.data(), w->q.size()).is_ok());
}

TEST(PagedIndexerDecodeState, StepsFromNoHistoryToCoherentAreExact) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t next_n : {int64_t{1}, int64_t{2}, int64_t{4}}) {
    for (int64_t k : {int64_t{64}, int64_t{2048}}) {
      SCOPED_TRACE("next_n " + std::to_string(next_n) + " k " + std::to_string(k));
      PagedIndexerWorkload w = testkit::make_paged_indexer_workload(paged_spec(
          {20000, 3000, 2047, 64, 0, 9000}, next_n, 64, k, 300 + static_cast<uint64_t>(next_n + k)));
      DecodeSteps steps(w, w.host_problem());
      steps.run_and_check(true);  // a zeroed state: no history (duplicates of position 0)
      steps.run_and_check(true);  // the same query: the history is the exact top-k
      for (uint64_t step = 0; step < 2; ++step) {
        perturb_queries(&w, &steps.d, step + 1);
        steps.run_and_check(true);
      }
    }
  }
}

TEST(PagedIndexerDecodeState, H32AndALongRowBeyondTheSharedCandidates) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  // 40000 visible tokens without history: every one is a candidate (the select reads them from
  // the candidate buffer, not shared memory).
  PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({40000, 700}, 2, 32, 1000, 61));
  DecodeSteps steps(w, w.host_problem());
  steps.run_and_check(true);
  perturb_queries(&w, &steps.d, 9);
  steps.run_and_check(true);
}

TEST(PagedIndexerDecodeState, GarbageStaleAndDuplicateStatesAreExact) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({5000, 1200, 300, 4100}, 2, 64, 256, 71));
  DecodeSteps steps(w, w.host_problem());
  steps.run_and_check(true);
  const std::vector<int32_t> good = steps.state_contents();
  std::vector<int32_t> garbage = good;
  uint64_t x = 12345;
  for (std::size_t i = 0; i < garbage.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int kind = static_cast<int>((x >> 33) % 6);
    if (kind == 0) garbage[i] = -static_cast<int32_t>((x >> 40) % 100) - 1;    // negative
    if (kind == 1) garbage[i] = static_cast<int32_t>((x >> 20) & 0x7fffffff);  // far past the end
    if (kind == 2) garbage[i] = garbage[(i + 1) % garbage.size()];             // a duplicate
    if (kind == 3) garbage[i] = static_cast<int32_t>((x >> 40) % 5000);        // any position
  }
  steps.write_state(garbage);
  steps.run_and_check(true);
  // Every slot the same position; then the whole row duplicated with one position changed.
  steps.write_state(std::vector<int32_t>(good.size(), 17));
  steps.run_and_check(true);
  std::vector<int32_t> twice = good;
  for (int64_t row = 0; row < steps.host.batch * steps.host.next_n; ++row) {
    int32_t* slots = twice.data() + row * steps.host.k;
    for (int64_t i = 1; i < steps.host.k; i += 2) slots[i] = slots[i - 1];
  }
  steps.write_state(twice);
  steps.run_and_check(true);
  // The slots trade requests (another request's history) and the contexts shrink.
  std::vector<int32_t> swapped(good.size());
  const std::size_t half = good.size() / 2;
  std::copy(good.begin() + half, good.end(), swapped.begin());
  std::copy(good.begin(), good.begin() + half, swapped.begin() + (good.size() - half));
  steps.write_state(swapped);
  std::vector<int32_t> shorter = {2500, 1199, 10, 4096};
  steps.host.context_lens = shorter.data();
  steps.d.set_tables(steps.host);
  steps.run_and_check(true);
}

// A history of k distinct visible positions, some of which score NaN: only the others count
// towards k (else the bound would be the smallest of fewer than k valid scores, above the row's
// k-th best, and the row would come back short).
TEST(PagedIndexerDecodeState, NanScoredHistoryDoesNotCountTowardsK) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
      paged_spec(testkit::ragged_context_lens(8, 400, 60, 19), 2, 64, 30, 19));
  write_special_scales(&w);
  DecodeSteps steps(w, w.host_problem());
  const PagedIndexerProblem& p = steps.host;
  const std::vector<float> logits = gpu_logits(steps.d, p);
  std::vector<int32_t> state(size(p.batch * p.next_n * p.k), -1);
  int64_t rows_tested = 0;
  for (int64_t r = 0; r < p.batch * p.next_n; ++r) {
    const int64_t seen = paged_kv::visible_tokens(p.context_lens[r / p.next_n], p.next_n,
                                                  r % p.next_n, p.max_context);
    const float* row = logits.data() + r * p.max_context;
    std::vector<int32_t> valid, nan;
    for (int32_t t = 0; t < seen; ++t) (std::isnan(row[t]) ? nan : valid).push_back(t);
    std::stable_sort(valid.begin(), valid.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    const int64_t m = std::min<int64_t>(static_cast<int64_t>(nan.size()), p.k / 2);
    if (m == 0 || static_cast<int64_t>(valid.size()) < p.k) continue;
    int32_t* slots = state.data() + r * p.k;
    std::copy(valid.begin(), valid.begin() + (p.k - m), slots);  // the best k - m valid ones
    std::copy(nan.begin(), nan.begin() + m, slots + (p.k - m));
    ++rows_tested;
  }
  ASSERT_GT(rows_tested, 0);
  steps.write_state(state);
  steps.run_and_check(false);
}

TEST(PagedIndexerDecodeState, TiesNanInfBadBlocksAndShortRows) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  {
    SCOPED_TRACE("ties");
    PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec({2000, 37, 64, 130, 5000}, 3, 32, 500, 5));
    make_keys_identical(&w);
    DecodeSteps steps(w, w.host_problem());
    steps.run_and_check(true);
    steps.run_and_check(true);  // the bound is the tied value: every visible token passes
  }
  {
    SCOPED_TRACE("NaN and inf");
    PagedIndexerWorkload w = testkit::make_paged_indexer_workload(
        paged_spec(testkit::ragged_context_lens(8, 400, 30, 11), 2, 64, 30, 11));
    write_special_scales(&w);
    const int64_t H = w.spec.H;
    w.weights[size(0 * H + 3)] = kNaN;
    w.weights[size(3 * H + 5)] = kInf;
    w.weights[size(4 * H + 1)] = -kInf;
    DecodeSteps steps(w, w.host_problem());
    steps.run_and_check(false);
    steps.run_and_check(false);
    perturb_queries(&w, &steps.d, 3);
    steps.run_and_check(false);
  }
  {
    SCOPED_TRACE("bad block entries");
    PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec({500, 300, 64, 200}, 2, 32, 40, 13));
    DecodeSteps steps(w, w.host_problem());
    steps.run_and_check(true);
    break_block_entries(&w);  // the history now points into blocks outside the cache
    steps.host = w.host_problem();
    steps.d.set_tables(steps.host);
    steps.run_and_check(true);
    steps.run_and_check(true);
  }
  {
    SCOPED_TRACE("rows shorter than k, empty and cut contexts");
    PagedIndexerWorkload w =
        testkit::make_paged_indexer_workload(paged_spec({900, 500, 0, 1, 63, 65}, 3, 64, 600, 17));
    PagedIndexerProblem p = w.host_problem();
    p.max_context = 700;
    w.context_lens[1] = -5;
    DecodeSteps steps(w, p);
    steps.run_and_check(true);
    steps.run_and_check(true);
  }
}

TEST(PagedIndexerDecodeState, GraphReplayCarriesTheStateWhileContextsGrow) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  PagedIndexerSpec spec = paged_spec({3000, 1000, 10, 2500}, 2, 64, 256, 41);
  spec.max_context = 4096;
  PagedIndexerWorkload w = testkit::make_paged_indexer_workload(spec);
  PagedIndexerProblem host = w.host_problem();
  std::vector<int32_t> lens = {200, 1, 0, 64};
  host.context_lens = lens.data();
  DecodeSteps steps(w, host);
  const PagedIndexerProblem p = steps.d.problem(host);
  IndexerState decode_state{steps.state.data(), steps.state.size()};
  IndexerOptions options;
  options.algo = IndexerAlgo::kFused;
  options.state = &decode_state;
  std::size_t bytes = 0;
  ASSERT_TRUE(indexer_topk_paged_workspace_size(p, &bytes, options).is_ok());
  ASSERT_TRUE(steps.d.workspace.allocate(std::max<std::size_t>(bytes, 1)).is_ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status captured = indexer_topk_paged(p, steps.d.workspace.data(), bytes, stream, options);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t b = 0; b < lens.size(); ++b) {
      lens[b] = std::min<int32_t>(w.context_lens[b], lens[b] + 600 * step + 1);
    }
    steps.host = host;
    steps.d.set_tables(host);
    if (step == 3) perturb_queries(&w, &steps.d, 5);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const Result r = download(steps.d, p);
    steps.check(r, true);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(PagedIndexerDecodeState, LimitsAndBadStates) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const PagedIndexerWorkload w =
      testkit::make_paged_indexer_workload(paged_spec({1000, 200}, 1, 64, 64, 51));
  DevicePaged d;
  d.upload(w, w.host_problem());
  PagedIndexerProblem p = d.problem(w.host_problem());
  DeviceBuffer state;
  ASSERT_TRUE(state.allocate(paged_indexer_state_bytes(2, 1, 8192)).is_ok());
  IndexerState small{state.data(), paged_indexer_state_bytes(2, 1, 64) - 4};
  IndexerOptions options;
  options.state = &small;
  std::size_t bytes = 0;
  EXPECT_EQ(indexer_topk_paged_workspace_size(p, &bytes, options).code(),
            StatusCode::kInvalidArgument);
  IndexerState unaligned{static_cast<unsigned char*>(state.data()) + 2,
                         paged_indexer_state_bytes(2, 1, 64)};
  options.state = &unaligned;
  EXPECT_EQ(indexer_topk_paged_workspace_size(p, &bytes, options).code(),
            StatusCode::kInvalidArgument);
  // k past the state's limit: fused is refused.
  p.k = 8192;
  IndexerState big{state.data(), state.size()};
  options.state = &big;
  options.algo = IndexerAlgo::kFused;
  EXPECT_EQ(indexer_topk_paged_workspace_size(p, &bytes, options).code(),
            StatusCode::kUnsupported);
  // A plan with a state needs one at launch (auto, which runs unfused, and fused alike).
  p.k = 64;
  options.algo = IndexerAlgo::kAuto;
  PagedIndexerPlan plan;
  ASSERT_TRUE(indexer_topk_paged_plan(p, options, &plan).is_ok());
  EXPECT_TRUE(plan.has_state);
  EXPECT_EQ(plan.algo, IndexerAlgo::kUnfused);
  options.algo = IndexerAlgo::kFused;
  ASSERT_TRUE(indexer_topk_paged_plan(p, options, &plan).is_ok());
  EXPECT_EQ(plan.algo, IndexerAlgo::kFused);
  ASSERT_TRUE(d.workspace.allocate(plan.workspace_bytes).is_ok());
  PagedIndexerAddresses addresses{p.q,           p.kv_cache,  p.weights, p.context_lens,
                                  p.block_table, p.indices,   p.values};
  EXPECT_EQ(indexer_topk_paged_launch(plan, addresses, d.workspace.data(), nullptr).code(),
            StatusCode::kInvalidArgument);
  addresses.state = big;
  EXPECT_TRUE(indexer_topk_paged_launch(plan, addresses, d.workspace.data(), nullptr).is_ok());
}

}  // namespace
}  // namespace litetopk::testing
