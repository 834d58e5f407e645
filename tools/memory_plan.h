// Host memory of a `litetopk` subcommand, named by the options that size it: checked against the
// memory available before the command allocates (a size the machine cannot hold is refused with
// the options and the bytes, rather than failing deep inside as std::bad_alloc, or being killed
// after the kernel overcommitted it), and the message when an allocation fails anyway.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace litetopk::tools {

// One large host buffer of a command: "the rows [--batch x --n] fp32" and its size in bytes
// (a double, so that absurd sizes do not overflow).
struct HostBuffer {
  std::string what;
  double bytes = 0;
};

// Bytes a new allocation may take: MemAvailable from /proc/meminfo, capped by a cgroup v2 limit;
// empty when unknown.
std::optional<double> available_memory();

// "" when the buffers together fit in `available` bytes (or it is unknown), else a message
// naming each buffer, its bytes and the total.
std::string memory_shortfall(const std::string& command, const std::vector<HostBuffer>& buffers,
                             std::optional<double> available);

// Runs `run` and returns its exit code, after checking `buffers` against the memory available;
// a shortfall, or a std::bad_alloc or std::length_error from `run`, prints a message to `err`
// naming the buffers and their options, and returns kExitFailure.
int run_with_memory_check(const std::string& command, const std::vector<HostBuffer>& buffers,
                          const std::function<int()>& run, std::ostream& err);

// "1.2 GB" (decimal units), "3.4 MB", "512 B".
std::string byte_size(double bytes);

}  // namespace litetopk::tools
