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
  // Candidates per query list of the fused path. With the cold sample and no state (the gated
  // kernels: one list per query, its gate fixed from the sample) 0 sizes the list from the
  // sample's expected admissions (in [2k, S]); a list that overflows sends its query block to the
  // exact re-run. Otherwise (one list per query of a thread block's current query block; a list
  // that fills is reduced to its k best, which raises the query's gate) 0 picks 4k, or the cold
  // sample's candidates + 2k when more, when the lists fit in 2% of the [T, S] fp32 logits, less
  // otherwise. Values below 2k are raised to 2k, values above S (rounded up to 64) lowered to
  // it. Any value gives the exact result; small ones cost time.
  int64_t candidate_capacity = 0;
  // The fused kernel's cold sample: it first scores 8 to 512 key tiles (46 at S = 128K, 93 at
  // 1M for k = 2048) evenly strided over a query block's range, and gates the rest
  // speculatively at a score that the query's k best very likely beat; a query whose k best turn
  // out not to (about 1 in 10^8 on random scores; always on constant ones) has its block re-run
  // without it. Exact either way; off, the gate
  // rises only as the candidate lists fill, and more candidates are admitted.
  bool cold_sample = true;
  // Key tiles (64 keys each) of the cold sample per query block, a tuning knob: 0 (the default)
  // takes the cost model's count (8 to 512 tiles, from S and k), any other value in [1, 2^20]
  // that count. Exact either way.
  int32_t cold_sample_tiles = 0;
  // Optional device uint64[3] the fused kernel adds its counts to (for measuring, not needed for
  // the result): [0] the candidates it admitted into its lists, [1] the list reductions it ran,
  // [2] the query blocks it re-ran after a failed speculative gate ([0] and [1] include the
  // re-runs' work). Zero it before the call; other paths leave it alone.
  unsigned long long* candidate_counters = nullptr;
};

Status validate_indexer_problem(const IndexerProblem& problem);

// ---- GPU (device pointers) ----

// One indexer_topk call planned once (indexer_topk_plan): the problem's sizes and the options
// checked, the algorithm resolved and the workspace sized, for launches with any addresses
// (indexer_topk_launch). Read-only once planned.
struct IndexerPlan {
  IndexerProblem problem{};              // sizes of the planned call (its pointers are not used)
  IndexerAlgo algo = IndexerAlgo::kAuto;  // the path that runs: never kAuto once planned
  int64_t candidate_capacity = 0;         // options.candidate_capacity as planned
  bool cold_sample = true;                // options.cold_sample as planned
  int32_t cold_sample_tiles = 0;          // options.cold_sample_tiles as planned
  bool has_state = false;                 // the launches pass a state (the workspace holds the
                                          // hot-sample writer's part)
  bool has_values = false;                // the launches write values
  std::size_t workspace_bytes = 0;        // caller-owned device workspace each launch needs
};

// The addresses of one launch of a plan (device pointers).
struct IndexerAddresses {
  const void* q = nullptr;
  const void* kv = nullptr;
  const float* kv_scale = nullptr;
  const float* weights = nullptr;
  const int32_t* ks = nullptr;
  const int32_t* ke = nullptr;
  int32_t* indices = nullptr;
  float* values = nullptr;                         // required when the plan has values
  IndexerState state{};                            // required when the plan has a state
  unsigned long long* candidate_counters = nullptr;  // as IndexerOptions::candidate_counters
};

// Validates the sizes and options (pointers may be null; only whether values and a state are
// given is kept), resolves options.algo and sizes the workspace.
Status indexer_topk_plan(const IndexerProblem& problem, const IndexerOptions& options,
                         IndexerPlan* plan);
// Launches a plan on `stream` with `workspace` (plan.workspace_bytes). Checks only the addresses
// (set and aligned) and the state's size. No allocation, no synchronization.
Status indexer_topk_launch(const IndexerPlan& plan, const IndexerAddresses& addresses,
                           void* workspace, cudaStream_t stream);

// The one-shot calls: plan and launch in one go.
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

