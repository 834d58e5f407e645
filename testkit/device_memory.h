// Device memory and event timing for the tools, tests and benchmarks (not the kernels' hot path).
// Framework-free wrappers over the CUDA runtime; in a build without CUDA every call returns
// kNotCompiled.
#pragma once

#include <cstddef>
#include <functional>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk::testkit {

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  // Frees the old allocation and takes `bytes` (0 frees only).
  Status allocate(std::size_t bytes);
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

Status copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
Status copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
// Fills `bytes` with `byte_value` (use 0xff to poison int32 outputs with -1).
Status fill_device(void* device_dst, int byte_value, std::size_t bytes);
Status device_synchronize();

// Allocates `device` to the size of `host` and copies it there.
template <typename Vector>
Status upload(const Vector& host, DeviceBuffer* device) {
  const std::size_t bytes = host.size() * sizeof(host[0]);
  if (Status s = device->allocate(bytes); !s) return s;
  return copy_to_device(device->data(), host.data(), bytes);
}

// One launch sequence captured once into a CUDA graph on a stream of its own, replayed at will
// (as engines run decode steps).
class DeviceGraph {
 public:
  DeviceGraph() = default;
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  // Captures launch(stream) (it must only enqueue work on that stream) and instantiates it.
  Status capture(const std::function<Status(cudaStream_t)>& launch);
  Status replay();
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }

 private:
  void* stream_ = nullptr;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

// Times work on one stream with CUDA events.
class DeviceTimer {
 public:
  DeviceTimer();
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  Status start(cudaStream_t stream = nullptr);
  // Records the stop event, waits for it and returns the elapsed milliseconds.
  Status stop(float* elapsed_ms, cudaStream_t stream = nullptr);

 private:
  void* start_event_ = nullptr;
  void* stop_event_ = nullptr;
};

}  // namespace litetopk::testkit
