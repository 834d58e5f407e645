// launch_counter_reset (counter_reset.cu): zeroes counters in a kernel that lets the next kernel,
// launched with cuda_common::launch_dependent, start before it ends.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "litetopk/status.h"

namespace litetopk::cuda_common {

// Zeroes counters[0, count) (device memory) on `stream`, after everything before it on the
// stream; a dependent launch after it must wait (griddepcontrol.wait) before reading or writing
// the counters.
Status launch_counter_reset(uint32_t* counters, int64_t count, cudaStream_t stream);

}  // namespace litetopk::cuda_common
