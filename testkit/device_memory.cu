// DeviceBuffer, copies and DeviceTimer over the CUDA runtime.
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "testkit/device_memory.h"

namespace litetopk::testkit {

namespace {

// kCudaError naming the call and the runtime's error when `err` is not cudaSuccess.
Status cuda_result(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return Status(StatusCode::kCudaError, std::string(call) + ": " + cudaGetErrorName(err) + " (" +
                                            cudaGetErrorString(err) + ")");
}

}  // namespace

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
    if (Status s = cuda_result(cudaFree(data_), "cudaFree"); !s) return s;
    data_ = nullptr;
    size_ = 0;
  }
  if (bytes == 0) return Status::ok();
  if (Status s = cuda_result(cudaMalloc(&data_, bytes), "cudaMalloc"); !s) return s;
  size_ = bytes;
  return Status::ok();
}

Status copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  return cuda_result(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

Status copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  return cuda_result(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

Status fill_device(void* device_dst, int byte_value, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  return cuda_result(cudaMemset(device_dst, byte_value, bytes), "cudaMemset");
}

Status device_synchronize() {
  return cuda_result(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
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
  return cuda_result(cudaEventRecord(static_cast<cudaEvent_t>(start_event_), stream),
                     "cudaEventRecord");
}

DeviceGraph::~DeviceGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status DeviceGraph::capture(const std::function<Status(cudaStream_t)>& launch) {
  if (graph_ != nullptr) return Status(StatusCode::kInternal, "DeviceGraph: captured already");
  cudaStream_t stream = nullptr;
  if (Status s = cuda_result(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags");
      !s) {
    return s;
  }
  stream_ = stream;
  if (Status s = cuda_result(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                             "cudaStreamBeginCapture");
      !s) {
    return s;
  }
  const Status launched = launch(stream);
  cudaGraph_t graph = nullptr;
  const Status ended = cuda_result(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  graph_ = graph;
  if (!launched) return launched;
  if (!ended) return ended;
  cudaGraphExec_t exec = nullptr;
  if (Status s = cuda_result(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"); !s) {
    return s;
  }
  exec_ = exec;
  return Status::ok();
}

Status DeviceGraph::replay() {
  if (exec_ == nullptr) return Status(StatusCode::kInternal, "DeviceGraph: nothing captured");
  return cuda_result(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream()),
                     "cudaGraphLaunch");
}

Status DeviceTimer::stop(float* elapsed_ms, cudaStream_t stream) {
  auto start = static_cast<cudaEvent_t>(start_event_);
  auto stop = static_cast<cudaEvent_t>(stop_event_);
  if (Status s = cuda_result(cudaEventRecord(stop, stream), "cudaEventRecord"); !s) return s;
  if (Status s = cuda_result(cudaEventSynchronize(stop), "cudaEventSynchronize"); !s) return s;
  return cuda_result(cudaEventElapsedTime(elapsed_ms, start, stop), "cudaEventElapsedTime");
}

}  // namespace litetopk::testkit
