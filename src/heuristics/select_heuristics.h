// select_topk's dispatch rule: which GPU algorithm kAuto runs for a shape, from what the
// algorithms' planners say about it on the current device.
#pragma once

#include <cstdint>

#include "litetopk/select.h"

namespace litetopk::heuristics {

// What the planners report for one problem on the current device.
struct SelectShapeFacts {
  int64_t k = 0;
  int64_t n = 0;
  int64_t batch = 0;
  int32_t sm_count = 0;                // the device's SMs
  int32_t element_bytes = 4;           // 4 for fp32 scores, 2 for bf16 and fp16
  int32_t sample_filter_segments = 0;  // blocks per row sample-filter would use
  int32_t grid_radix_segments = 0;     // blocks per row grid-radix would use; 0: does not fit
  int32_t sieve_segments = 0;          // blocks per row sieve would use; 0: does not fit
  int32_t cluster_size = 0;            // CTAs per row cluster would use; 0: does not fit
  int64_t resident_clusters = 0;       // such clusters the device runs at once
  int32_t register_keys_per_thread = 0;  // keys a thread of the register select would hold
                                         // (8, 16 or 32); 0: a row does not fit
};

SelectAlgo choose_select_algo(const SelectShapeFacts& facts);

}  // namespace litetopk::heuristics
