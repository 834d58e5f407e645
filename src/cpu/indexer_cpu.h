// The CPU indexer as seen from its entry points (indexer_reference.cpp) and the tests.
#pragma once

#include <cstdint>

#include "litetopk/indexer.h"

namespace litetopk::cpu {

// Default bound on the fp32 score buffer of indexer_topk_cpu: 64M floats (256 MiB).
constexpr int64_t kIndexerChunkFloats = int64_t{1} << 26;

// indexer_topk_cpu with explicit knobs: queries are processed in chunks of consecutive rows whose
// compacted scores ([rows, max range length] fp32) stay within `max_chunk_floats` (a chunk always
// holds at least one row), scored on `num_threads` threads, then selected by select_topk_cpu
// (kFast). Validates like indexer_topk_cpu; never throws.
Status indexer_topk_cpu_chunked(const IndexerProblem& problem, int64_t max_chunk_floats,
                                int num_threads);

// indexer_topk_paged_cpu with the same knobs (one row per query, b * next_n + j).
Status indexer_topk_paged_cpu_chunked(const PagedIndexerProblem& problem,
                                      int64_t max_chunk_floats, int num_threads);

}  // namespace litetopk::cpu
