// indexer_topk_cpu and indexer_logits_cpu: the CPU reference of the DSA indexer (host pointers).
//
// 1. Validate the problem and the host ranges 0 <= ks <= ke <= S.
// 2. Score in fp64 (cpu/indexer_scores.h), round to fp32: the logits, -inf outside [ks, ke).
// 3. indexer_topk_cpu: select_scored_rows (cpu/scored_rows_topk.h) over rows whose keys
//    0..len-1 are the query's keys ks..ke-1, so the selection's indices are relative to ks.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "api/indexer_validation.h"
#include "cpu/indexer_cpu.h"
#include "cpu/indexer_scores.h"
#include "cpu/parallel_for.h"
#include "cpu/run_guarded.h"
#include "cpu/scored_rows_topk.h"
#include "litetopk/indexer.h"

namespace litetopk {

namespace {

// Logits written per work item: small enough to spread a few long rows over all threads.
constexpr int64_t kKeysPerItem = 4096;

struct Range {
  int64_t begin = 0, end = 0;
};

// Query t's range, clamped into [0, S] (the ranges were validated; this only guards the reads).
Range query_range(const IndexerProblem& p, int64_t t) {
  const int64_t begin = std::clamp<int64_t>(p.ks[t], 0, p.num_keys);
  const int64_t end = std::clamp<int64_t>(p.ke[t], begin, p.num_keys);
  return {begin, end};
}

// One piece of one logits row to write: keys [begin, end) of query t.
struct WorkItem {
  int64_t t, begin, end;
};

// The queries as rows for select_scored_rows: row t holds the keys of [ks[t], ke[t]).
cpu::ScoredRows query_rows(const IndexerProblem& p, const cpu::IndexerScorer& scorer) {
  cpu::ScoredRows rows;
  rows.rows = p.num_queries;
  rows.length = [&p](int64_t t) {
    const Range r = query_range(p, t);
    return r.end - r.begin;
  };
  rows.score = [&p, &scorer](int64_t t, int64_t begin, int64_t end, float* out) {
    const int64_t base = query_range(p, t).begin;
    scorer.score_row_f32(t, base + begin, base + end, out);
  };
  return rows;
}

}  // namespace

namespace cpu {

Status indexer_topk_cpu_chunked(const IndexerProblem& p, int64_t max_chunk_floats,
                                int num_threads) {
  Status status = validate_indexer_problem(p);
  if (!status) return status;
  status = validate_indexer_ranges(p, p.ks, p.ke);
  if (!status) return status;
  return run_guarded("indexer_topk_cpu", [&] {
    const IndexerScorer scorer(p);
    return select_scored_rows(query_rows(p, scorer), p.k, p.indices, p.values, max_chunk_floats,
                              num_threads);
  });
}

}  // namespace cpu

Status indexer_topk_cpu(const IndexerProblem& problem) {
  return cpu::indexer_topk_cpu_chunked(problem, cpu::kIndexerChunkFloats,
                                       cpu::hardware_threads());
}

Status indexer_logits_cpu(const IndexerProblem& p, float* logits, int64_t logits_stride) {
  Status status = validate_indexer_inputs(p);
  if (!status) return status;
  status = validate_indexer_ranges(p, p.ks, p.ke);
  if (!status) return status;
  status = validate_indexer_logits_output(p, logits, logits_stride);
  if (!status) return status;
  if (p.num_queries == 0 || p.num_keys == 0) return Status::ok();

  return cpu::run_guarded("indexer_logits_cpu", [&] {
    const cpu::IndexerScorer scorer(p);
    std::vector<WorkItem> items;
    for (int64_t t = 0; t < p.num_queries; ++t) {
      for (int64_t s = 0; s < p.num_keys; s += kKeysPerItem) {
        items.push_back({t, s, std::min(p.num_keys, s + kKeysPerItem)});
      }
    }
    cpu::parallel_for(static_cast<int64_t>(items.size()), cpu::hardware_threads(),
                      [&](int64_t i) {
                        const WorkItem& w = items[i];
                        const Range r = query_range(p, w.t);
                        float* row = logits + w.t * logits_stride;
                        const float neg_inf = -std::numeric_limits<float>::infinity();
                        const int64_t in_begin = std::clamp(r.begin, w.begin, w.end);
                        const int64_t in_end = std::clamp(r.end, in_begin, w.end);
                        std::fill(row + w.begin, row + in_begin, neg_inf);
                        scorer.score_row_f32(w.t, in_begin, in_end, row + in_begin);
                        std::fill(row + in_end, row + w.end, neg_inf);
                      });
    return Status::ok();
  });
}

}  // namespace litetopk
