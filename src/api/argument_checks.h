// Small helpers of the argument validators (*_validation.cpp): int limits, pointer alignment,
// int64 products and row extents that fit.
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

// The bytes of `rows` rows of `width` elements of `element_bytes` each, rows `stride` elements
// apart, from the first element to one past the last, ((rows - 1) stride + width) element_bytes,
// fit in int64 (all >= 0): the kernels' and references' byte offsets then cannot overflow.
inline bool row_extent_fits(int64_t rows, int64_t stride, int64_t width, int64_t element_bytes) {
  if (rows == 0 || width == 0) return true;
  if (!product_fits(rows - 1, stride)) return false;
  const int64_t before_last = (rows - 1) * stride;
  if (before_last > kMaxInt64 - width) return false;
  return product_fits(before_last + width, element_bytes);
}

}  // namespace litetopk::detail
