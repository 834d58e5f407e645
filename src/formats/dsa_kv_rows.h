// The indexer's output as the attention's input in dsa_prefill (litetopk/dsa.h), shared by the
// CPU reference and the CUDA kernel: a position relative to the query's range start becomes an
// absolute kv row.
#pragma once

#include <cstdint>

#include "litetopk/host_device.h"

namespace litetopk::dsa {

// start + relative when relative >= 0 and the sum is in [0, num_keys); -1 otherwise (the
// indexer's -1 padding, any other negative, and anything the sum puts outside the kv rows).
LITETOPK_HD int32_t kv_row(int32_t relative, int32_t start, int64_t num_keys) {
  if (relative < 0) return -1;
  const int64_t row = static_cast<int64_t>(start) + relative;
  return row >= 0 && row < num_keys ? static_cast<int32_t>(row) : -1;
}

}  // namespace litetopk::dsa
