// fp8 e4m3 <-> float conversion (host and device code): how to make the fp8 inputs of the
// indexer and read the sparse cache's residuals; the CPU and CUDA backends use the same code.
//
// The format is OCP FP8 E4M3 as torch.float8_e4m3fn stores it: 1 sign bit, 4 exponent bits
// (bias 7), 3 mantissa bits; no infinities; NaN is S.1111.111 (0x7f, 0xff); every other byte is a
// finite value. Exponent field 0 holds the subnormals m * 2^-9 (and +-0); the largest finite value
// is 0x7e = 1.75 * 2^8 = 448.
//
// Every e4m3 value is exactly representable as a float, so decoding is exact. Encoding rounds to
// nearest, ties to even, and saturates: a finite value (or infinity) whose magnitude is >= 448
// becomes +-448; NaN becomes NaN (0x7f or 0xff, keeping the sign); magnitudes <= 2^-10 (half the
// smallest subnormal) round to a signed zero.
#pragma once

#include <cstdint>
#include <cstring>

#include "litetopk/host_device.h"

namespace litetopk::fp8 {

constexpr uint8_t kE4m3Nan = 0x7f;     // the positive NaN encoding (0xff is the negative one)
constexpr uint8_t kE4m3MaxBits = 0x7e;  // 448
constexpr float kE4m3Max = 448.0f;

LITETOPK_HD float f32_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

LITETOPK_HD uint32_t bits_from_f32(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

LITETOPK_HD bool e4m3_is_nan(uint8_t b) { return (b & 0x7fu) == 0x7fu; }

// Exact decode. NaN decodes to a quiet float NaN with the byte's sign.
LITETOPK_HD float e4m3_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xfu;
  const uint32_t mantissa = b & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) {
    return f32_from_bits(sign | 0x7fc00000u);
  }
  if (exponent == 0) {
    // Subnormal (or zero): mantissa * 2^-9, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;
    return sign ? -magnitude : magnitude;
  }
  // Normal: rebias 7 -> 127 and widen the mantissa 3 -> 23 bits.
  return f32_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// Round to nearest even, saturating to +-448; NaN stays NaN.
LITETOPK_HD uint8_t float_to_e4m3(float f) {
  const uint32_t bits = bits_from_f32(f);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | kE4m3Nan);
  if (magnitude >= 0x43e00000u) return static_cast<uint8_t>(sign | kE4m3MaxBits);  // >= 448, inf
  if (magnitude <= 0x3a800000u) return sign;  // <= 2^-10: rounds to zero (2^-10 is a tie to 0)
  // Here 2^-10 < |f| < 448, so the float is normal with unbiased exponent e in [-10, 8].
  const int e = static_cast<int>(magnitude >> 23) - 127;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // |f| = significand*2^(e-23)
  // The e4m3 quantum at this magnitude is 2^(max(e, -6) - 3); express |f| in quanta, rounding.
  const int quantum_exponent = (e < -6 ? -6 : e) - 3;
  const int shift = 23 + quantum_exponent - e;  // 20 for normals, 21..24 for subnormals
  const uint32_t quanta = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded =
      quanta + ((remainder > half || (remainder == half && (quanta & 1u))) ? 1u : 0u);
  // For e <= -6, `rounded` in quanta of 2^-9 is the byte itself (8 = 2^-6 is the smallest normal).
  // For e > -6, rounded is 8..16 (16 = a carry into the next binade), and the exponent field
  // e + 7 in bits 3..6 plus (rounded - 8) gives the byte; the carry propagates by the addition.
  const uint32_t out = e <= -6 ? rounded : ((static_cast<uint32_t>(e + 6) << 3) + rounded);
  return static_cast<uint8_t>(sign | (out > kE4m3MaxBits ? kE4m3MaxBits : out));
}

}  // namespace litetopk::fp8
