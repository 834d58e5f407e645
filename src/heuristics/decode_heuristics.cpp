// sparse_decode's dispatch from sizes (heuristics/decode_heuristics.h).
#include "heuristics/decode_heuristics.h"

#include <cmath>

namespace litetopk::heuristics {

bool sparse_decode_reads_all(int64_t batch, int64_t num_kv_heads, int64_t capacity_tokens) {
  if (batch <= 0 || num_kv_heads <= 0 || capacity_tokens <= 0) return true;
  // Overflow-free: compare capacity with the threshold divided by the other two factors.
  const int64_t pairs = batch * num_kv_heads;
  return capacity_tokens < (kSparseScanMinSlots + pairs - 1) / pairs;
}

bool sparse_decode_plan_reads_all(const SparseDecodeProblem& p, const DecodeOptions& options) {
  const SparseKvCache& c = p.cache;
  const bool keeps_all =
      p.selection == SparseSelection::kDelta ? std::isinf(p.delta) : p.mass_target == 0.0f;
  return keeps_all || (options.read_all_when_small &&
                       sparse_decode_reads_all(c.batch, c.num_kv_heads, c.max_blocks * c.block_size));
}

}  // namespace litetopk::heuristics
