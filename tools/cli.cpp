#include "cli.h"

#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "litetopk/device.h"

namespace litetopk::tools {

namespace {

std::string subcommand_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

bool is_subcommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(name)) return true;
  }
  return false;
}

}  // namespace

const char* version_line() {
  static const std::string line = [] {
    const BuildInfo build = build_info();
    return "litetopk " + build.version + " (CUDA backend: " +
           (build.cuda_compiled ? build.cuda_targets : std::string("no")) + ")";
  }();
  return line.c_str();
}

int run_cli(int argc, const char* const* argv) {
  CLI::App app{"litetopk: exact top-k selection on GPUs (and CPUs)", "litetopk"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(version_line()));
  int exit_code = kExitOk;
  add_info_command(app, &exit_code);
  add_select_command(app, &exit_code);
  add_indexer_command(app, &exit_code);
  add_decode_command(app, &exit_code);
  add_dsa_command(app, &exit_code);
  add_demo_command(app, &exit_code);
  add_retrieval_command(app, &exit_code);

  if (argc < 2) {
    std::cerr << "litetopk: a subcommand is required (" << subcommand_names(app) << ")\n\n"
              << app.help();
    return kExitUsage;
  }
  if (argv[1][0] != '-' && !is_subcommand(app, argv[1])) {
    std::cerr << "litetopk: error: unknown subcommand '" << argv[1] << "'; the subcommands are "
              << subcommand_names(app) << " (litetopk --help describes them)\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // prints the help, the version or the error
  } catch (const std::exception& e) {
    std::cerr << "litetopk: error: " << e.what() << '\n';
    return kExitFailure;
  }
  return exit_code;
}

}  // namespace litetopk::tools