// ---- indexer_topk_paged: the decode-phase indexer over a paged cache ----
//
// B requests, each with next_n new query tokens (1 .. 4: multi-token prediction), over the
// request's paged context. Layouts match DeepGEMM's fp8_paged_mqa_logits:
//   q [B, next_n, H, D] fp8 e4m3, contiguous (query row r = b * next_n + j is [H, D]);
//   kv_cache [num_blocks, block_size, 1, D + 4] bytes: each block holds its block_size x D fp8
//     keys, then its block_size fp32 scales (not block_size rows of D + 4 bytes; see
//     include/litetopk/paged_kv_layout.h), block stride block_size * (D + 4) bytes;
//   weights [B * next_n, H] fp32; context_lens [B] int32; block_table [B, max_blocks] int32
//     (row stride max_blocks): token p of request b lives in block block_table[b, p / block_size],
//     slot p % block_size.
// Query j of request b sees positions 0 .. n - 1 with
//   n = min(max_context, clamp(context_lens[b] - next_n + j + 1, 0, context_lens[b]))
// (a negative context_lens[b] counts as 0), and for those
//   score[r, p] = kv_scale[p] * sum_h weights[r, h] * max(0, dot(q[b, j, h, :], key[p, :]))
// with the same arithmetic contract as indexer_topk (fp32 accumulation; the CPU reference scores
// exactly in fp64 and rounds to fp32). Out: indices [B * next_n, k] int32 token positions
// (0-based positions in the request's context), -1 padded; optional fp32 values. Same NaN, tie
// and order rules as indexer_topk: NaN never selected, +-inf ordinary, unsorted, any member among
// ties at the k-th value (no deterministic option).
//
// Host checks and the caller's contract. The call checks on the host what it can without reading
// device memory: shapes, sizes, pointers, alignment. context_lens and block_table are device
// values (on the GPU they are never read on the host, so one CUDA graph stays valid as contexts
// grow); their contents are the caller's contract, and out-of-range ones are defined, never read
// out of bounds:
// - a context length above max_context is cut at max_context (the formula above); a negative one
//   is an empty context;
// - a block-table entry outside [0, num_blocks) for a visible token makes that block's tokens
//   unselectable, exactly like a NaN score: they are not read, never selected, and the row is
//   -1 padded when fewer than k selectable tokens remain. Entries past a row's visible tokens
//   are never read (they may hold anything, e.g. -1 or stale blocks).
struct PagedIndexerProblem {
  const void* q = nullptr;                // [B, next_n, H, D] fp8 e4m3
  const void* kv_cache = nullptr;         // [num_blocks, block_size, 1, D + 4] bytes
  const float* weights = nullptr;         // [B * next_n, H]
  const int32_t* context_lens = nullptr;  // [B]
  const int32_t* block_table = nullptr;   // [B, max_blocks]
  int64_t batch = 0;                      // B
  int64_t next_n = 0;                     // 1 .. 4
  int64_t num_heads = 0;                  // H: 32 or 64
  int64_t head_dim = 0;                   // D: 128
  int64_t num_blocks = 0;                 // blocks in kv_cache
  int64_t block_size = 0;                 // tokens per block: 64
  int64_t max_blocks = 0;                 // block_table's row length (its row stride)
  // The largest context the caller will pass (<= max_blocks * block_size). It sizes the GPU
  // workspace, so that one workspace and one CUDA graph serve every step up to that context.
  int64_t max_context = 0;
  int64_t k = 0;                          // 1 .. 8192
  int32_t* indices = nullptr;             // [B * next_n, k], required
  float* values = nullptr;                // [B * next_n, k], optional
};

// Shapes, sizes, pointers and alignment (q and kv_cache 16-byte aligned for TMA, the others
// 4-byte); never reads context_lens or block_table. q, weights, context_lens and indices are
// required when B > 0; kv_cache and block_table only when a token can be visible (max_context >
// 0; kv_cache also needs num_blocks > 0).
Status validate_paged_indexer_problem(const PagedIndexerProblem& problem);

// ---- The decode state: the previous step's top-k as this step's gate ----
// Caller-owned device memory of paged_indexer_state_bytes(batch, next_n, k) bytes (4-byte
// aligned), one per layer, passed as options.state (an IndexerState) with the same batch, next_n
// and k every step: row r = b * next_n + j holds the k token positions request slot b's query j
// selected at the previous step. With a state, the fused path (kFused; kAuto runs unfused, see
// indexer_topk_paged_dispatch) re-scores those positions with this step's query (they
// are visible keys of the row, so the smallest of their new scores, once k distinct selectable
// ones count, is a lower bound of the row's k-th best), keeps only the scores at or above it
// while scoring, selects the top-k among those, and writes it into the state. Any content is
// safe (zeros, stale positions of another request, a shorter context, garbage): the result is
// the exact top-k whatever the state holds; only the number of candidates, hence the time,
// depends on it (a useless state gates at -inf: every visible token is a candidate). Up to
// kPagedDecodeStateMaxK; the unfused path ignores the state and leaves it alone.
// paged_indexer_state_bytes is 0 when a size is <= 0, SIZE_MAX when the bytes overflow int64.
constexpr int64_t kPagedDecodeStateMaxK = 4096;
std::size_t paged_indexer_state_bytes(int64_t batch, int64_t next_n, int64_t k);

