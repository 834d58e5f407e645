// A scratch file path of the running test's own: ctest runs the tests of one binary as parallel
// processes, so a fixed name in TempDir() is shared between them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace litetopk::testing {

// TempDir()/<stem>_<suite>_<test>_<pid><extension>.
inline std::string test_temp_path(const std::string& stem, const std::string& extension) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = stem;
  if (test != nullptr) name += std::string("_") + test->test_suite_name() + "_" + test->name();
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterized names
  }
  return ::testing::TempDir() + name + "_" + std::to_string(::getpid()) + extension;
}

}  // namespace litetopk::testing
