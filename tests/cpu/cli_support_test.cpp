// The CLI's shared pieces (tools/): the number validators' messages, the heartbeat of long work,
// and the memory check that names a command's buffers (before allocating and after a
// std::bad_alloc or std::length_error).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/memory_plan.h"
#include "tools/progress.h"

namespace litetopk::tools {
namespace {

std::string validate(const CLI::Validator& validator, std::string text) {
  return validator(text);
}

TEST(CliOptions, IntegerAndNumberValidatorsSayWhatWasExpected) {
  const CLI::Validator k = integer_in(1, 8192);
  EXPECT_EQ(validate(k, "2048"), "");
  EXPECT_EQ(validate(k, "abc"), "expected an integer, got 'abc'");
  EXPECT_EQ(validate(k, "2.7"), "expected an integer, got '2.7'");
  EXPECT_EQ(validate(k, ""), "expected an integer, got ''");
  EXPECT_NE(validate(k, "9000").find("9000 not in range"), std::string::npos);
  const CLI::Validator tol = number_in(0.0, 1.0);
  EXPECT_EQ(validate(tol, "0.5"), "");
  EXPECT_EQ(validate(tol, "x"), "expected a number, got 'x'");
  EXPECT_NE(validate(tol, "2").find("not in range"), std::string::npos);
}

TEST(Progress, QuickWorkPrintsNothing) {
  std::ostringstream out;
  { Progress progress("quick", out, std::chrono::milliseconds(500)); }
  EXPECT_EQ(out.str(), "");
}

TEST(Progress, LongWorkBeatsAndSaysWhenDone) {
  std::ostringstream out;
  {
    Progress progress("generating the rows", out, std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("litetopk: generating the rows: ", 0), 0u) << text;
  EXPECT_NE(text.find("litetopk: generating the rows: done in "), std::string::npos) << text;
  EXPECT_GE(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

TEST(MemoryPlan, ShortfallNamesEachBufferAndTheBytes) {
  const std::vector<HostBuffer> buffers = {{"the rows [--batch x --n] fp32", 3.2e9},
                                           {"the indices [--batch x --k] int32", 8e8}};
  EXPECT_EQ(memory_shortfall("select", buffers, 5e9), "");
  EXPECT_EQ(memory_shortfall("select", buffers, std::nullopt), "");
  const std::string message = memory_shortfall("select", buffers, 1e9);
  EXPECT_NE(message.find("select needs 4.0 GB (4000000000 bytes) of host memory, more than the "
                         "1.0 GB available"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the rows [--batch x --n] fp32: 3.2 GB (3200000000 bytes)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the indices [--batch x --k] int32: 800.0 MB (800000000 bytes)"),
            std::string::npos)
      << message;
}

TEST(MemoryPlan, AllocationFailuresNameTheBuffers) {
  const std::vector<HostBuffer> buffers = {{"the rows [--batch x --n] fp32", 4096}};
  for (int kind = 0; kind < 2; ++kind) {
    std::ostringstream err;
    const int code = run_with_memory_check(
        "select", buffers,
        [kind]() -> int {
          if (kind == 0) throw std::bad_alloc();
          throw std::length_error("vector::_M_default_append");
        },
        err);
    EXPECT_EQ(code, kExitFailure);
    EXPECT_NE(err.str().find("select ran out of memory"), std::string::npos) << err.str();
    EXPECT_NE(err.str().find("the rows [--batch x --n] fp32: 4.1 kB (4096 bytes)"),
              std::string::npos)
        << err.str();
  }
  std::ostringstream err;
  EXPECT_EQ(run_with_memory_check("select", buffers, [] { return kExitOk; }, err), kExitOk);
  EXPECT_EQ(err.str(), "");
}

TEST(MemoryPlan, AvailableMemoryIsKnownOnLinux) {
  const std::optional<double> available = available_memory();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, 0.0);
}

}  // namespace
}  // namespace litetopk::tools
