// `litetopk`: build and device info, one selection or one indexer run (verify, benchmark), the
// sparse-decoding trade-off, a DSA layer end to end (indexer + sparse attention), a demo.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace litetopk::tools;
  CLI::App app{"litetopk: exact top-k selection on GPUs (and CPUs)"};
  app.require_subcommand(1);
  int exit_code = kExitOk;
  add_info_command(app, &exit_code);
  add_select_command(app, &exit_code);
  add_indexer_command(app, &exit_code);
  add_decode_command(app, &exit_code);
  add_dsa_command(app, &exit_code);
  add_demo_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // prints the help or the error
  } catch (const std::exception& e) {
    std::cerr << "litetopk: error: " << e.what() << '\n';
    return kExitFailure;
  }
  return exit_code;
}
