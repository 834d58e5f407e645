// Small helpers of the argument validators (*_validation.cpp): int limits, pointer alignment and
// int64 products that fit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "api/format.h"
#include "litetopk/status.h"

namespace litetopk::detail {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

inline bool misaligned(const void* pointer, std::uintptr_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment != 0;
}

inline std::uintptr_t address(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer);
}

struct NamedPointer {
  const char* name;
  const void* pointer;
};

// kInvalidArgument "<name> must be <alignment>-byte aligned<why>, got address 0x..." for the
// first of `arrays` that is misaligned (null counts as aligned); ok when none is.
inline Status check_alignment(std::initializer_list<NamedPointer> arrays,
                              std::uintptr_t alignment, const char* why = "") {
  for (const NamedPointer& array : arrays) {
    if (misaligned(array.pointer, alignment)) {
      return invalid_argument(array.name, " must be ", alignment, "-byte aligned", why,
                              ", got address 0x", std::hex, address(array.pointer));
    }
  }
  return Status::ok();
}

// a * b * c fits in int64 (all >= 0).
inline bool product_fits(int64_t a, int64_t b, int64_t c = 1) {
  if (a == 0 || b == 0 || c == 0) return true;
  if (a > kMaxInt64 / b) return false;
  return a * b <= kMaxInt64 / c;
}

}  // namespace litetopk::detail
