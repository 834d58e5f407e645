#include "cli_options.h"

#include <cstdlib>

namespace litetopk::tools {

namespace {

bool parses_as_integer(const std::string& text) {
  int64_t value = 0;
  return CLI::detail::lexical_cast(text, value);
}

bool parses_as_number(const std::string& text) {
  double value = 0;
  return CLI::detail::lexical_cast(text, value);
}

}  // namespace

CLI::Validator integer_in(int64_t min, int64_t max) {
  const CLI::Range range(min, max);
  return CLI::Validator(
      [range](std::string& text) {
        if (!parses_as_integer(text)) return "expected an integer, got '" + text + "'";
        return range(text);
      },
      range.get_description());
}

CLI::Validator number_in(double min, double max) {
  const CLI::Range range(min, max);
  return CLI::Validator(
      [range](std::string& text) {
        if (!parses_as_number(text)) return "expected a number, got '" + text + "'";
        return range(text);
      },
      range.get_description());
}

CLI::Validator one_of(const std::string& choices, bool (*parses)(const std::string&)) {
  return CLI::Validator(
      [choices, parses](std::string& value) {
        return parses(value) ? std::string() : "must be one of " + choices + ", got " + value;
      },
      choices);
}

void add_bench_options(CLI::App* cmd, testkit::BenchOptions* bench) {
  cmd->add_flag("--bench", bench->enabled, "Time it: median over --iters after --warmup");
  cmd->add_option("--iters", bench->iters, "Timed iterations")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", bench->warmup, "Untimed iterations first")
      ->check(integer_in(0, 1000000))
      ->capture_default_str();
}

CLI::Option* add_device_option(CLI::App* cmd, std::string* device) {
  return cmd
      ->add_option("--device", *device,
                   "Where to run: auto (the GPU when there is one, else the CPU), gpu, cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
}

}  // namespace litetopk::tools
