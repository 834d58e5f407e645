// dsa_prefill: one DeepSeek sparse attention (DSA) layer on a prefill chunk in one call. The
// lightning indexer (indexer.h: indexer_topk) picks each query's k keys, then MLA attention over
// them (attention.h: sparse_attention) gives the layer's output, with no host round trip between
// the two: on the GPU both run on the caller's stream with a small kernel between them, and the
// attention (its union packing included) reads the indexer's output where the indexer wrote it.
//
// Keys and kv rows. The indexer's keys and the attention's kv rows are the same S token positions
// of the context: indexer key s (index_kv[s], index_kv_scale[s]) is attention kv row s (kv[s]).
// The indexer returns positions relative to its range start ks[t]; the call turns them into kv
// rows (ks[t] + relative; -1 padding, and anything else outside [0, S), stays -1) before the
// attention reads them. For query t:
//   rows(t)             = the k keys s in [ks[t], ke[t]) with the largest indexer scores
//                         (indexer.h; fewer when the range holds fewer than k keys)
//   out[t], max_logits[t], lse[t] = sparse_attention of q[t] over kv rows rows(t) (attention.h:
//                         base-2 max_logits and lse; a query with an empty range attends nothing
//                         and gets out 0, max_logits and lse -inf)
// Optional out: indices [T, k] int32, the kv rows each query attended (absolute: ks[t] already
// added), -1 padded; without it the workspace holds them.
//
// Layouts, all contiguous: the indexer's as indexer.h (DeepGEMM's fp8_mqa_logits): index_q
// [T, H, D] fp8 e4m3, index_kv [S, D] fp8 e4m3, index_kv_scale [S] fp32, index_weights [T, H]
// fp32, ks and ke [T] int32; the attention's as attention.h (FlashMLA's sparse prefill): q
// [T, h_q, d_qk] bf16, kv [S, 1, d_qk] bf16, out [T, h_q, d_v] bf16, max_logits and lse [T, h_q]
// fp32. Shapes are the two calls' own: H 32 or 64, D 128, k 1 .. 8192, h_q 16, 32, 64 or 128,
// d_qk 576 or 512, d_v 512. Ranges are the caller's contract as in indexer.h (0 <= ks[t] <=
// ke[t] <= S; the CPU reference checks them, the GPU never reads them on the host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/attention.h"
#include "litetopk/indexer.h"
#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

struct DsaPrefillProblem {
  // The indexer's inputs (IndexerProblem's q, kv, kv_scale, weights, ks, ke).
  const void* index_q = nullptr;          // [T, H, D] fp8 e4m3
  const void* index_kv = nullptr;         // [S, D] fp8 e4m3
  const float* index_kv_scale = nullptr;  // [S]
  const float* index_weights = nullptr;   // [T, H]
  const int32_t* ks = nullptr;            // [T] first key of each query's range
  const int32_t* ke = nullptr;            // [T] one past its last key
  int64_t num_queries = 0;                // T: the indexer's queries and the attention's s_q
  int64_t num_keys = 0;                   // S: the indexer's keys and the attention's s_kv
  int64_t index_heads = 0;                // H: 32 or 64
  int64_t index_head_dim = 0;             // D: 128
  int64_t k = 0;                          // keys per query (the attention's topk): 1 .. 8192
  // The attention's inputs (SparseAttentionProblem's q, kv, h_q, d_qk, d_v, sm_scale).
  const void* q = nullptr;   // [T, h_q, d_qk] bf16
  const void* kv = nullptr;  // [S, 1, d_qk] bf16: keys; values are its first d_v columns
  int64_t h_q = 0;           // 16, 32, 64 or 128
  int64_t d_qk = 0;          // 576 or 512
  int64_t d_v = 512;         // 512
  float sm_scale = 0.0f;     // finite
  // Outputs.
  void* out = nullptr;          // [T, h_q, d_v] bf16, required
  float* max_logits = nullptr;  // [T, h_q] fp32, optional (base 2)
  float* lse = nullptr;         // [T, h_q] fp32, optional (base 2)
  int32_t* indices = nullptr;   // [T, k] int32 kv rows, optional
};

struct DsaPrefillOptions {
  // The indexer's options as indexer.h describes them (algo, state, candidate_capacity,
  // cold_sample, candidate_counters).
  IndexerOptions indexer{};
  // The attention's kernel as SparseAttentionProblem::algo (kAuto: union-packed where it
  // applies, else per query).
  SparseAttentionAlgo attention_algo = SparseAttentionAlgo::kAuto;
};

// Shapes, sizes and pointers of both halves (each half's own checks, their messages naming this
// problem's fields); never reads ks, ke or any other array.
Status validate_dsa_prefill_problem(const DsaPrefillProblem& problem);

// ---- GPU (device pointers) ----

// One dsa_prefill call planned once (dsa_prefill_plan): both halves planned and one workspace
// laid out, for launches with any addresses (dsa_prefill_launch). Read-only once planned.
// The workspace: [the indexer's][the indices [T, k] when the caller gives none][the attention's],
// each part 256-byte aligned.
struct DsaPrefillPlan {
  DsaPrefillProblem problem{};      // sizes of the planned call (its pointers are not used)
  IndexerPlan indexer{};            // the indexer half as planned
  SparseAttentionPlan attention{};  // the attention half as planned
  bool has_indices = false;         // the launches write the caller's indices
  std::size_t workspace_bytes = 0;  // caller-owned device workspace each launch needs
};

// The addresses of one launch of a plan (device pointers).
struct DsaPrefillAddresses {
  const void* index_q = nullptr;
  const void* index_kv = nullptr;
  const float* index_kv_scale = nullptr;
  const float* index_weights = nullptr;
  const int32_t* ks = nullptr;
  const int32_t* ke = nullptr;
  const void* q = nullptr;
  const void* kv = nullptr;
  void* out = nullptr;
  float* max_logits = nullptr;
  float* lse = nullptr;
  int32_t* indices = nullptr;  // required when the plan has indices, else not used
  IndexerState state{};        // required when the plan's indexer has a state
  unsigned long long* candidate_counters = nullptr;  // as IndexerOptions::candidate_counters
};

// Validates the sizes and options (pointers may be null; only whether indices and the indexer's
// state are given is kept), plans both halves (indexer_topk_plan, sparse_attention_plan) and
// lays out the workspace. No allocation.
Status dsa_prefill_plan(const DsaPrefillProblem& problem, const DsaPrefillOptions& options,
                        DsaPrefillPlan* plan);
// Launches a plan on `stream` with `workspace` (plan.workspace_bytes): the indexer, the kernel
// that adds ks[t] to its indices, then the attention, in that order on that stream. Checks only
// the addresses. No allocation, no synchronization, no host read of device memory
// (graph-capturable).
Status dsa_prefill_launch(const DsaPrefillPlan& plan, const DsaPrefillAddresses& addresses,
                          void* workspace, cudaStream_t stream);

// The one-shot calls: plan and launch in one go.
Status dsa_prefill_workspace_size(const DsaPrefillProblem& problem, std::size_t* workspace_bytes,
                                  const DsaPrefillOptions& options = {});
Status dsa_prefill(const DsaPrefillProblem& problem, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream, const DsaPrefillOptions& options = {});

// ---- CPU (host pointers) ----
// The reference: indexer_topk_cpu, the same ks[t] offset, then sparse_attention_cpu (indices, when
// not given, in host memory of its own).
Status dsa_prefill_cpu(const DsaPrefillProblem& problem);

}  // namespace litetopk
