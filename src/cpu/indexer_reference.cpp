// indexer_topk_cpu and indexer_logits_cpu: the CPU reference of the DSA indexer (host pointers).
//
// 1. Validate the problem and the host ranges 0 <= ks <= ke <= S.
// 2. Score in fp64 (cpu/indexer_scores.h), round to fp32: the logits, -inf outside [ks, ke).
// 3. indexer_topk_cpu: score chunks of consecutive queries into a compacted buffer (row r holds
//    keys ks..ke-1 of its query at offsets 0..len-1, so the selection's indices are relative to
//    ks), at most kIndexerChunkFloats per chunk, and run select_topk_cpu (kFast) on each chunk.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "api/format.h"
#include "api/indexer_validation.h"
#include "cpu/indexer_cpu.h"
#include "cpu/indexer_scores.h"
#include "cpu/parallel_for.h"
#include "cpu/run_guarded.h"
#include "litetopk/indexer.h"
#include "litetopk/select.h"

namespace litetopk {

namespace {

// Keys scored per work item: small enough to spread a few long rows over all threads.
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

// One piece of one row's keys to score: row `row` of the output, keys [begin, end) of query t.
struct WorkItem {
  int64_t t, row, begin, end;
};

void add_items(std::vector<WorkItem>* items, int64_t t, int64_t row, int64_t begin, int64_t end) {
  for (int64_t s = begin; s < end; s += kKeysPerItem) {
    items->push_back({t, row, s, std::min(end, s + kKeysPerItem)});
  }
}


Status topk_chunks(const IndexerProblem& p, int64_t max_chunk_floats, int num_threads) {
  const cpu::IndexerScorer scorer(p);
  std::vector<float> buffer;
  std::vector<int32_t> lengths;
  std::vector<WorkItem> items;
  for (int64_t t0 = 0; t0 < p.num_queries;) {
    // Grow the chunk while [rows, widest range] fits the budget (always at least one row).
    int64_t t1 = t0, width = 0;
    while (t1 < p.num_queries) {
      const Range r = query_range(p, t1);
      const int64_t new_width = std::max(width, r.end - r.begin);
      if (t1 > t0 && (t1 + 1 - t0) * new_width > max_chunk_floats) break;
      width = new_width;
      ++t1;
    }
    const int64_t rows = t1 - t0;
    buffer.assign(static_cast<std::size_t>(std::max<int64_t>(1, rows * width)), 0.0f);
    lengths.assign(static_cast<std::size_t>(rows), 0);
    items.clear();
    for (int64_t i = 0; i < rows; ++i) {
      const Range r = query_range(p, t0 + i);
      lengths[i] = static_cast<int32_t>(r.end - r.begin);
      add_items(&items, t0 + i, i, r.begin, r.end);
    }
    cpu::parallel_for(static_cast<int64_t>(items.size()), num_threads, [&](int64_t i) {
      const WorkItem& w = items[i];
      const int64_t base = query_range(p, w.t).begin;
      scorer.score_row_f32(w.t, w.begin, w.end, buffer.data() + w.row * width + (w.begin - base));
    });

    SelectProblem select;
    select.scores = buffer.data();
    select.dtype = DType::kFloat32;
    select.batch = rows;
    select.n = width;
    select.row_stride = width;
    select.row_ends = lengths.data();
    select.k = p.k;
    select.indices = p.indices + t0 * p.k;
    select.values = p.values ? p.values + t0 * p.k : nullptr;
    Status status = select_topk_cpu(select, CpuSelectAlgo::kFast, num_threads);
    if (!status) return status;
    t0 = t1;
  }
  return Status::ok();
}

}  // namespace

namespace cpu {

Status indexer_topk_cpu_chunked(const IndexerProblem& p, int64_t max_chunk_floats,
                                int num_threads) {
  Status status = validate_indexer_problem(p);
  if (!status) return status;
  status = validate_indexer_ranges(p, p.ks, p.ke);
  if (!status) return status;
  if (max_chunk_floats < 1) {
    return detail::invalid_argument("max_chunk_floats must be >= 1, got ", max_chunk_floats);
  }
  if (num_threads < 1) {
    return detail::invalid_argument("num_threads must be >= 1, got ", num_threads);
  }
  if (p.num_queries == 0) return Status::ok();
  return run_guarded("indexer_topk_cpu",
                     [&] { return topk_chunks(p, max_chunk_floats, num_threads); });
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
    for (int64_t t = 0; t < p.num_queries; ++t) add_items(&items, t, t, 0, p.num_keys);
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
