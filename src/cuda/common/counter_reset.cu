// Zeroes a kernel's arrival counters in a kernel of its own, so that the kernel after it can be a
// programmatic dependent (a memset node cannot be): the split decode kernels' merge counters
// (decode_merge_sm90.cuh) and the sieve select's per-row counters.
// 1. Lets the dependent grid launch at once: it waits for this grid (griddepcontrol.wait) only
//    before it first touches a counter.
// 2. One thread per counter writes 0.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/counter_reset.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"

namespace litetopk::cuda_common {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) reset_counters_kernel(uint32_t* counters,
                                                                  int64_t count) {
  sm90::allow_dependent_grids();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < count) counters[i] = 0;
}

}  // namespace

Status launch_counter_reset(uint32_t* counters, int64_t count, cudaStream_t stream) {
  if (count == 0) return Status::ok();
  const auto blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  reset_counters_kernel<<<blocks, kThreads, 0, stream>>>(counters, count);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_common
