// The machine the tool runs on: its CPU and, when there is one, its GPU.
#pragma once

#include <string>

#include "litetopk/device.h"

namespace litetopk::tools {

struct CpuInfo {
  std::string model;  // "model name" from /proc/cpuinfo, or "unknown CPU"
  unsigned hardware_threads = 0;
};
CpuInfo probe_cpu();

struct GpuInfo {
  bool available = false;     // a CUDA build and at least one device
  DeviceInfo device;          // valid when available
  std::string absent_reason;  // why not, when !available
};
GpuInfo probe_gpu();

}  // namespace litetopk::tools
