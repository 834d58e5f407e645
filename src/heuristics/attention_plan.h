// How sparse_attention runs a problem, host-only: the algorithm kAuto resolves to, the union
// group size and the workspace layout (docs/attention.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/attention.h"

namespace litetopk::heuristics {

// The union-packed kernel's limits, shared with src/cuda/attention: its blocks hold 64 MMA rows
// (G = 64 / h_q queries), one block sorts a group's G * topk slots, and a slot word holds a token
// below 2^27 beside its query bits.
constexpr int64_t kAttentionMmaRows = 64;
constexpr int64_t kUnionMaxSlots = 8192;
constexpr int64_t kUnionMaxTokens = int64_t{1} << 27;

// Whether kUnionPacked applies: h_q 16 or 32 (G = 64 / h_q queries fill 64 MMA rows), G * topk
// <= 8192 (one block sorts a group's slots) and s_kv <= 2^27 (a token and its query bits in one
// int32 word).
bool union_packing_applies(const SparseAttentionProblem& problem);

// Fills plan's algo, group and workspace layout for a validated problem: kAuto is kUnionPacked
// where it applies, else kPerQuery.
void plan_sparse_attention(const SparseAttentionProblem& problem, SparseAttentionPlan* plan);

}  // namespace litetopk::heuristics
