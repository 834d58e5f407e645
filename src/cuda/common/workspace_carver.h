// Carves aligned sub-buffers out of a caller's workspace, the one layout rule of every launcher.
#pragma once

#include <cstddef>

namespace litetopk::cuda_common {

// Hands out 256-byte-aligned pieces of the caller's workspace in order, or only counts bytes when
// base is null (the size query runs the same carving as the call).
class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(std::size_t count) {
    offset_ = (offset_ + 255) / 256 * 256;
    T* at = base_ ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += count * sizeof(T);
    return at;
  }
  std::size_t bytes() const { return offset_; }

 private:
  char* base_;
  std::size_t offset_ = 0;
};

}  // namespace litetopk::cuda_common
