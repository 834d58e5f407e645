// query_device: properties of the current CUDA device, or device_count = 0 without one.
#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"
#include "litetopk/device.h"

namespace litetopk {

Status query_device(DeviceInfo* info) {
  *info = DeviceInfo{};
  cudaRuntimeGetVersion(&info->runtime_version);
  cudaDriverGetVersion(&info->driver_version);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return Status::ok();
  }
  info->device_count = count;
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  LITETOPK_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  info->name = prop.name;
  info->compute_major = prop.major;
  info->compute_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->global_memory_bytes = static_cast<long long>(prop.totalGlobalMem);
  info->l2_cache_bytes = prop.l2CacheSize;
  info->max_shared_memory_per_block_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  return Status::ok();
}

}  // namespace litetopk
