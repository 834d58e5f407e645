// Where a `litetopk` subcommand runs, one rule for all of them: --device cpu runs on the CPU,
// --device gpu on the GPU (an error without one), --device auto on the GPU when there is one and
// else on the CPU. An --algo that names a GPU kernel needs the GPU, one that names a CPU path
// the CPU; auto follows the device.
#pragma once

#include <string>

#include "environment.h"

namespace litetopk::tools {

// Where the algorithm a command was asked for runs.
enum class AlgoPlace { kEither, kGpu, kCpu };

struct DeviceChoice {
  bool on_gpu = false;  // --device gpu, or auto with a GPU (with an error when there is none)
  GpuInfo gpu;
  std::string device_name;  // the GPU's name, or "<CPU model> (CPU)"
  // Non-empty when the command cannot run on this machine (a GPU is needed and there is none):
  // the message, naming --device or the algorithm option.
  std::string error;
  // With --device auto: where it runs and why ("device auto: the CPU (no GPU: ...)").
  std::string note;
};

// `device`: auto | gpu | cpu. `algo_option` and `algo`: the algorithm option and its value, which
// runs at `place`. Throws CLI::ValidationError naming the option when --device and the algorithm
// contradict each other (--device cpu with a GPU kernel).
DeviceChoice choose_device(const std::string& device, const std::string& algo_option = "",
                           const std::string& algo = "", AlgoPlace place = AlgoPlace::kEither);

}  // namespace litetopk::tools
