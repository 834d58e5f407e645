// Status: the result of every litetopk call. A failed call names the argument, the expected value
// and the actual one in message().
#pragma once

#include <string>
#include <utility>

namespace litetopk {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    // a bad shape, pointer, range or option
  kUnsupported = 2,        // valid input this build or device cannot serve
  kWorkspaceTooSmall = 3,  // the caller's workspace is smaller than the size query said
  kCudaError = 4,          // a CUDA runtime call or kernel launch failed
  kNotCompiled = 5,        // the CUDA backend is not in this build
  kInternal = 6,           // a bug in litetopk: please report it
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: k must be >= 1, got 0"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace litetopk
