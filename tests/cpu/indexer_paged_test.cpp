// The paged decode indexer's CPU reference (indexer_topk_paged_cpu) against an independent brute
// force: each request's visible tokens gathered from the paged cache into contiguous [S, D] keys
// (offsets worked out here from DeepGEMM's layout, tokens of out-of-range blocks given a NaN
// scale) and run through the prefill reference indexer_topk_cpu with ks = 0, ke = the visible
// count. Random and adversarial inputs: next_n 1-4, short, empty and block-edge contexts, ties,
// NaN and inf in scales and weights, out-of-range block tables and context lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/indexer_testing.h"
#include "common/paged_indexer_testing.h"
#include "cpu/indexer_cpu.h"
#include "litetopk/fp8_e4m3.h"
#include "litetopk/indexer.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testing {
namespace {

using testkit::PagedIndexerSpec;
using testkit::PagedIndexerWorkload;

constexpr int32_t kSentinel = 0x5a5a5a5a;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// ---- running the reference and the brute force ----

struct Result {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

// indexer_topk_paged_cpu (or the chunked variant when max_chunk_floats > 0) on `p` with
// sentinel-filled outputs.
Result run_paged(PagedIndexerProblem p, bool with_values = true, int64_t max_chunk_floats = 0,
                 int threads = 2) {
  Result r;
  r.indices.assign(size(p.batch * p.next_n * p.k), kSentinel);
  r.values.assign(r.indices.size(), 12345.0f);
  p.indices = r.indices.data();
  p.values = with_values ? r.values.data() : nullptr;
  const Status status = max_chunk_floats > 0
                            ? cpu::indexer_topk_paged_cpu_chunked(p, max_chunk_floats, threads)
                            : indexer_topk_paged_cpu(p);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return r;
}

// Each row's positions as a set (the order within a row is unspecified).
std::vector<std::set<int32_t>> row_sets(const Result& r, int64_t k) {
  std::vector<std::set<int32_t>> rows;
  for (std::size_t i = 0; i < r.indices.size(); i += size(k)) {
    rows.emplace_back(r.indices.begin() + static_cast<std::ptrdiff_t>(i),
                      r.indices.begin() + static_cast<std::ptrdiff_t>(i + size(k)));
  }
  return rows;
}

// The valid values of a result row, sorted (NaN never appears in a valid slot).
std::vector<float> sorted_values(const int32_t* indices, const float* values, int64_t k) {
  std::vector<float> out;
  for (int64_t i = 0; i < k && indices[i] != -1; ++i) out.push_back(values[i]);
  std::sort(out.begin(), out.end());
  return out;
}

// Request b of the paged result against the brute force: per query the same multiset of selected
// values, -1 padding after the valid prefix, distinct positions inside the visible count, each
// with the brute force's own score (from indexer_logits_cpu) as its value; and, with
// `oracle`, the fp64 oracle check (only for finite inputs: its tolerance is infinite otherwise).
::testing::AssertionResult check_request(const PagedIndexerWorkload& w,
                                         const PagedIndexerProblem& p, const Result& r, int64_t b,
                                         bool oracle) {
  const GatheredRequest g = gather_request(w, p, b);
  const int64_t rows = p.next_n, k = p.k, S = g.c.S;
  std::vector<int32_t> brute_indices(size(rows * k), kSentinel);
  std::vector<float> brute_values(brute_indices.size());
  const IndexerProblem brute =
      make_indexer_problem(g.c, g.in, brute_indices.data(), brute_values.data());
  if (Status s = indexer_topk_cpu(brute); !s) {
    return ::testing::AssertionFailure() << "brute force failed: " << s.to_string();
  }
  std::vector<float> logits(size(std::max<int64_t>(1, rows * S)));
  if (Status s = indexer_logits_cpu(brute, logits.data(), S); !s) {
    return ::testing::AssertionFailure() << "brute-force logits failed: " << s.to_string();
  }
  const int32_t* got_indices = r.indices.data() + b * rows * k;
  const float* got_values = r.values.data() + b * rows * k;
  for (int64_t j = 0; j < rows; ++j) {
    const int32_t* row = got_indices + j * k;
    const float* row_values = got_values + j * k;
    const std::vector<float> got = sorted_values(row, row_values, k);
    const std::vector<float> want =
        sorted_values(brute_indices.data() + j * k, brute_values.data() + j * k, k);
    auto fail = [&]() {
      return ::testing::AssertionFailure()
             << "request " << b << " (context " << p.context_lens[b] << ") query " << j
             << " (visible " << g.in.ke[size(j)] << "): ";
    };
    if (got != want) {
      return fail() << got.size() << " values selected, brute force " << want.size()
                    << " (or the value multisets differ)";
    }
    std::set<int32_t> seen;
    for (int64_t i = 0; i < k; ++i) {
      const int32_t index = row[i];
      if (i >= static_cast<int64_t>(got.size())) {
        if (index != -1) return fail() << "slot " << i << " must be -1, got " << index;
        continue;
      }
      if (index < 0 || index >= g.in.ke[size(j)]) {
        return fail() << "slot " << i << ": position " << index << " is not visible";
      }
      if (!seen.insert(index).second) return fail() << "duplicate position " << index;
      const float score = logits[size(j * S + index)];
      if (std::isnan(score) || !(score == row_values[i])) {
        return fail() << "position " << index << " has value " << row_values[i]
                      << ", its score is " << score;
      }
    }
  }
  if (oracle) return check_indexer_oracle(g.c, g.in, got_indices, got_values);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_all_requests(const PagedIndexerWorkload& w,
                                              const PagedIndexerProblem& p, const Result& r,
                                              bool oracle = true) {
  for (int64_t b = 0; b < p.batch; ++b) {
    ::testing::AssertionResult result = check_request(w, p, r, b, oracle);
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}


PagedIndexerWorkload make_workload(const PagedIndexerSpec& spec) {
  EXPECT_EQ(testkit::paged_indexer_spec_error(spec), "");
  return testkit::make_paged_indexer_workload(spec);
}

// ---- a case small enough to work out by hand ----
//
// One request, next_n = 2, context 5, H = 32; its one block is block 2 of a 3-block cache. Only
// head 0 of each query is nonzero (q = e0, weight 1) and token p's key is (p + 1) e0 with scale 1,
// except token 4's scale 10: scores 1, 2, 3, 4, 50. Query 0 sees tokens 0..3, query 1 all five.
TEST(PagedIndexerHandCase, PositionsValuesAndLayout) {
  PagedIndexerSpec spec = paged_spec({5}, 2, 32, 2, 1);
  spec.spare_blocks = 2;
  PagedIndexerWorkload w = make_workload(spec);
  ASSERT_EQ(w.num_blocks, 3);
  w.block_table = {2};
  std::fill(w.q.begin(), w.q.end(), fp8::float_to_e4m3(0.0f));
  std::fill(w.weights.begin(), w.weights.end(), 0.0f);
  std::fill(w.kv_cache.begin(), w.kv_cache.end(), 0);
  for (int64_t j = 0; j < 2; ++j) {
    w.q[size(j * 32 * 128)] = fp8::float_to_e4m3(1.0f);
    w.weights[size(j * 32)] = 1.0f;
  }
  for (int64_t pos = 0; pos < 5; ++pos) {
    key_bytes(&w, 2, pos)[0] = fp8::float_to_e4m3(static_cast<float>(pos + 1));
    write_scale(&w, 2, pos, pos == 4 ? 10.0f : 1.0f);
  }
  const Result r = run_paged(w.host_problem());
  EXPECT_EQ((std::set<int32_t>(r.indices.begin(), r.indices.begin() + 2)),
            (std::set<int32_t>{2, 3}));
  EXPECT_EQ((std::set<int32_t>(r.indices.begin() + 2, r.indices.end())),
            (std::set<int32_t>{3, 4}));
  EXPECT_EQ(sorted_values(r.indices.data(), r.values.data(), 2), (std::vector<float>{3, 4}));
  EXPECT_EQ(sorted_values(r.indices.data() + 2, r.values.data() + 2, 2),
            (std::vector<float>{4, 50}));
  EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
}

// ---- random inputs ----

TEST(PagedIndexerReference, RandomRaggedEveryNextN) {
  for (int64_t next_n = 1; next_n <= 4; ++next_n) {
    for (int64_t H : {int64_t{32}, int64_t{64}}) {
      SCOPED_TRACE("next_n " + std::to_string(next_n) + " H " + std::to_string(H));
      const uint64_t seed = static_cast<uint64_t>(10 * next_n + H);
      const PagedIndexerWorkload w =
          make_workload(paged_spec(testkit::ragged_context_lens(9, 700, 64, seed), next_n, H, 64,
                                seed));
      const Result r = run_paged(w.host_problem());
      EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
    }
  }
}

TEST(PagedIndexerReference, ShortEmptyAndBlockEdgeContexts) {
  // Contexts below next_n (the first queries see nothing), at and around block edges, below k.
  const std::vector<int32_t> lens = {0, 1, 2, 3, 4, 5, 63, 64, 65, 127, 128, 129, 300};
  for (int64_t next_n : {int64_t{1}, int64_t{4}}) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    const PagedIndexerWorkload w = make_workload(paged_spec(lens, next_n, 64, 100, 3));
    const Result r = run_paged(w.host_problem());
    EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
    // Request 0 (empty) and the first queries of request 1 (context 1 < next_n) are all -1.
    for (int64_t i = 0; i < next_n * 100; ++i) EXPECT_EQ(r.indices[size(i)], -1);
  }
}

TEST(PagedIndexerReference, LongContextsK2048) {
  const PagedIndexerWorkload w = make_workload(paged_spec({20000, 9000}, 2, 64, 2048, 77));
  const Result r = run_paged(w.host_problem());
  EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
}

// ---- ties ----

TEST(PagedIndexerReference, ConstantScoresTieEverywhere) {
  for (bool zero_weights : {false, true}) {
    SCOPED_TRACE(zero_weights ? "zero weights: every score 0" : "identical keys, scale 1");
    PagedIndexerWorkload w = make_workload(paged_spec({200, 37, 64, 130}, 3, 32, 50, 5));
    make_keys_identical(&w);
    if (zero_weights) std::fill(w.weights.begin(), w.weights.end(), 0.0f);
    const Result r = run_paged(w.host_problem());
    EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
    // Every row holds min(k, visible) positions, all with the row's one score.
    const PagedIndexerProblem p = w.host_problem();
    for (int64_t row = 0; row < p.batch * p.next_n; ++row) {
      const std::vector<float> got =
          sorted_values(&r.indices[size(row * p.k)], &r.values[size(row * p.k)], p.k);
      EXPECT_EQ(static_cast<int64_t>(got.size()),
                std::min(p.k, visible(p, row / p.next_n, row % p.next_n)));
      if (!got.empty()) {
        EXPECT_EQ(got.front(), got.back()) << "row " << row;
      }
    }
  }
}

// ---- NaN and inf ----

TEST(PagedIndexerReference, NanAndInfInScalesAndWeights) {
  PagedIndexerWorkload w =
      make_workload(paged_spec(testkit::ragged_context_lens(8, 400, 30, 11), 2, 64, 30, 11));
  write_special_scales(&w);
  const int64_t H = w.spec.H;
  w.weights[size(0 * H + 3)] = kNaN;   // request 0 query 0: every score NaN
  w.weights[size(3 * H + 5)] = kInf;   // request 1 query 1: +inf, or NaN where relu gives 0
  w.weights[size(4 * H + 1)] = -kInf;  // request 2 query 0
  const Result r = run_paged(w.host_problem());
  EXPECT_TRUE(check_all_requests(w, w.host_problem(), r, /*oracle=*/false));
  for (int64_t i = 0; i < w.spec.k; ++i) EXPECT_EQ(r.indices[size(i)], -1) << "all-NaN row";
}

// ---- the caller's contract: out-of-range device values ----

TEST(PagedIndexerReference, OutOfRangeBlockEntriesAreUnselectable) {
  PagedIndexerWorkload w = make_workload(paged_spec({500, 300, 64, 200}, 2, 32, 40, 13));
  const PagedIndexerProblem p = w.host_problem();
  break_block_entries(&w);
  const Result r = run_paged(w.host_problem());
  EXPECT_TRUE(check_all_requests(w, w.host_problem(), r));
  for (int64_t row = 0; row < p.batch * p.next_n; ++row) {
    const int64_t b = row / p.next_n;
    for (int64_t i = 0; i < p.k; ++i) {
      const int32_t position = r.indices[size(row * p.k + i)];
      if (position < 0) continue;
      const int32_t entry = w.block_table[size(b * p.max_blocks + position / p.block_size)];
      EXPECT_TRUE(entry >= 0 && entry < w.num_blocks)
          << "row " << row << " selected position " << position << " of block entry " << entry;
    }
  }
  // Request 2 has no selectable token: all -1.
  for (int64_t i = 0; i < p.next_n * p.k; ++i) {
    EXPECT_EQ(r.indices[size(2 * p.next_n * p.k + i)], -1);
  }
}

TEST(PagedIndexerReference, ContextsAreCutAtMaxContextAndNegativeOnesAreEmpty) {
  PagedIndexerWorkload w = make_workload(paged_spec({900, 500, 700, 100}, 3, 64, 64, 17));
  PagedIndexerProblem p = w.host_problem();
  p.max_context = 600;  // request 0 and 2 are cut
  w.context_lens[1] = -5;
  w.context_lens[3] = std::numeric_limits<int32_t>::min();
  Result r = run_paged(p);
  EXPECT_TRUE(check_all_requests(w, p, r));
  for (int64_t row = 0; row < p.batch * p.next_n; ++row) {
    for (int64_t i = 0; i < p.k; ++i) {
      EXPECT_LT(r.indices[size(row * p.k + i)], 600) << "row " << row;
    }
  }
  // A huge length reads no table entry past max_context's blocks.
  w.context_lens[0] = std::numeric_limits<int32_t>::max();
  r = run_paged(p);
  EXPECT_TRUE(check_all_requests(w, p, r));
}

TEST(PagedIndexerReference, UnusedTableEntriesAreNeverRead) {
  PagedIndexerSpec spec = paged_spec({130, 10, 0, 257}, 4, 32, 16, 19);
  spec.max_blocks = 9;  // wider than any request needs
  const PagedIndexerWorkload stale = make_workload(spec);
  spec.unused_entries = testkit::UnusedTableEntries::kMinusOne;
  const PagedIndexerWorkload minus_one = make_workload(spec);
  EXPECT_NE(stale.block_table, minus_one.block_table);
  EXPECT_EQ(stale.kv_cache, minus_one.kv_cache);
  const Result a = run_paged(stale.host_problem());
  const Result b = run_paged(minus_one.host_problem());
  EXPECT_TRUE(check_all_requests(stale, stale.host_problem(), a));
  EXPECT_EQ(row_sets(a, spec.k), row_sets(b, spec.k));  // random scores: no ties
}

// ---- knobs and optional outputs ----

TEST(PagedIndexerReference, ChunksThreadsAndOptionalValues) {
  const PagedIndexerWorkload w =
      make_workload(paged_spec(testkit::ragged_context_lens(6, 900, 48, 23), 3, 64, 48, 23));
  const PagedIndexerProblem p = w.host_problem();
  const Result whole = run_paged(p);
  ASSERT_TRUE(check_all_requests(w, p, whole));
  for (int64_t chunk : {int64_t{1}, int64_t{899}, int64_t{5000}}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE("max_chunk_floats " + std::to_string(chunk) + " threads " +
                   std::to_string(threads));
      const Result r = run_paged(p, true, chunk, threads);
      EXPECT_TRUE(check_all_requests(w, p, r));
    }
  }
  const Result without = run_paged(p, false);
  EXPECT_EQ(without.values, std::vector<float>(whole.values.size(), 12345.0f));
  EXPECT_EQ(row_sets(without, p.k), row_sets(whole, p.k));  // random scores: no ties
}

TEST(PagedIndexerReference, ChunkedRejectsBadKnobs) {
  const PagedIndexerWorkload w = make_workload(paged_spec({70}, 1, 32, 4, 29));
  std::vector<int32_t> indices(4, kSentinel);
  PagedIndexerProblem p = w.host_problem();
  p.indices = indices.data();
  Status status = cpu::indexer_topk_paged_cpu_chunked(p, 0, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_chunk_floats must"), std::string::npos);
  status = cpu::indexer_topk_paged_cpu_chunked(p, 100, 0);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("num_threads must"), std::string::npos);
  EXPECT_EQ(indices, std::vector<int32_t>(4, kSentinel));
}

// ---- the testkit workload itself ----

TEST(PagedIndexerWorkload, LayoutTableAndDeterminism) {
  PagedIndexerSpec spec = paged_spec({130, 0, 64, 7}, 2, 32, 8, 31);
  spec.spare_blocks = 4;
  const PagedIndexerWorkload w = make_workload(spec);
  EXPECT_EQ(w.num_blocks, 3 + 0 + 1 + 1 + 4);
  EXPECT_EQ(w.max_blocks, 3);  // ceil(130 / 64)
  EXPECT_EQ(w.max_context, 130);
  EXPECT_EQ(w.kv_cache.size(), size(w.num_blocks * 64 * (128 + 4)));
  // The requests' blocks are distinct blocks of the cache.
  std::set<int32_t> used;
  const int64_t needed[] = {3, 0, 1, 1};
  for (int64_t b = 0; b < 4; ++b) {
    for (int64_t i = 0; i < needed[b]; ++i) {
      const int32_t block = w.block_table[size(b * w.max_blocks + i)];
      EXPECT_TRUE(block >= 0 && block < w.num_blocks);
      EXPECT_TRUE(used.insert(block).second) << "block " << block << " used twice";
    }
  }
  // Scales are U(0.5, 1.5) in the scale area of each block.
  for (int64_t block = 0; block < w.num_blocks; ++block) {
    for (int64_t slot = 0; slot < 64; ++slot) {
      const float scale = read_scale(w, block, slot);
      EXPECT_TRUE(scale >= 0.5f && scale <= 1.5f) << block << " " << slot << " " << scale;
    }
  }
  EXPECT_EQ(w.valid_pairs(), (129 + 130) + 0 + (63 + 64) + (6 + 7));
  const PagedIndexerWorkload again = make_workload(spec);
  EXPECT_EQ(again.kv_cache, w.kv_cache);
  EXPECT_EQ(again.block_table, w.block_table);
  EXPECT_EQ(again.q, w.q);
  EXPECT_EQ(again.weights, w.weights);
  EXPECT_EQ(testkit::paged_indexer_shape_label(spec), "B=4 next_n=2 context<=130 H=32 k=8");
}

TEST(PagedIndexerWorkload, RaggedLengthsAndSpecErrors) {
  const std::vector<int32_t> lens = testkit::ragged_context_lens(16, 5000, 100, 3);
  EXPECT_EQ(lens[0], 5000);
  EXPECT_EQ(lens[7], 0);
  EXPECT_EQ(lens[15], 0);
  EXPECT_LT(lens[3], 100);
  EXPECT_LT(lens[11], 100);
  for (int32_t length : lens) EXPECT_TRUE(length >= 0 && length <= 5000);
  PagedIndexerSpec spec = paged_spec({10, 20}, 1, 64, 4, 1);
  spec.max_context = 15;
  EXPECT_NE(testkit::paged_indexer_spec_error(spec).find("context_lens[1]"), std::string::npos);
  spec.max_context = 0;
  spec.max_blocks = 0;
  EXPECT_EQ(testkit::paged_indexer_spec_error(spec), "");
  spec.context_lens.clear();
  EXPECT_NE(testkit::paged_indexer_spec_error(spec), "");
}

}  // namespace
}  // namespace litetopk::testing
