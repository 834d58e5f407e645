// The CLI's paged-indexer checker (testkit/paged_indexer_verify.h) and gather_paged_request: the
// gathered request matches the tests' independent gather (tests/common/paged_indexer_testing.h);
// the CPU reference's result passes; corrupted results fail, naming the request and the query.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/paged_indexer_testing.h"
#include "litetopk/indexer.h"
#include "testkit/paged_indexer_verify.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testing {
namespace {

using testkit::IndexerWorkload;
using testkit::PagedIndexerChecker;
using testkit::PagedIndexerSpec;
using testkit::PagedIndexerWorkload;

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

PagedIndexerWorkload make_workload(std::vector<int32_t> lens, int64_t next_n, int64_t k,
                                   int64_t max_context = 0, uint64_t seed = 7) {
  PagedIndexerSpec spec;
  spec.context_lens = std::move(lens);
  spec.next_n = next_n;
  spec.H = 32;
  spec.k = k;
  spec.max_context = max_context;
  spec.spare_blocks = 2;
  spec.seed = seed;
  EXPECT_EQ(testkit::paged_indexer_spec_error(spec), "");
  return testkit::make_paged_indexer_workload(spec);
}

// indexer_topk_paged_cpu's indices [B * next_n, k].
std::vector<int32_t> reference_indices(const PagedIndexerWorkload& w) {
  PagedIndexerProblem p = w.host_problem();
  std::vector<int32_t> indices(size(w.batch * w.spec.next_n * w.spec.k), -2);
  p.indices = indices.data();
  EXPECT_TRUE(indexer_topk_paged_cpu(p).is_ok());
  return indices;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PagedIndexerVerifyRequests, FirstMiddleLast) {
  EXPECT_EQ(testkit::paged_indexer_verify_requests(0), (std::vector<int64_t>{}));
  EXPECT_EQ(testkit::paged_indexer_verify_requests(1), (std::vector<int64_t>{0}));
  EXPECT_EQ(testkit::paged_indexer_verify_requests(2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(testkit::paged_indexer_verify_requests(3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(testkit::paged_indexer_verify_requests(8), (std::vector<int64_t>{0, 3, 7}));
}

// The testkit's gather (through src/formats) against the tests' own (the layout written out),
// with block-table entries outside the cache and contexts cut at max_context.
TEST(GatherPagedRequest, MatchesTheIndependentGather) {
  PagedIndexerWorkload w = make_workload({240, 1, 0, 129, 200}, 3, 16, 250);
  w.block_table[size(0 * w.max_blocks + 1)] = -1;                                  // request 0
  w.block_table[size(3 * w.max_blocks + 2)] = static_cast<int32_t>(w.num_blocks);  // request 3
  w.context_lens[4] = 400;  // past max_context: cut at 250 (the contract; not generated)
  const PagedIndexerProblem p = w.host_problem();
  for (int64_t b = 0; b < w.batch; ++b) {
    SCOPED_TRACE("request " + std::to_string(b));
    const IndexerWorkload mine = testkit::gather_paged_request(w, b);
    const GatheredRequest theirs = gather_request(w, p, b);
    EXPECT_EQ(mine.spec.T, 3);
    EXPECT_EQ(mine.spec.S, theirs.c.S);
    EXPECT_EQ(mine.q, theirs.in.q);
    EXPECT_EQ(mine.weights, theirs.in.weights);
    EXPECT_EQ(mine.kv, theirs.in.kv);
    EXPECT_EQ(mine.ks, theirs.in.ks);
    EXPECT_EQ(mine.ke, theirs.in.ke);
    ASSERT_EQ(mine.kv_scale.size(), theirs.in.kv_scale.size());
    for (std::size_t i = 0; i < mine.kv_scale.size(); ++i) {
      // Bit equality (NaN for the tokens of blocks outside the cache).
      uint32_t a, c;
      std::memcpy(&a, &mine.kv_scale[i], 4);
      std::memcpy(&c, &theirs.in.kv_scale[i], 4);
      ASSERT_EQ(a, c) << "token " << i;
    }
  }
  EXPECT_EQ(testkit::gather_paged_request(w, 4).spec.S, 250);
  EXPECT_TRUE(std::isnan(testkit::gather_paged_request(w, 0).kv_scale[64]));
}

TEST(PagedIndexerChecker, TheReferencePasses) {
  for (int64_t next_n = 1; next_n <= 4; ++next_n) {
    SCOPED_TRACE("next_n " + std::to_string(next_n));
    const uint64_t seed = static_cast<uint64_t>(next_n);
    const PagedIndexerWorkload w =
        make_workload(testkit::ragged_context_lens(9, 700, 64, seed), next_n, 64, 800, seed);
    const std::vector<int32_t> indices = reference_indices(w);
    const PagedIndexerChecker checker(w, testkit::paged_indexer_verify_requests(w.batch),
                                      testkit::kIndexerTolRel);
    EXPECT_EQ(checker.requests(), (std::vector<int64_t>{0, 4, 8}));
    EXPECT_EQ(checker.check(indices.data()), "");
    // Every request, the empty and short ones (3, 7) included.
    std::vector<int64_t> all(size(w.batch));
    for (int64_t b = 0; b < w.batch; ++b) all[size(b)] = b;
    const PagedIndexerChecker every(w, all, testkit::kIndexerTolRel);
    EXPECT_EQ(every.check(indices.data()), "");
  }
}

// Corruptions of the reference result in query 1 of request 2 (next_n = 2, k = 32).
class PagedIndexerCheckerCorrupt : public ::testing::Test {
 protected:
  PagedIndexerCheckerCorrupt()
      : w_(make_workload({500, 80, 600, 20}, 2, 32)),
        reference_(reference_indices(w_)),
        checker_(w_, {0, 2, 3}, testkit::kIndexerTolRel) {}

  int32_t* row() { return &indices_[size((2 * 2 + 1) * 32)]; }
  std::string check() { return checker_.check(indices_.data()); }
  void SetUp() override { indices_ = reference_; }

  PagedIndexerWorkload w_;
  std::vector<int32_t> reference_;
  PagedIndexerChecker checker_;
  std::vector<int32_t> indices_;
};

TEST_F(PagedIndexerCheckerCorrupt, ALowScoringPosition) {
  // The visible position with the lowest score (query 1 of request 2 sees all 600 tokens).
  PagedIndexerProblem p = w_.host_problem();
  std::vector<float> logits(size(w_.batch * 2 * w_.max_context));
  ASSERT_TRUE(indexer_logits_paged_cpu(p, logits.data(), w_.max_context).is_ok());
  const float* scores = &logits[size((2 * 2 + 1) * w_.max_context)];
  const auto lowest = static_cast<int32_t>(std::min_element(scores, scores + 600) - scores);
  ASSERT_EQ(std::find(row(), row() + 32, lowest), row() + 32);
  row()[5] = lowest;
  const std::string error = check();
  EXPECT_TRUE(contains(error, "request 2 (context 600), query 1")) << error;
  EXPECT_TRUE(contains(error, "below the reference's k-th score")) << error;
}

TEST_F(PagedIndexerCheckerCorrupt, ADuplicate) {
  row()[7] = row()[3];
  EXPECT_TRUE(contains(check(), "selected twice")) << check();
}

TEST_F(PagedIndexerCheckerCorrupt, OutsideTheVisibleCount) {
  row()[0] = 600;
  EXPECT_TRUE(contains(check(), "outside [0, 600)")) << check();
  // Query 0 sees one token less.
  indices_ = reference_;
  indices_[size(2 * 2 * 32)] = 599;
  EXPECT_TRUE(contains(check(), "query 0 (range [0, 599))")) << check();
}

TEST_F(PagedIndexerCheckerCorrupt, PaddingAndCounts) {
  row()[31] = -1;
  EXPECT_TRUE(contains(check(), "31 valid indices before the -1 padding, the reference has 32"))
      << check();
  // Request 3 has 20 tokens: 19 and 20 valid, then -1.
  indices_ = reference_;
  indices_[size(3 * 2 * 32 + 25)] = 4;
  EXPECT_TRUE(contains(check(), "request 3 (context 20), query 0")) << check();
  EXPECT_TRUE(contains(check(), "slot 25 holds 4 after the valid prefix")) << check();
  // A poisoned (unwritten) output.
  indices_ = reference_;
  std::fill(row(), row() + 32, static_cast<int32_t>(0xabababab));
  EXPECT_TRUE(contains(check(), "outside [0, 600)")) << check();
}

TEST_F(PagedIndexerCheckerCorrupt, UncheckedRequestsAreNotRead) {
  std::fill(indices_.begin() + 2 * 32, indices_.begin() + 4 * 32, 12345);  // request 1
  EXPECT_EQ(check(), "");
}

}  // namespace
}  // namespace litetopk::testing
