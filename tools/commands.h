// The subcommands of `litetopk`. Each add_*_command registers its options on `app` and a callback
// that runs the command and stores its exit code in *exit_code. A callback reports bad usage it
// can only see after parsing by throwing CLI::ValidationError.
#pragma once

namespace CLI {
class App;
}

namespace litetopk::tools {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // a check or a litetopk call failed
constexpr int kExitUsage = 2;    // bad command line

void add_info_command(CLI::App& app, int* exit_code);
void add_select_command(CLI::App& app, int* exit_code);
void add_indexer_command(CLI::App& app, int* exit_code);
void add_decode_command(CLI::App& app, int* exit_code);
void add_dsa_command(CLI::App& app, int* exit_code);
void add_demo_command(CLI::App& app, int* exit_code);
void add_retrieval_command(CLI::App& app, int* exit_code);

}  // namespace litetopk::tools
