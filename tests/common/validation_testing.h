// Shared helpers of the argument-validation suites: misaligned pointers into a test's buffers,
// and the check that a Status is kInvalidArgument with a message naming the argument.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "litetopk/status.h"

namespace litetopk::testing {

// `pointer` moved by `bytes` bytes (to make a misaligned pointer that stays in the buffer).
template <typename P>
P offset(P pointer, int bytes) {
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<P>>, const char, char>;
  return reinterpret_cast<P>(reinterpret_cast<Byte*>(pointer) + bytes);
}

// kInvalidArgument whose message contains `mention`.
inline ::testing::AssertionResult rejects_naming(const Status& status,
                                                 const std::string& mention) {
  if (status.code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "expected kInvalidArgument, got "
                                         << status.to_string();
  }
  if (status.message().find(mention) == std::string::npos) {
    return ::testing::AssertionFailure() << "message \"" << status.message()
                                         << "\" does not contain \"" << mention << "\"";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace litetopk::testing
