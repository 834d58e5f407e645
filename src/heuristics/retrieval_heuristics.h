// The fused retrieval path's choices from sizes (docs/retrieval.md, "The fused kernel"): the
// block grid, the candidate lists' capacity, the sample of corpus tiles that sets the gates, and
// when kAuto takes it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace litetopk::heuristics {

constexpr int64_t kFusedRetrievalTileRows = 128;
constexpr int64_t kFusedRetrievalQueryRows = 64;
constexpr int64_t kFusedRetrievalMathGroups = 2;
constexpr int64_t kFusedRetrievalMaxSplits = 512;
// A list holds k plus this many slots: more than one tile's 128 appends, so that a list is
// compacted (its k best kept) before it can overflow.
constexpr int64_t kFusedRetrievalListSlack = 256;
// The sample takes every 16th tile at most (about 16 k survivors per query), at least 4 k rows,
// and its [batch, rows] fp32 scores within 256 MiB; the lists within 1 GiB.
constexpr int64_t kFusedRetrievalSampleStride = 16;
constexpr int64_t kFusedRetrievalSampleRowsPerK = 4;
constexpr std::size_t kFusedRetrievalSampleBytes = std::size_t{256} << 20;
constexpr std::size_t kFusedRetrievalListBytes = std::size_t{1} << 30;
// The pool, where each query's lists end up, holds 4 x the expected survivors (k x the sample
// stride; every row without a sample), at least 2 k, within 512 MiB over the batch.
constexpr int64_t kFusedRetrievalPoolMargin = 4;
constexpr std::size_t kFusedRetrievalPoolBytes = std::size_t{512} << 20;

struct FusedRetrievalShape {
  int64_t splits = 0;         // blocks per 64-query block, each its share of the corpus tiles
  int64_t list_capacity = 0;  // slots per (query, block, math warpgroup) list
  int64_t pool_capacity = 0;  // slots per query in the pool
  int64_t sample_stride = 0;  // tiles; 0: no sample (every non-NaN score passes the first gate)
  int64_t sample_tiles = 0;
};

// The shape for batch queries over n > 0 corpus rows on sm_count SMs (one block each).
FusedRetrievalShape fused_retrieval_shape(int64_t batch, int64_t n, int64_t k, int64_t sm_count);

// kAuto takes the fused path (where it can run) for batches of kFusedRetrievalMinBatch to
// kFusedRetrievalMaxBatch queries and k <= kFusedRetrievalMaxK, over at least
// kFusedRetrievalMinRows rows per kFusedRetrievalRowsK of k unless k <= kFusedRetrievalSmallK.
constexpr int64_t kFusedRetrievalMinBatch = 48;
constexpr int64_t kFusedRetrievalMaxBatch = 96;
constexpr int64_t kFusedRetrievalMaxK = 2048;
constexpr int64_t kFusedRetrievalSmallK = 256;
constexpr int64_t kFusedRetrievalMinRows = 1000000;
constexpr int64_t kFusedRetrievalRowsK = 1024;

bool retrieval_prefers_fused(int64_t batch, int64_t n, int64_t dim, int64_t k);

}  // namespace litetopk::heuristics
