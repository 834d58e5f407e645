// sparse_attention: MLA attention of each query over the tokens the indexer selected for it, with
// FlashMLA's sparse prefill interface (flash_mla_sparse_fwd), so that engines can switch.
//
// One latent KV head (h_kv = 1), shared by every query head (DeepSeek-V3.2's MLA: keys of 576 =
// 512 latent + 64 rope columns, values the first 512 columns of the same rows). For query s, head
// h and slot j of the query's selection, with the token t_j = indices[s, j]:
//   valid(j)  = 0 <= t_j < s_kv                          (every other value is skipped)
//   l2_j      = sm_scale * log2(e) * dot(q[s, h, :], kv[t_j, :])     over d_qk columns
//   max_logits[s, h] = max over valid j of l2_j
//   lse[s, h]        = log2(sum over valid j of 2^l2_j)
//   out[s, h, :]     = sum over valid j of 2^(l2_j - lse[s, h]) * kv[t_j, 0 : d_v]
// The logits, max_logits and lse are in base-2 units (natural-log units times log2(e)), as
// FlashMLA's Hopper sparse prefill kernel returned them in its first release (its kernel folds
// log2(e) into the scale and works in exp2): ln-based values are max_logits * ln(2) and lse *
// ln(2). A query with no valid slot gets out = 0, max_logits = -inf and lse = -inf.
//
// Indices. -1 is the usual padding (the indexer pads short rows with it), and any value outside
// [0, s_kv) is skipped the same way: other negatives, s_kv itself, INT32_MAX. Skipped slots are
// never read, so they may hold anything. A token that appears several times in one query's row
// is attended once per occurrence: it is a separate key each time, so a token listed twice gets
// twice the weight (what FlashMLA does: its kernel gathers every slot on its own and its
// reference gathers the row with index_select). The indexer's rows hold distinct tokens; a caller
// that wants set semantics removes repeats first. The order of a row does not matter (up to
// floating-point rounding).
//
// Layouts, all contiguous (no strides): q [s_q, h_q, d_qk] bf16; kv [s_kv, 1, d_qk] bf16;
// indices [s_q, 1, topk] int32; out [s_q, h_q, d_v] bf16; max_logits and lse [s_q, h_q] fp32.
// Shapes: h_q in {16, 32, 64, 128} (FlashMLA takes 64 and 128 only), d_qk 576 or 512, d_v 512,
// topk >= 1 (any value: not a multiple of a tile), s_q >= 0, s_kv >= 0; sm_scale any finite
// float (typically 1 / sqrt(d_qk)). q and kv are expected finite: a NaN or inf in a selected row
// makes that query's outputs NaN or inf (it is not checked); rows nobody selects are never read.
//
// GPU: sparse_attention (device pointers, a workspace size query, cudaStream_t), with
// SparseAttentionAlgo picking the kernel (docs/attention.md explains each):
// - kPerQuery: every query gathers its own rows; 64 MMA rows per block (h_q 16 and 32 padded
//   with zero heads to 64, as FlashMLA runs them).
// - kUnionPacked (LiteDSA, h_q 16 and 32): G = 64 / h_q neighbouring queries s = G i .. G i + G - 1
//   form a group; each row of the union of their selections is loaded once and the block's 64
//   MMA rows are the G x h_q real heads, each query masked to its own slots. A group in which a
//   query lists a token twice runs per query (its weight of two has no place in a union slot),
//   and so does a pair of queries (h_q 32) whose union holds more than 27/32 of their slots
//   (packing would not pay: decided per group on the device, also when kUnionPacked is asked).
//   Needs topk <= 8192 / G and s_kv <= 2^27; the workspace holds the unions (about
//   4 s_q topk bytes).
// - kPlain: a plain mma.sync kernel without pipelining, the GPU cross-check of the others.
// - kAuto: kUnionPacked where it applies, else kPerQuery. Packing never adds MMA work (a union
//   is never longer than its queries' rows together, and every MMA row is a real head); it adds
//   the union build, which pairs sharing little at h_q 32 do not pay back: those pairs run per
//   query (above; docs/attention.md measures both).
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

enum class SparseAttentionAlgo : int {
  kAuto = 0,
  kPerQuery = 1,
  kUnionPacked = 2,
  kPlain = 3,
};
// "auto", "per-query", "union-packed", "plain"; "invalid" outside the enum.
const char* sparse_attention_algo_name(SparseAttentionAlgo algo);
// The inverse of sparse_attention_algo_name; false (and *algo unchanged) for any other name.
bool parse_sparse_attention_algo(const char* name, SparseAttentionAlgo* algo);

