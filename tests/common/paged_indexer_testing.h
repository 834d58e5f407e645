// Shared test support for the paged decode indexer (CPU and GPU suites): DeepGEMM's paged cache
// layout written out independently of src/formats, each query's visible count from the contract's
// formula, and one request gathered into a prefill problem (so that the prefill checks of
// indexer_testing.h apply).
#pragma once

#include <cstdint>
#include <vector>

#include "common/indexer_testing.h"
#include "litetopk/indexer.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testing {

// Byte offset of block `block` in the cache; pointer to slot `slot`'s key bytes; its scale.
int64_t block_base(const testkit::PagedIndexerWorkload& w, int64_t block);
uint8_t* key_bytes(testkit::PagedIndexerWorkload* w, int64_t block, int64_t slot);
float read_scale(const testkit::PagedIndexerWorkload& w, int64_t block, int64_t slot);
void write_scale(testkit::PagedIndexerWorkload* w, int64_t block, int64_t slot, float scale);

// A spec of these contexts (3 spare cache blocks, D 128, block size 64).
testkit::PagedIndexerSpec paged_spec(std::vector<int32_t> lens, int64_t next_n, int64_t H,
                                     int64_t k, uint64_t seed);

// Adversarial edits of a workload, shared by the CPU and GPU suites:
// - every key equal to block 0's slot 0 and every scale 1 (all scores of a query tie);
void make_keys_identical(testkit::PagedIndexerWorkload* w);
// - every 7th slot's scale NaN, +inf, -inf, 0 or -0 in turn;
void write_special_scales(testkit::PagedIndexerWorkload* w);
// - out-of-range block-table entries (needs 4 requests, request 0 with at least 8 blocks):
//   request 0's blocks 1, 3, 5, 7 (-1, num_blocks, INT32_MAX, INT32_MIN), request 2's first
//   block -1 and request 3's first block num_blocks.
void break_block_entries(testkit::PagedIndexerWorkload* w);

// Query j of request b's visible count (host problem: reads p.context_lens).
int64_t visible(const PagedIndexerProblem& p, int64_t b, int64_t j);

// Request b as a prefill problem: its next_n queries over its visible tokens gathered in order
// (a token of a block outside the cache gets zero key bytes and a NaN scale: never selected).
// `p` holds host pointers (q, weights, context_lens, block_table) over `w`'s arrays or copies.
struct GatheredRequest {
  IndexerCase c;
  HostIndexerInputs in;
};
GatheredRequest gather_request(const testkit::PagedIndexerWorkload& w, const PagedIndexerProblem& p,
                               int64_t b);

}  // namespace litetopk::testing
