// The CPU indexers' selection driver: exact top-k of rows whose fp32 scores are computed on demand
// (indexer_topk_cpu, indexer_topk_paged_cpu), in a bounded score buffer.
//
// 1. Take consecutive rows while [rows, longest row] fp32 fits max_chunk_floats (at least one).
// 2. Score the chunk's rows into a compacted buffer (row i's keys 0 .. length - 1 at offsets
//    0 .. length - 1) in pieces of up to 4096 keys over num_threads threads.
// 3. select_topk_cpu (kFast) on the chunk: indices are the keys' offsets in their row.
#pragma once

#include <cstdint>
#include <functional>

#include "litetopk/status.h"

namespace litetopk::cpu {

struct ScoredRows {
  int64_t rows = 0;
  // Keys of row r: 0 .. length(r) - 1 (>= 0).
  std::function<int64_t(int64_t row)> length;
  // Writes the fp32 scores of keys [begin, end) of row `row` to out[0 .. end - begin). Called
  // from several threads at once.
  std::function<void(int64_t row, int64_t begin, int64_t end, float* out)> score;
};

// indices and values (optional) are [rows, k]. Checks max_chunk_floats >= 1 and num_threads >= 1
// (kInvalidArgument naming them); k, indices and values are the caller's to validate. May throw
// (allocation, a throwing callback): callers run it inside run_guarded.
Status select_scored_rows(const ScoredRows& rows, int64_t k, int32_t* indices, float* values,
                          int64_t max_chunk_floats, int num_threads);

}  // namespace litetopk::cpu
