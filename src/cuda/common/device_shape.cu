// current_device_shape over the CUDA runtime.
#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_shape.h"

namespace litetopk::cuda_common {

Status current_device_shape(DeviceShape* shape) {
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  LITETOPK_CUDA_TRY(cudaDeviceGetAttribute(&shape->sm_count, cudaDevAttrMultiProcessorCount, device));
  return Status::ok();
}

}  // namespace litetopk::cuda_common