struct SparseAttentionProblem {
  const void* q = nullptr;           // [s_q, h_q, d_qk] bf16
  const void* kv = nullptr;          // [s_kv, 1, d_qk] bf16: keys; values are its first d_v columns
  const int32_t* indices = nullptr;  // [s_q, 1, topk]; outside [0, s_kv): skipped
  int64_t s_q = 0;                   // queries
  int64_t s_kv = 0;                  // kv rows
  int64_t h_q = 0;                   // query heads: 16, 32, 64 or 128
  int64_t d_qk = 0;                  // 576 or 512
  int64_t d_v = 512;                 // 512
  int64_t topk = 0;                  // slots per query, >= 1
  float sm_scale = 0.0f;             // finite; the logits' scale before the base-2 factor
  void* out = nullptr;               // [s_q, h_q, d_v] bf16, required
  float* max_logits = nullptr;       // [s_q, h_q] fp32, optional (base 2)
  float* lse = nullptr;              // [s_q, h_q] fp32, optional (base 2)
  // The GPU kernel; the CPU runs one reference whatever it is, but validates it as the GPU does.
  SparseAttentionAlgo algo = SparseAttentionAlgo::kAuto;
};

// Shapes, sizes (every byte count within int64), the algorithm (kUnionPacked only where it
// applies), pointers and alignment; never reads indices.
// q, indices and out are required when s_q > 0, kv when s_q > 0 and s_kv > 0 (with s_kv = 0
// every slot is skipped and kv is not read); max_logits and lse are optional. q, kv and out must
// be 16-byte aligned (the GPU kernel moves them with TMA), indices, max_logits and lse 4-byte.
// s_q, s_kv and topk must be at most INT32_MAX (int32 indices and launch grids).
Status validate_sparse_attention_problem(const SparseAttentionProblem& problem);

// ---- GPU (device pointers) ----
// One sparse_attention call planned once (sparse_attention_plan): the problem's shapes checked,
// the algorithm resolved and the workspace laid out, for launches with any addresses
// (sparse_attention_launch). Read-only once planned.
struct SparseAttentionPlan {
  SparseAttentionProblem problem{};  // shapes of the planned call (its pointers are not used)
  SparseAttentionAlgo algo = SparseAttentionAlgo::kAuto;  // the kernel that runs: never kAuto
  int32_t group = 1;                 // queries per union (1 unless kUnionPacked)
  std::size_t counts_offset = 0;     // workspace bytes before the union sizes
  std::size_t workspace_bytes = 0;   // [groups][G * topk] int32 slot words, then [groups] sizes
};

// The addresses of one launch of a plan (device pointers; max_logits and lse optional).
struct SparseAttentionAddresses {
  const void* q = nullptr;
  const void* kv = nullptr;
  const int32_t* indices = nullptr;
  void* out = nullptr;
  float* max_logits = nullptr;
  float* lse = nullptr;
};

// Checks the shapes, sizes and algorithm (the problem's pointers may be null) and plans. No
// device query, no allocation.
Status sparse_attention_plan(const SparseAttentionProblem& problem, SparseAttentionPlan* plan);
// Launches a plan on `stream` with `workspace` (plan.workspace_bytes of device memory). Checks
// only the addresses (set and aligned). No allocation, no synchronization (graph-capturable).
Status sparse_attention_launch(const SparseAttentionPlan& plan,
                               const SparseAttentionAddresses& addresses, void* workspace,
                               cudaStream_t stream);

// The one-shot calls: plan and launch in one go.
// The workspace: 0 bytes for kPerQuery and kPlain, the unions for kUnionPacked (kAuto: what it
// resolves to). The call checks the problem like validate_sparse_attention_problem, launches on
// `stream`, and neither allocates nor synchronizes (graph-capturable).
Status sparse_attention_workspace_size(const SparseAttentionProblem& problem,
                                       std::size_t* workspace_bytes);
Status sparse_attention(const SparseAttentionProblem& problem, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream);

// ---- CPU (host pointers) ----
// The reference, the GPU kernel's test oracle: per query, the valid slots are gathered and each
// head's logits computed in fp64 (bf16 products are exact in fp64), then max, sum of 2^(l2 - max)
// and the weighted sum of the value rows in fp64; out is rounded to fp32 and then to bf16 (round
// to nearest even), max_logits and lse to fp32. Threaded over the queries; the result does not
// depend on the thread count. A GPU kernel rounds the probabilities to bf16 for its second MMA
// and accumulates in fp32, so it agrees with this up to bf16 tolerance (docs/attention.md).
Status sparse_attention_cpu(const SparseAttentionProblem& problem);

}  // namespace litetopk
