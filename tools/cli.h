// The `litetopk` command line: every subcommand, `--version`, a usage message without arguments
// and "unknown subcommand" for a name that is not one. main() calls run_cli; the tests call it
// as main() would.
#pragma once

namespace litetopk::tools {

// The version line `litetopk --version` prints: "litetopk 0.1.0 (CUDA backend: sm_90a)".
const char* version_line();

// Parses argv and runs the subcommand; returns the exit code (commands.h's kExit*). Writes to
// std::cout and std::cerr.
int run_cli(int argc, const char* const* argv);

}  // namespace litetopk::tools