// ---- GPU (device pointers) ----
// The workspace is sized by max_context (never by the device lengths), so one workspace and one
// captured CUDA graph serve every decode step up to max_context. options.algo picks the path
// (kAuto: indexer_topk_paged_dispatch); options.state is the decode state above;
// candidate_capacity, cold_sample and candidate_counters are not used by the paged indexer.
// - kUnfused: indexer_logits_paged into a [B * next_n, max_context] fp32 workspace, then the
//   selection over each row's visible tokens.
// - kFused with a state: three launches (the history re-scored, the scoring with the gate in its
//   epilogue writing candidates, the exact select of the candidates), the later two dependent
//   launches (PDL). Workspace: 8 bytes per row and max_context position (room for every
//   candidate) and a few per row.
// - kFused without a state: the scores of a request's context split over thread blocks stay on
//   chip; the blocks of one request agree on its k-th score through a grid-wide radix select (one
//   launch).
//
// Plan once per batch shape (the sizes, max_context included), launch every step:
struct PagedIndexerPlan {
  PagedIndexerProblem problem{};          // sizes of the planned call (its pointers are not used)
  IndexerAlgo algo = IndexerAlgo::kAuto;  // the path that runs: never kAuto once planned
  bool has_values = false;                // the launches write values
  bool has_state = false;                 // the launches pass a decode state (the fused path
                                          // gates with it)
  std::size_t workspace_bytes = 0;        // caller-owned device workspace each launch needs
};
struct PagedIndexerAddresses {
  const void* q = nullptr;
  const void* kv_cache = nullptr;
  const float* weights = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_table = nullptr;
  int32_t* indices = nullptr;
  float* values = nullptr;  // required when the plan has values
  IndexerState state{};     // required when the plan has a state
};
// Validates the sizes and the state's (pointers may be null; only whether values and a state are
// given is kept), resolves options.algo and sizes the workspace by max_context.
Status indexer_topk_paged_plan(const PagedIndexerProblem& problem, const IndexerOptions& options,
                               PagedIndexerPlan* plan);
// Launches a plan on `stream`: checks only the addresses. No allocation, no synchronization, no
// host read of context_lens or block_table (graph-capturable as contexts grow).
Status indexer_topk_paged_launch(const PagedIndexerPlan& plan,
                                 const PagedIndexerAddresses& addresses, void* workspace,
                                 cudaStream_t stream);
// The one-shot calls: plan and launch in one go.
Status indexer_topk_paged_workspace_size(const PagedIndexerProblem& problem,
                                         std::size_t* workspace_bytes,
                                         const IndexerOptions& options = {});
Status indexer_topk_paged(const PagedIndexerProblem& problem, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream,
                          const IndexerOptions& options = {});
// kAuto's choice from the sizes and whether options carries a decode state (measured on the H200:
// docs/BENCHMARKS.md): kFused without a state at next_n 1 for one request of up to 256K tokens or
// up to 16 requests of up to 2M tokens in all (batch * max_context); kUnfused otherwise, and
// always with a state. A plan also takes kUnfused where the fused grid does not fit the device.
IndexerAlgo indexer_topk_paged_dispatch(const PagedIndexerProblem& problem,
                                        const IndexerOptions& options = {});

// The unfused path's first half, public for engines that want the logits (DeepGEMM's
// fp8_paged_mqa_logits): writes logits[r * logits_stride + p] for every visible position p of
// row r (NaN for a token of an out-of-range block); positions at or past the row's visible count
// (up to max_context) are -inf. problem.k, indices and values are not used. logits_stride >=
// max_context.
Status indexer_logits_paged(const PagedIndexerProblem& problem, float* logits,
                            int64_t logits_stride, cudaStream_t stream);

// ---- CPU (host pointers) ----
// The reference: every score in fp64, rounded to fp32, then select_topk_cpu, with the
// out-of-range rules above. The GPU kernels' test oracle.
Status indexer_topk_paged_cpu(const PagedIndexerProblem& problem);
// Writes the logits as indexer_logits_paged does.
Status indexer_logits_paged_cpu(const PagedIndexerProblem& problem, float* logits,
                                int64_t logits_stride);

}  // namespace litetopk
