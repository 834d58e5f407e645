// Bit-level conversions for the three score dtypes, host side (inline, no state): float <-> its
// raw bits, float <-> bfloat16 and float16 bits (round to nearest, ties to even), and the raw
// bits of one score of any dtype. For callers that fill or read bf16/fp16 arrays on the host
// exactly as the library's contract describes (the testkit, the CLI and the tests use it too).
// fp8 e4m3 is in litetopk/fp8_e4m3.h.
//
// A raw score is held in a uint32_t: the float32 bits, or the 16 bits of a bfloat16/float16 in
// the low half.
//
//   bf16: the high half of a float32. Encoding rounds the dropped 16 bits to nearest even (a carry
//         into the exponent is the right answer, up to inf); NaN -> 0x7fc0 with the input's sign.
//   fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals are multiples of 2^-24.
//         Encoding rounds to nearest even; |x| >= 65520 (65504 + half an ulp) -> inf;
//         NaN -> 0x7e00 with the input's sign. Decoding is exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "litetopk/types.h"

namespace litetopk::float_bits {

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint16_t bf16_bits_from_f32(float value) {
  const uint32_t bits = f32_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x7fc0u);
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

inline float f32_from_bf16_bits(uint16_t bits) { return f32_from_bits(uint32_t{bits} << 16); }

inline uint16_t f16_bits_from_f32(float value) {
  const uint32_t bits = f32_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs_bits < 0x38800000u) {
    // Below the smallest normal 2^-14: a multiple of 2^-24. Scaling by 2^24 is exact and
    // nearbyint rounds half to even (default rounding mode); 0x400 is the smallest normal.
    const float scaled = f32_from_bits(abs_bits) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t exponent = (abs_bits >> 23) - 127u + 15u;
  const uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carry into exponent is right
  return static_cast<uint16_t>(sign | half);
}

inline float f32_from_f16_bits(uint16_t bits) {
  const uint32_t sign = (uint32_t{bits} & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return f32_from_bits(sign | ((exponent - 15u + 127u) << 23) | (mantissa << 13));
}

// `value` rounded to `dtype`, as a raw score; and back (exact).
inline uint32_t encode_score(float value, DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return bf16_bits_from_f32(value);
    case DType::kFloat16: return f16_bits_from_f32(value);
    case DType::kFloat32: break;
  }
  return f32_bits(value);
}

inline float decode_score(uint32_t raw, DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return f32_from_bf16_bits(static_cast<uint16_t>(raw));
    case DType::kFloat16: return f32_from_f16_bits(static_cast<uint16_t>(raw));
    case DType::kFloat32: break;
  }
  return f32_from_bits(raw);
}

// Element i of an array of `dtype` scores, as a raw score; and the store.
inline uint32_t load_score(const void* base, DType dtype, int64_t i) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  if (dtype == DType::kFloat32) {
    uint32_t raw;
    std::memcpy(&raw, bytes + i * 4, 4);
    return raw;
  }
  uint16_t raw;
  std::memcpy(&raw, bytes + i * 2, 2);
  return raw;
}

inline void store_score(void* base, DType dtype, int64_t i, uint32_t raw) {
  auto* bytes = static_cast<unsigned char*>(base);
  if (dtype == DType::kFloat32) {
    std::memcpy(bytes + i * 4, &raw, 4);
    return;
  }
  const auto half = static_cast<uint16_t>(raw);
  std::memcpy(bytes + i * 2, &half, 2);
}

}  // namespace litetopk::float_bits
