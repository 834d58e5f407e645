// DeviceBuffer, copies and DeviceTimer over the CUDA runtime.
#include <cuda_runtime_api.h>

#include <utility>

#include "testkit/device_memory.h"
#include "cuda/common/cuda_check.h"

namespace litetopk::testkit {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status DeviceBuffer::allocate(std::size_t bytes) {
  if (data_ != nullptr) {
    LITETOPK_CUDA_TRY(cudaFree(data_));
    data_ = nullptr;
    size_ = 0;
  }
  if (bytes == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMalloc(&data_, bytes));
  size_ = bytes;
  return Status::ok();
}

Status copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

Status copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Status fill_device(void* device_dst, int byte_value, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemset(device_dst, byte_value, bytes));
  return Status::ok();
}

Status device_synchronize() {
  LITETOPK_CUDA_TRY(cudaDeviceSynchronize());
  return Status::ok();
}

DeviceTimer::DeviceTimer() {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  if (cudaEventCreate(&start) == cudaSuccess) start_event_ = start;
  if (cudaEventCreate(&stop) == cudaSuccess) stop_event_ = stop;
}

DeviceTimer::~DeviceTimer() {
  if (start_event_) cudaEventDestroy(static_cast<cudaEvent_t>(start_event_));
  if (stop_event_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_event_));
}

Status DeviceTimer::start(cudaStream_t stream) {
  if (!start_event_ || !stop_event_) {
    return Status(StatusCode::kCudaError, "DeviceTimer: cudaEventCreate failed");
  }
  LITETOPK_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(start_event_), stream));
  return Status::ok();
}

Status DeviceTimer::stop(float* elapsed_ms, cudaStream_t stream) {
  auto start = static_cast<cudaEvent_t>(start_event_);
  auto stop = static_cast<cudaEvent_t>(stop_event_);
  LITETOPK_CUDA_TRY(cudaEventRecord(stop, stream));
  LITETOPK_CUDA_TRY(cudaEventSynchronize(stop));
  LITETOPK_CUDA_TRY(cudaEventElapsedTime(elapsed_ms, start, stop));
  return Status::ok();
}

}  // namespace litetopk::testkit
