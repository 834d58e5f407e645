// The decode kernels' choices from sizes (heuristics/decode_heuristics.h).
#include "heuristics/decode_heuristics.h"

#include <algorithm>
#include <cmath>

namespace litetopk::heuristics {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t decode_units_per_split(const DecodeSplitShape& shape, int64_t option, int64_t cap) {
  if (shape.units <= 0) return 1;
  int64_t per = option;
  if (per <= 0) {
    const int64_t splits_per_pair =
        std::max<int64_t>(1, shape.ctas_per_sm * shape.sm_count / std::max<int64_t>(shape.pairs, 1));
    per = std::max(ceil_div(shape.units, splits_per_pair),
                   ceil_div(kDecodeMinSplitTokens, std::max<int64_t>(shape.unit_tokens, 1)));
  }
  return std::clamp<int64_t>(per, 1, std::min(shape.units, std::max<int64_t>(cap, 1)));
}

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
