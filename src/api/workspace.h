// The caller-owned workspace check shared by the public GPU entry points.
#pragma once

#include <cstddef>

#include "api/format.h"
#include "litetopk/status.h"

namespace litetopk::detail {

// ok when a workspace of `workspace_bytes` at `workspace` can hold the `needed` bytes of a call:
// kWorkspaceTooSmall when it is smaller, kInvalidArgument when bytes are needed but it is null.
inline Status check_workspace(std::size_t needed, const void* workspace,
                              std::size_t workspace_bytes) {
  if (workspace_bytes < needed) {
    return Status(StatusCode::kWorkspaceTooSmall,
                  concat("workspace_bytes must be >= ", needed, " for this problem, got ",
                         workspace_bytes));
  }
  if (needed > 0 && workspace == nullptr) {
    return invalid_argument("workspace must not be null (", needed, " bytes needed)");
  }
  return Status::ok();
}

}  // namespace litetopk::detail
