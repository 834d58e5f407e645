// Zeroes the split kernels' arrival counters (decode_merge_sm90.cuh) where no other kernel of the
// launch comes before the split kernel (dense decode, and sparse decode reading every block).
// 1. Lets the dependent split kernel launch at once: it waits for this grid only before its
//    first arrival.
// 2. One thread per (sequence, KV head) counter writes 0.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"

namespace litetopk::decode {
namespace {

constexpr int kThreads = 256;

struct ResetParams {
  uint32_t* arrivals;
  int64_t count;
};

__global__ void __launch_bounds__(kThreads) reset_arrivals_kernel(const ResetParams p) {
  sm90::allow_dependent_grids();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < p.count) p.arrivals[i] = 0;
}

}  // namespace

Status launch_reset_arrivals(uint32_t* arrivals, int64_t pairs, cudaStream_t stream) {
  const ResetParams params{arrivals, pairs};
  const auto blocks = static_cast<unsigned>((pairs + kThreads - 1) / kThreads);
  return launch_kernel(reset_arrivals_kernel, dim3(blocks), dim3(kThreads), 0, false, stream,
                       params);
}

}  // namespace litetopk::decode
