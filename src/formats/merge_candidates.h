// A merge_topk candidate as a selection composite, shared by the CPU reference and the CUDA
// kernel: (key << 32) | ~global_index with the keys of formats/score_keys.h, so that "best k" is
// "largest k composites" (better value, then smaller global index). An empty candidate is the
// empty composite 0.
#pragma once

#include <cstdint>

#include "formats/score_keys.h"
#include "litetopk/host_device.h"

namespace litetopk::merge {

// The non-empty prefix of a shard list: counts[b * shards + s] clamped into [0, k_in], or k_in
// without counts.
LITETOPK_HD int64_t list_length(const int32_t* counts, int64_t list, int64_t k_in) {
  if (counts == nullptr) return k_in;
  const int64_t count = counts[list];
  return count < 0 ? 0 : (count > k_in ? k_in : count);
}

// The composite of one slot: empty when it is past the list's length, its index is negative or
// its value is NaN.
LITETOPK_HD uint64_t candidate_composite(uint32_t value_bits, int32_t index, bool in_list,
                                         bool largest) {
  if (!in_list || index < 0) return keys::kEmptyComposite;
  const uint32_t key = keys::key_from_f32_bits(value_bits, largest);
  if (key == 0) return keys::kEmptyComposite;
  return keys::make_composite(key, static_cast<uint32_t>(index));
}

}  // namespace litetopk::merge
