// Row decoding and output writing shared by the CPU selection algorithms (select_reference.cpp,
// select_fast.cpp). Every function here assumes a problem that validate_select_problem and
// validate_select_ranges accepted.
//
// A row is read as raw bits (uint32 for float32, uint16 for bfloat16/float16) and turned into the
// order-preserving keys of formats/score_keys.h; candidates are 64-bit composites (key, ~index), so
// "best k" is "largest k composites" in every mode. The output is rebuilt from the composites:
// the index from the low half, the value's bits from the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/score_keys.h"
#include "litetopk/select.h"

namespace litetopk::cpu {

// Per-dtype raw type, key mapping and the canonical NaN written to padded value slots.
template <DType D>
struct DTypeTraits;

template <>
struct DTypeTraits<DType::kFloat32> {
  using Raw = uint32_t;
  static constexpr Raw kNaN = 0x7fc00000u;
  static uint32_t key(Raw bits, bool largest) { return keys::key_from_f32_bits(bits, largest); }
  static Raw from_key(uint32_t key, bool largest) { return keys::f32_bits_from_key(key, largest); }
};

template <>
struct DTypeTraits<DType::kBFloat16> {
  using Raw = uint16_t;
  static constexpr Raw kNaN = 0x7fc0u;
  static uint32_t key(Raw bits, bool largest) { return keys::key_from_bf16_bits(bits, largest); }
  static Raw from_key(uint32_t key, bool largest) {
    return static_cast<Raw>(keys::bits16_from_key(key, largest));
  }
};

template <>
struct DTypeTraits<DType::kFloat16> {
  using Raw = uint16_t;
  static constexpr Raw kNaN = 0x7e00u;
  static uint32_t key(Raw bits, bool largest) { return keys::key_from_f16_bits(bits, largest); }
  static Raw from_key(uint32_t key, bool largest) {
    return static_cast<Raw>(keys::bits16_from_key(key, largest));
  }
};

// Calls fn(DTypeTraits<dtype>{}) for a validated dtype.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBFloat16: return fn(DTypeTraits<DType::kBFloat16>{});
    case DType::kFloat16: return fn(DTypeTraits<DType::kFloat16>{});
    case DType::kFloat32: break;
  }
  return fn(DTypeTraits<DType::kFloat32>{});
}

// Element i of a row of raw values (memcpy: the scores are float/half storage, read as bits).
template <typename Traits>
inline typename Traits::Raw load_raw(const void* data, int64_t i) {
  typename Traits::Raw raw;
  std::memcpy(&raw, static_cast<const unsigned char*>(data) + i * int64_t{sizeof(raw)},
              sizeof(raw));
  return raw;
}

inline int64_t effective_stride(const SelectProblem& p) {
  return p.row_stride == 0 ? p.n : p.row_stride;
}

// The selectable part [start, end) of row b: data points at element `start`.
struct RowSpan {
  const void* data = nullptr;
  int64_t len = 0;
};

inline RowSpan row_span(const SelectProblem& p, int64_t b) {
  const int64_t start = p.row_starts ? p.row_starts[b] : 0;
  const int64_t end = p.row_ends ? p.row_ends[b] : p.n;
  if (end <= start) return {};
  const int64_t offset = b * effective_stride(p) + start;
  const auto* base = static_cast<const unsigned char*>(p.scores);
  return {base + offset * static_cast<int64_t>(dtype_size(p.dtype)), end - start};
}

// Writes row b's output from its `count` best composites (count <= k, already in output order):
// indices relative to the row start, then -1 padding; values (if requested) rebuilt from the keys,
// padded with the dtype's canonical NaN.
template <typename Traits>
void write_row(const SelectProblem& p, int64_t b, const uint64_t* best, int64_t count) {
  using Raw = typename Traits::Raw;
  int32_t* indices = p.indices + b * p.k;
  for (int64_t i = 0; i < count; ++i) indices[i] = keys::composite_index(best[i]);
  for (int64_t i = count; i < p.k; ++i) indices[i] = -1;
  if (p.values == nullptr) return;
  auto* values = static_cast<unsigned char*>(p.values) + b * p.k * int64_t{sizeof(Raw)};
  for (int64_t i = 0; i < count; ++i) {
    const Raw raw = Traits::from_key(keys::composite_key(best[i]), p.largest);
    std::memcpy(values + i * int64_t{sizeof(Raw)}, &raw, sizeof(Raw));
  }
  const Raw nan = Traits::kNaN;
  for (int64_t i = count; i < p.k; ++i) {
    std::memcpy(values + i * int64_t{sizeof(Raw)}, &nan, sizeof(Raw));
  }
}

}  // namespace litetopk::cpu
