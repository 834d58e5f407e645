#include "memory_plan.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <stdexcept>

#include "commands.h"
#include "report.h"

namespace litetopk::tools {

namespace {

std::optional<double> read_number(const std::string& path) {
  std::ifstream file(path);
  double value = 0;
  if (file >> value) return value;
  return std::nullopt;  // absent, or "max"
}

std::string buffer_list(const std::vector<HostBuffer>& buffers) {
  std::string text;
  for (const HostBuffer& buffer : buffers) {
    text += "\n  " + buffer.what + ": " + byte_size(buffer.bytes) + " (" +
            fixed(buffer.bytes, 0) + " bytes)";
  }
  return text;
}

double total_bytes(const std::vector<HostBuffer>& buffers) {
  double total = 0;
  for (const HostBuffer& buffer : buffers) total += buffer.bytes;
  return total;
}

}  // namespace

std::optional<double> available_memory() {
  std::optional<double> available;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double kilobytes = 0;
    if (fields >> kilobytes) available = kilobytes * 1024;
    break;
  }
  const std::optional<double> limit = read_number("/sys/fs/cgroup/memory.max");
  const std::optional<double> used = read_number("/sys/fs/cgroup/memory.current");
  if (limit && used) {
    const double left = std::max(*limit - *used, 0.0);
    available = available ? std::min(*available, left) : left;
  }
  return available;
}

std::string memory_shortfall(const std::string& command, const std::vector<HostBuffer>& buffers,
                             std::optional<double> available) {
  const double total = total_bytes(buffers);
  if (!available || total <= *available) return "";
  return command + " needs " + byte_size(total) + " (" + fixed(total, 0) +
         " bytes) of host memory, more than the " + byte_size(*available) +
         " available; reduce the options that size it:" + buffer_list(buffers);
}

int run_with_memory_check(const std::string& command, const std::vector<HostBuffer>& buffers,
                          const std::function<int()>& run, std::ostream& err) {
  if (const std::string shortfall = memory_shortfall(command, buffers, available_memory());
      !shortfall.empty()) {
    err << "litetopk: error: " << shortfall << '\n';
    return kExitFailure;
  }
  const auto report = [&](const std::exception& e) {
    err << "litetopk: error: " << command << " ran out of memory (" << e.what() << ") with "
        << byte_size(total_bytes(buffers)) << " in its largest buffers:" << buffer_list(buffers)
        << "\nreduce the options that size them\n";
    return kExitFailure;
  };
  try {
    return run();
  } catch (const std::bad_alloc& e) {
    return report(e);
  } catch (const std::length_error& e) {
    return report(e);
  }
}

std::string byte_size(double bytes) {
  if (bytes >= 1e9) return fixed(bytes / 1e9, 1) + " GB";
  if (bytes >= 1e6) return fixed(bytes / 1e6, 1) + " MB";
  if (bytes >= 1e3) return fixed(bytes / 1e3, 1) + " kB";
  return fixed(bytes, 0) + " B";
}

}  // namespace litetopk::tools
