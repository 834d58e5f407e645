// launch_kernel (decode_kernels.h): cudaLaunchKernelEx with optional programmatic stream
// serialization, for the decode .cu files.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"
#include "cuda/decode/decode_kernels.h"

namespace litetopk::decode {

template <typename Params>
Status launch_kernel(void (*kernel)(Params), dim3 grid, dim3 block, std::size_t smem_bytes,
                     bool dependent, cudaStream_t stream, const Params& params) {
  if (smem_bytes > 48 * 1024) {
    LITETOPK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes)));
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = dependent ? &attribute : nullptr;
  config.numAttrs = dependent ? 1 : 0;
  LITETOPK_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, params));
  return Status::ok();
}

}  // namespace litetopk::decode
