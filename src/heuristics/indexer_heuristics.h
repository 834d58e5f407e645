// The indexer's dispatch rule and fitted models, host-only (docs/indexer.md names the
// measurements each constant was fitted to).
#pragma once

#include <cstdint>

#include "litetopk/indexer.h"

namespace litetopk::heuristics {

// The algorithm kAuto runs: fused from S >= max(16 k, 32768) keys, unfused otherwise.
IndexerAlgo choose_indexer_algo(const IndexerProblem& problem);

// The fused path's two kernels: kGated (the cold sample's gate in the four-warpgroup core's
// epilogue, gated_indexer_kernel.cu) and kLists (candidate lists gated and reduced by side warps,
// fused_indexer_kernel.cu: the hot sample of IndexerState, and the exact re-run of kGated).
enum class FusedKernel { kGated, kLists };
// kGated with the cold sample and no state; kLists otherwise.
FusedKernel choose_fused_kernel(const IndexerProblem& problem, const IndexerOptions& options);

// The paged decode indexer's kAuto, from sizes (measured on the H200): the fused kernel without a
// decode state at next_n 1 for one request of up to 256K tokens or up to 16 requests of up to 2M
// tokens in all (B * max_context); unfused otherwise, and always with a decode state (the gated
// path lost on coherent and on iid decode steps).
IndexerAlgo choose_paged_indexer_algo(const PagedIndexerProblem& problem, bool has_state);

// The fused kernel's cold sample: key tiles of `tile_keys` keys per query block, `requested`
// (IndexerOptions::cold_sample_tiles) when nonzero, else the model's count.
int32_t cold_sample_tiles(const IndexerProblem& problem, int tile_keys, int32_t requested);

// Candidates per list of the fused kernel: `requested` when nonzero, else about 4k (more when the
// cold sample's candidates would fill that) within 2% of the [T, S] fp32 logits; at most the keys
// (rounded to 64), never below 2k. `lists` lists share the budget, each with `slack` extra slots.
int64_t fused_list_capacity(const IndexerProblem& problem, int64_t requested,
                            int32_t cold_tiles, int tile_keys, int64_t lists, int64_t slack);

// Slots per candidate list of the gated kernel: `requested` when nonzero (at least 2k), else
// the admissions the speculative gate expects from a cold sample of `cold_tiles` tiles,
// k r / mu, plus 8 of their standard deviations (about k r / mu / sqrt(r)), at least 2k; at
// most the keys (rounded to 64).
int64_t gated_list_capacity(const IndexerProblem& problem, int64_t requested, int32_t cold_tiles,
                            int tile_keys);

}  // namespace litetopk::heuristics
