// Kernel attributes set, and occupancies queried, once per kernel and device (remembered under a
// mutex), and the launches that carry a launch attribute (cooperative, clustered, dependent).
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"

namespace litetopk::cuda_common {

namespace {

// Clusters of `cluster` blocks along x.
cudaLaunchAttribute cluster_attribute(int cluster) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// cudaLaunchKernelExC of `kernel` with `args` and `count` (at most two) launch attributes.
Status launch_with(const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, void** args, const cudaLaunchAttribute* attributes,
                   unsigned count) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute copies[2]{};
  for (unsigned i = 0; i < count; ++i) copies[i] = attributes[i];
  config.attrs = count > 0 ? copies : nullptr;
  config.numAttrs = count;
  LITETOPK_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
  return Status::ok();
}

cudaLaunchAttribute dependent_attribute() {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  return attribute;
}

}  // namespace

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

Status resident_blocks(const void* kernel, int threads, int smem, int* blocks) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int, int>, int> known;  // -> blocks
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, device, threads, smem);
  const auto found = known.find(key);
  if (found != known.end()) {
    *blocks = found->second;
    return Status::ok();
  }
  int per_sm = 0;
  LITETOPK_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads,
                                                                  static_cast<std::size_t>(smem)));
  int sms = 0;
  LITETOPK_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  *blocks = per_sm * sms;
  known[key] = *blocks;
  return Status::ok();
}

Status resident_clusters(const void* kernel, int threads, int smem, int cluster, int* clusters) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int, int, int>, int> known;  // -> clusters
  int device = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, device, threads, smem, cluster);
  const auto found = known.find(key);
  if (found != known.end()) {
    *clusters = found->second;
    return Status::ok();
  }
  if (cluster > 8) {
    LITETOPK_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(cluster));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(smem);
  cudaLaunchAttribute attribute = cluster_attribute(cluster);
  config.attrs = &attribute;
  config.numAttrs = 1;
  int count = 0;
  const cudaError_t error = cudaOccupancyMaxActiveClusters(&count, kernel, &config);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // a size the device cannot hold: no cluster fits
    count = 0;
  }
  *clusters = count;
  known[key] = count;
  return Status::ok();
}

Status launch_cooperative(const void* kernel, dim3 grid, int threads, int smem, cudaStream_t stream,
                          void** args, bool dependent) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeCooperative;
  attributes[0].val.cooperative = 1;
  attributes[1] = dependent_attribute();
  return launch_with(kernel, grid, dim3(static_cast<unsigned>(threads)),
                     static_cast<std::size_t>(smem), stream, args, attributes, dependent ? 2 : 1);
}

Status launch_dependent(const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                        bool dependent, cudaStream_t stream, void** args) {
  const cudaLaunchAttribute attribute = dependent_attribute();
  return launch_with(kernel, grid, block, smem, stream, args, &attribute, dependent ? 1 : 0);
}

Status launch_clustered(const void* kernel, dim3 grid, int threads, int smem, int cluster,
                        cudaStream_t stream, void** args) {
  const cudaLaunchAttribute attribute = cluster_attribute(cluster);
  return launch_with(kernel, grid, dim3(static_cast<unsigned>(threads)),
                     static_cast<std::size_t>(smem), stream, args, &attribute, 1);
}

}  // namespace litetopk::cuda_common
