#include "environment.h"

#include <fstream>
#include <thread>

namespace litetopk::tools {

CpuInfo probe_cpu() {
  CpuInfo cpu;
  cpu.model = "unknown CPU";
  cpu.hardware_threads = std::thread::hardware_concurrency();
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) cpu.model = line.substr(colon + 2);
    break;
  }
  return cpu;
}

GpuInfo probe_gpu() {
  GpuInfo gpu;
  const Status status = query_device(&gpu.device);
  if (!status) {
    gpu.absent_reason = status.to_string();
  } else if (gpu.device.device_count == 0) {
    gpu.absent_reason = "no CUDA device found";
  } else {
    gpu.available = true;
  }
  return gpu;
}

}  // namespace litetopk::tools
