// Per-kernel launch attributes set once per kernel and device instead of before every launch:
// cudaFuncSetAttribute costs a microsecond or two of host time per call.
#pragma once

#include "litetopk/status.h"

namespace litetopk::cuda_common {

// Lets `kernel` (a __global__ function) launch with `bytes` of dynamic shared memory on the current
// device: cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) the
// first time a kernel needs that many bytes on a device, nothing after. Thread-safe.
Status allow_dynamic_shared_memory(const void* kernel, int bytes);

}  // namespace litetopk::cuda_common
