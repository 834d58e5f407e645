// Inputs for the tool's indexer runs: the DSA lightning indexer's q, kv, kv_scale, weights and
// per-query key ranges, generated on the host from a seed (the same spec always gives the same
// bytes, for any thread count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/indexer.h"

namespace litetopk::testkit {

enum class IndexerRanges {
  kCausal,  // a prefill chunk: the T queries are the last T of S tokens, ks = 0, ke = S - T + t + 1
  kFull,    // every query sees every key: ks = 0, ke = S
  kRagged,  // random ranges; every 8th query's range is shorter than k, every 32nd is empty
};

const char* indexer_ranges_name(IndexerRanges ranges);
bool parse_indexer_ranges(const std::string& name, IndexerRanges* ranges);

struct IndexerSpec {
  int64_t T = 0;  // queries
  int64_t S = 0;  // keys
  int64_t H = 64;
  int64_t D = 128;
  int64_t k = 0;
  IndexerRanges ranges = IndexerRanges::kCausal;
  uint64_t seed = 0;
};

// "" when the spec can be generated, else why not (causal needs S >= T; sizes must be >= 1 and S
// must fit the int32 ranges).
std::string indexer_spec_error(const IndexerSpec& spec);
// "T=2048 S=32768 H=64 k=2048"
std::string indexer_shape_label(const IndexerSpec& spec);

struct IndexerWorkload {
  IndexerSpec spec;
  // q [T, H, D] and kv [S, D]: fp8 e4m3 of N(0, 1) samples (e4m3 keeps 3 mantissa bits; the
  // 128-term dot products and the continuous kv_scale keep exact score ties rare).
  std::vector<uint8_t> q;
  std::vector<uint8_t> kv;
  std::vector<float> kv_scale;  // [S], U(0.5, 1.5)
  std::vector<float> weights;   // [T, H], N(0, 1) / sqrt(H): negative weights included
  std::vector<int32_t> ks;      // [T]
  std::vector<int32_t> ke;      // [T]

  // sum_t (ke[t] - ks[t]): the (query, key) pairs that are scored.
  int64_t valid_pairs() const;
  // The floating-point work of the scores: 2 * valid_pairs * H * D.
  double flops() const;
  // A problem over these host arrays; the caller sets indices (and values).
  IndexerProblem host_problem() const;
};

// Generates the inputs in parallel over all hardware threads.
IndexerWorkload make_indexer_workload(const IndexerSpec& spec);

// The rows `queries` of `w` (q, weights, ks, ke sliced; kv and kv_scale shared through pointers
// into `w`, which must outlive the result): a small problem for the CPU reference.
struct IndexerRows {
  std::vector<int64_t> queries;
  std::vector<uint8_t> q;
  std::vector<float> weights;
  std::vector<int32_t> ks;
  std::vector<int32_t> ke;
  IndexerProblem problem;  // host pointers into this struct and into `w`; indices unset
};
// Fills *rows; its problem points into rows' own vectors, so use it in place (do not copy it).
void slice_indexer_rows(const IndexerWorkload& w, const std::vector<int64_t>& queries,
                        IndexerRows* rows);

}  // namespace litetopk::testkit
