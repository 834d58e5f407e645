// Build and device information (for `litetopk info` and for tools that pick a backend).
#pragma once

#include <string>

#include "litetopk/status.h"

namespace litetopk {

struct BuildInfo {
  std::string version;      // "0.1.0"
  bool cuda_compiled;       // the CUDA backend is in this build
  std::string cuda_targets; // "sm_90a" or ""
};
BuildInfo build_info();

struct DeviceInfo {
  int device_count = 0;  // 0 when there is no usable GPU (no driver, no device)
  std::string name;      // of the current device
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  long long global_memory_bytes = 0;
  int l2_cache_bytes = 0;
  int max_shared_memory_per_block_optin = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // e.g. 13000
};
// Describes the current CUDA device. A machine without a GPU gets Ok with device_count = 0;
// a build without CUDA gets kNotCompiled.
Status query_device(DeviceInfo* info);

}  // namespace litetopk
