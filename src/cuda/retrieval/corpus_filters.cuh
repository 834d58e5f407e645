// The filters both retrieval paths apply to a (query, corpus row) pair on the device: the query's
// range and the corpus bitmap (retrieval.h's contract).
#pragma once

#include <cstdint>

namespace litetopk::cuda_retrieval {

// A query's half-open corpus rows [start, end).
struct QueryRows {
  int64_t start;
  int64_t end;
};

// Query b's range clamped into [0, n], an inverted range empty (null arrays: start 0, end n).
__device__ __forceinline__ QueryRows query_rows(const int32_t* starts, const int32_t* ends,
                                                int64_t b, int64_t n) {
  const int64_t start = starts != nullptr ? min(max(int64_t{starts[b]}, int64_t{0}), n) : 0;
  const int64_t end = ends != nullptr ? min(max(int64_t{ends[b]}, start), n) : n;
  return {start, end};
}

// Whether the corpus bitmap (null: every row) allows `row`.
__device__ __forceinline__ bool bitmap_allows(const uint8_t* bitmap, int64_t row) {
  return bitmap == nullptr || ((bitmap[row >> 3] >> (row & 7)) & 1u) != 0;
}

}  // namespace litetopk::cuda_retrieval
