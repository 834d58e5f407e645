// The fused retrieval path's choices from sizes (retrieval_heuristics.h).
#include "heuristics/retrieval_heuristics.h"

#include <algorithm>

namespace litetopk::heuristics {

FusedRetrievalShape fused_retrieval_shape(int64_t batch, int64_t n, int64_t k, int64_t sm_count) {
  FusedRetrievalShape shape;
  const int64_t tiles = (n + kFusedRetrievalTileRows - 1) / kFusedRetrievalTileRows;
  const int64_t query_blocks =
      std::max<int64_t>(1, (batch + kFusedRetrievalQueryRows - 1) / kFusedRetrievalQueryRows);
  shape.list_capacity = (k + kFusedRetrievalListSlack + 63) / 64 * 64;
  // One block per SM in one wave; every math warpgroup at least one tile; lists within bounds.
  const auto list_bytes_per_split = static_cast<std::size_t>(
      std::max<int64_t>(batch, 1) * kFusedRetrievalMathGroups * shape.list_capacity * 8);
  const auto by_lists = static_cast<int64_t>(kFusedRetrievalListBytes / list_bytes_per_split);
  shape.splits = std::max<int64_t>(sm_count / query_blocks, 1);
  shape.splits = std::min({shape.splits, tiles / 2, kFusedRetrievalMaxSplits, by_lists});
  shape.splits = std::max<int64_t>(shape.splits, 1);
  // The sample: at least kFusedRetrievalSampleRowsPerK * k rows, else none.
  int64_t stride = std::min(kFusedRetrievalSampleStride,
                            tiles * kFusedRetrievalTileRows / (kFusedRetrievalSampleRowsPerK * k));
  if (stride >= 2) {
    const auto row_bytes = static_cast<std::size_t>(std::max<int64_t>(batch, 1) * 4);
    const auto max_tiles = static_cast<int64_t>(kFusedRetrievalSampleBytes / row_bytes) /
                           kFusedRetrievalTileRows;
    while ((tiles + stride - 1) / stride > max_tiles) ++stride;
    shape.sample_stride = stride;
    shape.sample_tiles = (tiles + stride - 1) / stride;
    if (shape.sample_tiles * kFusedRetrievalTileRows < kFusedRetrievalSampleRowsPerK * k) {
      shape.sample_stride = 0;
      shape.sample_tiles = 0;
    }
  }
  const int64_t expected = shape.sample_stride > 0 ? k * shape.sample_stride : n;
  const auto by_pool = static_cast<int64_t>(
      kFusedRetrievalPoolBytes / (static_cast<std::size_t>(std::max<int64_t>(batch, 1)) * 8));
  shape.pool_capacity =
      std::max(2 * k, std::min({kFusedRetrievalPoolMargin * expected, n, by_pool}));
  shape.pool_capacity = (shape.pool_capacity + 63) / 64 * 64;
  return shape;
}

bool retrieval_prefers_fused(int64_t batch, int64_t n, int64_t, int64_t k) {
  // Measured on the H200 (docs/BENCHMARKS.md, "The fused retrieval path"): at batch 64 fused is
  // faster for k 16, for k 1024 over 1M rows and over 5M, slower at batch 1, 16 and 128 and at
  // k 8192 over 1M (its final selection over about 16 k candidates a query, and its corpus
  // read once per 64 queries, cost more than the scores it does not write).
  const bool batch_fits = batch >= kFusedRetrievalMinBatch && batch <= kFusedRetrievalMaxBatch;
  const int64_t rows_needed =
      kFusedRetrievalMinRows * ((k + kFusedRetrievalRowsK - 1) / kFusedRetrievalRowsK);
  return batch_fits && k <= kFusedRetrievalMaxK && (k <= kFusedRetrievalSmallK || n >= rows_needed);
}

}  // namespace litetopk::heuristics
