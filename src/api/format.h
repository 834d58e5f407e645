// Small string helpers for Status messages.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "litetopk/status.h"

namespace litetopk::detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
Status invalid_argument(Args&&... args) {
  return Status(StatusCode::kInvalidArgument, concat(std::forward<Args>(args)...));
}

}  // namespace litetopk::detail
