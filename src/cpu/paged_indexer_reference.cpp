// indexer_topk_paged_cpu: the CPU reference of the paged decode indexer (host pointers).
//
// 1. Validate the problem (shapes, pointers; the contents of context_lens and block_table are not
//    checked: out-of-range values follow the rules in litetopk/indexer.h).
// 2. Row r = b * next_n + j holds the visible_tokens positions of its query
//    (litetopk/paged_kv_layout.h). A piece [begin, end) of a row is scored block by block, reading
//    each block's keys and scales in place from kv_cache (cpu/indexer_scores.h, fp64 rounded to
//    fp32); positions in a block whose table entry is outside [0, num_blocks) get NaN, so they are
//    never selected and their bytes are never read.
// 3. select_scored_rows (cpu/scored_rows_topk.h): the indices are the token positions.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "api/paged_indexer_validation.h"
#include "cpu/indexer_cpu.h"
#include "cpu/indexer_scores.h"
#include "cpu/parallel_for.h"
#include "cpu/run_guarded.h"
#include "cpu/scored_rows_topk.h"
#include "litetopk/paged_kv_layout.h"
#include "litetopk/indexer.h"

namespace litetopk {

namespace {

// The queries as a prefill problem without keys: what IndexerScorer::score_keys reads.
IndexerProblem query_view(const PagedIndexerProblem& p) {
  IndexerProblem view;
  view.q = p.q;
  view.weights = p.weights;
  view.num_queries = p.batch * p.next_n;
  view.num_heads = p.num_heads;
  view.head_dim = p.head_dim;
  return view;
}

int64_t row_length(const PagedIndexerProblem& p, int64_t row) {
  return paged_kv::visible_tokens(p.context_lens[row / p.next_n], p.next_n, row % p.next_n,
                                  p.max_context);
}

// fp32 scores of positions [begin, end) of row `row` into out[0 .. end - begin).
void score_positions(const PagedIndexerProblem& p, const cpu::IndexerScorer& scorer, int64_t row,
                     int64_t begin, int64_t end, float* out) {
  const auto* cache = static_cast<const uint8_t*>(p.kv_cache);
  const int32_t* table_row = p.block_table + (row / p.next_n) * p.max_blocks;
  for (int64_t position = begin; position < end;) {
    const int64_t slot = position % p.block_size;
    const int64_t count = std::min(end - position, p.block_size - slot);
    const int32_t entry = table_row[position / p.block_size];
    float* piece = out + (position - begin);
    if (paged_kv::block_in_cache(entry, p.num_blocks)) {
      const auto* scales = reinterpret_cast<const float*>(
          cache + paged_kv::scale_offset(entry, slot, p.block_size, p.head_dim));
      scorer.score_keys_f32(row,
                            cache + paged_kv::key_offset(entry, slot, p.block_size, p.head_dim),
                            scales, count, piece);
    } else {
      std::fill(piece, piece + count, std::numeric_limits<float>::quiet_NaN());
    }
    position += count;
  }
}

}  // namespace

namespace cpu {

Status indexer_topk_paged_cpu_chunked(const PagedIndexerProblem& p, int64_t max_chunk_floats,
                                      int num_threads) {
  if (Status s = validate_paged_indexer_problem(p); !s) return s;
  return run_guarded("indexer_topk_paged_cpu", [&] {
    const IndexerScorer scorer(query_view(p));
    ScoredRows rows;
    rows.rows = p.batch * p.next_n;
    rows.length = [&p](int64_t row) { return row_length(p, row); };
    rows.score = [&p, &scorer](int64_t row, int64_t begin, int64_t end, float* out) {
      score_positions(p, scorer, row, begin, end, out);
    };
    return select_scored_rows(rows, p.k, p.indices, p.values, max_chunk_floats, num_threads);
  });
}

}  // namespace cpu

Status indexer_logits_paged_cpu(const PagedIndexerProblem& problem, float* logits,
                                int64_t logits_stride) {
  if (Status s = validate_paged_indexer_inputs(problem); !s) return s;
  if (Status s = validate_paged_indexer_logits_output(problem, logits, logits_stride); !s) {
    return s;
  }
  return cpu::run_guarded("indexer_logits_paged_cpu", [&] {
    const cpu::IndexerScorer scorer(query_view(problem));
    const int64_t rows = problem.batch * problem.next_n;
    cpu::parallel_for(rows, cpu::hardware_threads(), [&](int64_t row) {
      float* out = logits + row * logits_stride;
      const int64_t length = row_length(problem, row);
      score_positions(problem, scorer, row, 0, length, out);
      std::fill(out + length, out + problem.max_context, -std::numeric_limits<float>::infinity());
    });
    return Status::ok();
  });
}

Status indexer_topk_paged_cpu(const PagedIndexerProblem& problem) {
  return cpu::indexer_topk_paged_cpu_chunked(problem, cpu::kIndexerChunkFloats,
                                             cpu::hardware_threads());
}

}  // namespace litetopk
