// `litetopk info`: what this build contains and what the machine has.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli_options.h"
#include "commands.h"
#include "device_choice.h"
#include "environment.h"
#include "report.h"

namespace litetopk::tools {

namespace {

std::string version_text(int version) {  // 13000 -> "13.0"
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

int run_info(const std::string& device) {
  const BuildInfo build = build_info();
  std::cout << "litetopk " << build.version << '\n';
  std::cout << "build: CUDA backend "
            << (build.cuda_compiled ? "yes (" + build.cuda_targets + ")" : std::string("no"))
            << '\n';
  const CpuInfo cpu = probe_cpu();
  std::cout << "CPU:   " << cpu.model << ", " << cpu.hardware_threads << " hardware threads\n";
  if (device == "cpu") return kExitOk;  // the GPU not asked about
  const DeviceChoice choice = choose_device(device);
  const GpuInfo& gpu = choice.gpu;
  if (!gpu.available) {
    std::cout << "GPU:   none (" << gpu.absent_reason << ")\n";
    if (choice.error.empty()) return kExitOk;
    std::cerr << "litetopk: error: " << choice.error << '\n';
    return kExitFailure;
  }
  const DeviceInfo& d = gpu.device;
  constexpr double kMiB = 1 << 20;
  std::cout << "GPU:   " << d.name
            << (d.device_count > 1
                    ? " (the current one of " + std::to_string(d.device_count) + " devices)"
                    : std::string())
            << '\n'
            << "       compute capability " << d.compute_major << '.' << d.compute_minor << ", "
            << d.sm_count << " SMs, "
            << fixed(static_cast<double>(d.global_memory_bytes) / (kMiB * 1024), 1) << " GiB, L2 "
            << fixed(d.l2_cache_bytes / kMiB, 0) << " MiB, shared memory per block "
            << d.max_shared_memory_per_block_optin / 1024 << " KiB\n"
            << "       driver " << version_text(d.driver_version) << ", runtime "
            << version_text(d.runtime_version) << '\n';
  return kExitOk;
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  CLI::App* info = app.add_subcommand(
      "info", "Show the build, the CPU and the GPU (--device cpu: not the GPU; gpu: an error "
              "without one)");
  auto device = std::make_shared<std::string>("auto");
  add_device_option(info, device.get());
  info->callback([device, exit_code] { *exit_code = run_info(*device); });
}

}  // namespace litetopk::tools
