// The layout of IndexerState (litetopk/indexer.h): the hot sample a chunk leaves for the next one.
// Shared by the API (sizes), the writer (after every indexer_topk call with a state) and the fused
// kernel (its reader). int32 words:
//   [0]           count: positions in the sample, 0 .. capacity (0: no sample, a cold start)
//   [1]           capacity = kPositionsPerK * k
//   [2]           kMagic when the writer filled it: the reader ignores a sample without it, so
//                 a zeroed (or never written) state is a cold start, never a wrong bound
//   [3 .. 63]     reserved
//   [64 ..]       positions: the key indices (absolute, 0 .. S-1) the previous chunk's queries
//                 chose most often, distinct, in no particular order
#pragma once

#include <cstddef>
#include <cstdint>

namespace litetopk::hot_sample {

// Positions kept per k selected: the sample's k-th best score bounds a query's k-th best from
// below, and a sample of a few k gives a bound that holds up when part of the hot set went cold.
constexpr int64_t kPositionsPerK = 4;
constexpr int kHeaderWords = 64;
constexpr int kCountWord = 0;
constexpr int kCapacityWord = 1;
constexpr int kMagicWord = 2;
constexpr int32_t kMagic = 0x4c54484f;

inline int64_t capacity(int64_t k) { return k > 0 ? kPositionsPerK * k : 0; }
inline std::size_t state_bytes(int64_t k) {
  return static_cast<std::size_t>(kHeaderWords + capacity(k)) * sizeof(int32_t);
}

}  // namespace litetopk::hot_sample
