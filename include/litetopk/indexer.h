// indexer_topk: the DSA "lightning indexer" fused with exact top-k selection.
//
// For query t and key s in [ks[t], ke[t]):
//   score[t, s] = kv_scale[s] * sum_h weights[t, h] * max(0, dot(q[t, h, :], kv[s, :]))
// with fp8 e4m3 q and kv, fp32 accumulation. The call returns, per query, the k keys with the
// largest scores: indices [T, k] int32 relative to ks[t], -1 padded; optional fp32 values.
// Same NaN, tie and order rules as select_topk (select.h): unsorted, any member among ties.
// Layouts match DeepGEMM's fp8_mqa_logits: q [T, H, D] contiguous, kv [S, D] contiguous,
// kv_scale [S], weights [T, H] (holding the q scales and the softmax scale; may be negative).
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

struct IndexerProblem {
  const void* q = nullptr;          // [T, H, D] fp8 e4m3
  const void* kv = nullptr;         // [S, D] fp8 e4m3
  const float* kv_scale = nullptr;  // [S]
  const float* weights = nullptr;   // [T, H]
  const int32_t* ks = nullptr;      // [T] first key of each query's range
  const int32_t* ke = nullptr;      // [T] one past its last key
  int64_t num_queries = 0;          // T
  int64_t num_heads = 0;            // H: 32 or 64
  int64_t head_dim = 0;             // D: 128
  int64_t num_keys = 0;             // S
  int64_t k = 0;                    // 1 .. 8192
  int32_t* indices = nullptr;       // [T, k], required
  float* values = nullptr;          // [T, k], optional
};

enum class IndexerAlgo : int {
  kAuto = 0,
  kUnfused = 1,  // logits kernel writes [T, S] fp32 into the workspace, then select_topk
  kFused = 2,    // scores never leave the chip: gate and candidate lists in the epilogue
};
const char* indexer_algo_name(IndexerAlgo algo);
bool parse_indexer_algo(const char* name, IndexerAlgo* algo);

// Per-layer state carried from one prefill chunk to the next: the "hot sample", the 4k key
// positions the chunk's queries chose most often. Caller-owned device memory of
// indexer_state_bytes(k) bytes (4-byte aligned); zero it (or call indexer_state_reset) before the
// first chunk of a sequence, and pass the same state with the same k for its later chunks. Every
// indexer_topk call with a state writes the chunk's hot sample into it after selecting (both
// algorithms); the fused kernel reads the previous one first: it scores the sample's positions
// that lie in a query's range, and the k-th best of those scores is a lower bound of the query's
// k-th best, so its gate starts there instead of at nothing. Optional: without it, or with a
// useless one (a chunk whose top-k moved elsewhere), results are the same, exactly; only the
// number of candidates (and the time) changes. Positions at or past S are ignored.
struct IndexerState {
  void* data = nullptr;
  std::size_t bytes = 0;
};
std::size_t indexer_state_bytes(int64_t k);
Status indexer_state_reset(const IndexerState& state, cudaStream_t stream);

struct IndexerOptions {
  IndexerAlgo algo = IndexerAlgo::kAuto;
  const IndexerState* state = nullptr;
  // Candidates per list in the fused kernel (one list per query of a thread block's current query
  // block; a list that fills is reduced to its k best, which raises the query's gate). 0 picks
  // the default: 4k, or the cold sample's candidates + 2k when more, when the lists fit in 2% of
  // the [T, S] fp32 logits, less otherwise. Values below 2k are raised to 2k. Any value gives the
  // exact result; small ones cost time.
  int64_t candidate_capacity = 0;
  // The fused kernel's cold sample: it first scores 8 to 512 key tiles (46 at S = 128K, 93 at
  // 1M for k = 2048) evenly strided over a query block's range, and gates the rest
  // speculatively at a score that the query's k best very likely beat; a query whose k best turn
  // out not to (about 1 in 10^8 on random scores; always on constant ones) has its block re-run
  // without it. Exact either way; off, the gate
  // rises only as the candidate lists fill, and more candidates are admitted.
  bool cold_sample = true;
  // Optional device uint64[3] the fused kernel adds its counts to (for measuring, not needed for
  // the result): [0] the candidates it admitted into its lists, [1] the list reductions it ran,
  // [2] the query blocks it re-ran after a failed speculative gate ([0] and [1] include the
  // re-runs' work). Zero it before the call; other paths leave it alone. (Until 2026-11-29 it
  // had two entries: a caller's buffer needs the third now.)
  unsigned long long* candidate_counters = nullptr;
};

Status validate_indexer_problem(const IndexerProblem& problem);

// ---- GPU (device pointers) ----
Status indexer_topk_workspace_size(const IndexerProblem& problem, std::size_t* workspace_bytes,
                                   const IndexerOptions& options = {});
Status indexer_topk(const IndexerProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const IndexerOptions& options = {});
IndexerAlgo indexer_topk_dispatch(const IndexerProblem& problem);

// The unfused baseline's first half, public for engines that want the logits: writes
// logits[t * logits_stride + s] for s in [0, S): the score inside [ks[t], ke[t]), -inf outside.
Status indexer_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                      cudaStream_t stream);

// ---- CPU (host pointers) ----
// The reference: every score in fp64 (exact dot products of fp8 values), rounded to fp32, then
// select_topk_cpu. GPU results agree with it up to fp32 accumulation error (see tests/gpu).
Status indexer_topk_cpu(const IndexerProblem& problem);
// Writes the [T, S] fp32 logits as indexer_logits does.
Status indexer_logits_cpu(const IndexerProblem& problem, float* logits, int64_t logits_stride);

}  // namespace litetopk
