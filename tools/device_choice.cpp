#include "device_choice.h"

#include <CLI/CLI.hpp>

namespace litetopk::tools {

DeviceChoice choose_device(const std::string& device, const std::string& algo_option,
                           const std::string& algo, AlgoPlace place) {
  const std::string asked = algo_option + ' ' + algo;
  if (device == "cpu" && place == AlgoPlace::kGpu) {
    throw CLI::ValidationError(algo_option, asked + " is a GPU kernel, but --device cpu runs on "
                                                    "the CPU (drop " + algo_option + ")");
  }
  if (device == "gpu" && place == AlgoPlace::kCpu) {
    throw CLI::ValidationError(algo_option, asked + " runs on the CPU, but --device gpu asks for "
                                                    "the GPU (drop one of them)");
  }
  DeviceChoice choice;
  if (device == "cpu" || (device == "auto" && place == AlgoPlace::kCpu)) {
    choice.device_name = probe_cpu().model + " (CPU)";
    return choice;
  }
  choice.gpu = probe_gpu();
  if (device == "gpu" && !choice.gpu.available) {
    choice.error = "--device gpu, but there is no GPU: " + choice.gpu.absent_reason +
                   " (--device cpu or auto runs on the CPU)";
  } else if (place == AlgoPlace::kGpu && !choice.gpu.available) {
    choice.error = asked + " needs a GPU, but there is none: " + choice.gpu.absent_reason +
                   " (without " + algo_option + ", or with --device cpu, it runs on the CPU)";
  }
  choice.on_gpu = device == "gpu" || choice.gpu.available;
  choice.device_name = choice.on_gpu ? choice.gpu.device.name : probe_cpu().model + " (CPU)";
  if (device == "auto") {
    choice.note = choice.on_gpu ? "device auto: the GPU, " + choice.gpu.device.name
                                : "device auto: the CPU (no GPU: " + choice.gpu.absent_reason + ")";
  }
  return choice;
}

}  // namespace litetopk::tools
