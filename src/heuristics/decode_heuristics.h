// The decode attention kernels' choices from sizes: how long a split is, and when sparse_decode
// reads every block instead of scanning.
#pragma once

#include <cstdint>

#include "litetopk/sparse_decode.h"

namespace litetopk::heuristics {

// ---- the split plan (dense_decode and sparse_decode on the GPU) ----
// A split is one CTA's share of one (sequence, KV head): `units` work units of unit_tokens tokens
// each (dense: 64-token tiles; sparse: KV blocks). Without an option, the splits of every pair
// give each SM ctas_per_sm CTAs: one for dense (one stream per SM reads fastest), two for sparse
// (its attend pass needs the second CTA's warps); and no split is shorter than
// kDecodeMinSplitTokens: below that, a CTA's prologue and epilogue and the merge of more partials
// cost more than the SMs it would fill. docs/sparse_decode.md ("The split plan") names the
// measurements.
constexpr int64_t kDenseDecodeCtasPerSm = 1;
constexpr int64_t kSparseDecodeCtasPerSm = 2;
constexpr int64_t kDecodeMinSplitTokens = 512;

struct DecodeSplitShape {
  int64_t units = 0;        // per (sequence, KV head): the capacity in units
  int64_t unit_tokens = 1;  // tokens per unit
  int64_t pairs = 0;        // batch * num_kv_heads
  int64_t sm_count = 0;     // of the current device
  int64_t ctas_per_sm = 1;  // kDenseDecodeCtasPerSm or kSparseDecodeCtasPerSm
};

// Units per split: `option` (DecodeOptions::blocks_per_split) when > 0, else the rule above;
// clamped to [1, min(units, cap)]. Depends on sizes only, never on the lengths.
int64_t decode_units_per_split(const DecodeSplitShape& shape, int64_t option, int64_t cap);

// ---- sparse_decode's read-all dispatch ----
// Below this many (sequence, KV head, token) slots of capacity, the scan, the pick and their
// launches cost more than the residuals and values of the blocks they skip; docs/sparse_decode.md
// ("Never slower than dense") names the measurements.
constexpr int64_t kSparseScanMinSlots = int64_t{1} << 17;

// True when sparse_decode should read every block without scanning (the in-kernel dense
// fallback: 418 of dense's 512 bytes per token, no scan, no pick), decided from the plan's
// sizes alone (never from the lengths), so one captured graph keeps its kernels.
bool sparse_decode_reads_all(int64_t batch, int64_t num_kv_heads, int64_t capacity_tokens);

// Whether a sparse_decode plan reads every block without selecting: delta = inf, mass_target = 0,
// or options.read_all_when_small and the sizes above.
bool sparse_decode_plan_reads_all(const SparseDecodeProblem& problem, const DecodeOptions& options);

}  // namespace litetopk::heuristics
