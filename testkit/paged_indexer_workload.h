// Inputs for the paged decode indexer (indexer_topk_paged): B requests with next_n query tokens
// each over a paged fp8 cache in DeepGEMM's fp8_paged_mqa_logits layout, generated on the host
// from a seed (the same spec always gives the same bytes, for any thread count).
//
// The cache holds the blocks the requests use plus spare_blocks unused ones; the blocks are a
// random permutation of the cache, so a request's blocks are scattered and no two requests share
// one. Keys and q are fp8 e4m3 of N(0, 1), key scales U(0.5, 1.5), weights N(0, 1) / sqrt(H):
// the prefill workload's generators (indexer_workload.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/indexer.h"
#include "testkit/indexer_workload.h"

namespace litetopk::testkit {

// What the block-table entries past a request's last block hold (the call must never read them).
enum class UnusedTableEntries {
  kStale,     // random blocks of the cache (as a table reused from earlier steps would)
  kMinusOne,  // -1
};

struct PagedIndexerSpec {
  std::vector<int32_t> context_lens;  // one per request (B = its size), each in [0, max_context]
  int64_t next_n = 1;
  int64_t H = 64;
  int64_t D = 128;
  int64_t block_size = 64;
  int64_t k = 0;
  int64_t max_context = 0;   // 0: the longest context
  int64_t max_blocks = 0;    // block-table row length; 0: ceil(max_context / block_size)
  int64_t spare_blocks = 0;  // cache blocks no request uses
  UnusedTableEntries unused_entries = UnusedTableEntries::kStale;
  uint64_t seed = 0;
};

// B contexts of `context` tokens each.
std::vector<int32_t> fixed_context_lens(int64_t batch, int64_t context);
// B ragged contexts of at most `longest` tokens: request 0 has `longest`; requests 7, 15, 23, ...
// are empty; requests 3, 11, 19, ... have fewer than k tokens (uniform in [0, min(k - 1,
// longest)]); the others are uniform in [1, longest] (rarely a multiple of a block size).
std::vector<int32_t> ragged_context_lens(int64_t batch, int64_t longest, int64_t k,
                                         uint64_t seed);

// "" when the spec can be generated, else why not.
std::string paged_indexer_spec_error(const PagedIndexerSpec& spec);
// "B=8 next_n=2 context<=131072 H=64 k=2048"
std::string paged_indexer_shape_label(const PagedIndexerSpec& spec);

struct PagedIndexerWorkload {
  PagedIndexerSpec spec;
  int64_t batch = 0, num_blocks = 0, max_blocks = 0, max_context = 0;
  std::vector<uint8_t> q;             // [B, next_n, H, D] fp8 e4m3
  std::vector<uint8_t> kv_cache;      // [num_blocks, block_size, 1, D + 4] bytes
  std::vector<float> weights;         // [B * next_n, H]
  std::vector<int32_t> context_lens;  // [B]
  std::vector<int32_t> block_table;   // [B, max_blocks]

  // The (query, token) pairs that are scored: the sum of every query's visible tokens.
  int64_t valid_pairs() const;
  // The floating-point work of the scores: 2 * valid_pairs * H * D.
  double flops() const;
  // A problem over these host arrays; the caller sets indices (and values).
  PagedIndexerProblem host_problem() const;
};

// Generates the inputs (the keys in parallel over all hardware threads). The spec must pass
// paged_indexer_spec_error.
PagedIndexerWorkload make_paged_indexer_workload(const PagedIndexerSpec& spec);

// Request b of `w` as a prefill problem over contiguous keys: T = next_n queries (its q and
// weights), S = the tokens its last query sees, kv and kv_scale those tokens gathered from the
// cache in position order, ks = 0 and ke = each query's visible count, so a prefill index is the
// paged token position. A token of a block-table entry outside the cache gets zero key bytes and
// a NaN scale (never selected, as in the paged contract). spec.ranges is kCausal (the ranges are
// causal, clamped at 0 and at max_context) and spec.seed is w's; only the arrays are meant to be
// read. The oracle of the paged indexer's checks (paged_indexer_verify.h).
IndexerWorkload gather_paged_request(const PagedIndexerWorkload& w, int64_t b);

}  // namespace litetopk::testkit
