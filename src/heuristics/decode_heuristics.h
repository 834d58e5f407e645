// sparse_decode's dispatch from sizes: when the 2-bit scan does not pay, read every block.
#pragma once

#include <cstdint>

#include "litetopk/sparse_decode.h"

namespace litetopk::heuristics {

// Below this many (sequence, KV head, token) slots of capacity, the scan, the pick and their
// launches cost more than the residuals and values of the blocks they skip; docs/sparse_decode.md
// ("Never slower than dense") names the measurements.
constexpr int64_t kSparseScanMinSlots = int64_t{1} << 18;

// True when sparse_decode should read every block without scanning (the in-kernel dense
// fallback: 418 of dense's 512 bytes per token, no scan, no pick), decided from the plan's
// sizes alone (never from the lengths), so one captured graph keeps its kernels.
bool sparse_decode_reads_all(int64_t batch, int64_t num_kv_heads, int64_t capacity_tokens);

// Whether a sparse_decode plan reads every block without selecting: delta = inf, mass_target = 0,
// or options.read_all_when_small and the sizes above.
bool sparse_decode_plan_reads_all(const SparseDecodeProblem& problem, const DecodeOptions& options);

}  // namespace litetopk::heuristics
