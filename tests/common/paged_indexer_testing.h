// Shared test support for the paged decode indexer (CPU and GPU suites): DeepGEMM's paged cache
// layout written out independently of src/formats, each query's visible count from the contract's
// formula, and one request gathered into a prefill problem (so that the prefill checks of
// indexer_testing.h apply).
#pragma once

#include <cstdint>

#include "common/indexer_testing.h"
#include "litetopk/indexer.h"
#include "testkit/paged_indexer_workload.h"

namespace litetopk::testing {

// Byte offset of block `block` in the cache; pointer to slot `slot`'s key bytes; its scale.
int64_t block_base(const testkit::PagedIndexerWorkload& w, int64_t block);
uint8_t* key_bytes(testkit::PagedIndexerWorkload* w, int64_t block, int64_t slot);
float read_scale(const testkit::PagedIndexerWorkload& w, int64_t block, int64_t slot);
void write_scale(testkit::PagedIndexerWorkload* w, int64_t block, int64_t slot, float scale);

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
