// allow_dynamic_shared_memory: the attribute set once per (kernel, device), remembered under a
// mutex.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"

namespace litetopk::cuda_common {

Status allow_dynamic_shared_memory(const void* kernel, int bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> allowed;  // (kernel, device) -> bytes
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  int& done = allowed[{kernel, device}];
  if (done >= bytes) return Status::ok();
  LITETOPK_CUDA_TRY(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done = bytes;
  return Status::ok();
}

}  // namespace litetopk::cuda_common
