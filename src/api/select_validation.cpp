// Argument checks for select_topk: every failure names the argument, what was expected and what
// was given.
#include <cstdint>
#include <limits>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/select_validation.h"
#include "litetopk/select.h"

namespace litetopk {

using detail::invalid_argument;

Status detail::validate_select_sizes(const SelectProblem& p) {
  if (dtype_size(p.dtype) == 0) {
    return invalid_argument("dtype must be float32, bfloat16 or float16, got enum value ",
                            static_cast<int>(p.dtype));
  }
  if (p.batch < 0) return invalid_argument("batch must be >= 0, got ", p.batch);
  if (p.n < 0) return invalid_argument("n must be >= 0, got ", p.n);
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  if (p.n > kMaxIndex) {
    return invalid_argument("n must be <= ", kMaxIndex, " (int32 indices), got ", p.n);
  }
  if (p.k < 1) return invalid_argument("k must be >= 1, got ", p.k);
  if (p.k > kMaxIndex) return invalid_argument("k must be <= ", kMaxIndex, ", got ", p.k);
  const int64_t stride = p.row_stride == 0 ? p.n : p.row_stride;
  if (stride < p.n) {
    return invalid_argument("row_stride must be >= n (", p.n, ") or 0, got ", p.row_stride);
  }
  if (!detail::row_extent_fits(p.batch, stride, p.n, static_cast<int64_t>(dtype_size(p.dtype)))) {
    return invalid_argument("the rows' extent in bytes overflows int64: batch ", p.batch,
                            ", row_stride ", stride, ", n ", p.n, ", ", dtype_size(p.dtype),
                            "-byte elements");
  }
  if (p.batch > 0 && p.batch > std::numeric_limits<int64_t>::max() / p.k) {
    return invalid_argument("batch * k overflows int64: batch ", p.batch, ", k ", p.k);
  }
  return Status::ok();
}

Status detail::validate_select_addresses(const SelectProblem& p) {
  if (p.batch == 0) return Status::ok();
  if (p.scores == nullptr && p.n > 0) return invalid_argument("scores must not be null");
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  const std::size_t element = dtype_size(p.dtype);
  if (reinterpret_cast<std::uintptr_t>(p.scores) % element != 0) {
    return invalid_argument("scores must be aligned to its element size (", element, " bytes)");
  }
  if (reinterpret_cast<std::uintptr_t>(p.indices) % alignof(int32_t) != 0) {
    return invalid_argument("indices must be 4-byte aligned");
  }
  if (reinterpret_cast<std::uintptr_t>(p.values) % element != 0) {
    return invalid_argument("values must be aligned to its element size (", element, " bytes)");
  }
  return Status::ok();
}

Status validate_select_problem(const SelectProblem& p) {
  if (Status status = detail::validate_select_sizes(p); !status) return status;
  return detail::validate_select_addresses(p);
}

Status validate_select_ranges(const SelectProblem& p, const int32_t* starts, const int32_t* ends) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = starts ? starts[b] : 0;
    const int64_t end = ends ? ends[b] : p.n;
    if (start < 0 || start > p.n) {
      return invalid_argument("row_starts[", b, "] must be in [0, n=", p.n, "], got ", start);
    }
    if (end < 0 || end > p.n) {
      return invalid_argument("row_ends[", b, "] must be in [0, n=", p.n, "], got ", end);
    }
    if (start > end) {
      return invalid_argument("row_starts[", b, "] must be <= row_ends[", b, "], got ", start,
                              " > ", end);
    }
  }
  return Status::ok();
}

}  // namespace litetopk
