// Option conventions shared by the `litetopk` subcommands: number validators whose messages say
// what was expected ("--n: expected an integer, got 'abc'"), the benchmark options and the
// --device option.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "testkit/timing.h"

namespace litetopk::tools {

// An integer in [min, max]: "expected an integer, got 'abc'" or "Value 9000 not in range 1 to
// 8192".
CLI::Validator integer_in(int64_t min, int64_t max);
// A number in [min, max]: "expected a number, got 'abc'" or CLI::Range's message.
CLI::Validator number_in(double min, double max);
// A name that `parses` accepts: "must be one of <choices>, got <value>" otherwise.
CLI::Validator one_of(const std::string& choices, bool (*parses)(const std::string&));

// Registers --bench, --iters (in [1, 10^6]) and --warmup (in [0, 10^6]) on cmd, stored in *bench.
void add_bench_options(CLI::App* cmd, testkit::BenchOptions* bench);

// Registers --device auto|gpu|cpu (default auto: the GPU when there is one, else the CPU) on cmd.
CLI::Option* add_device_option(CLI::App* cmd, std::string* device);

}  // namespace litetopk::tools
