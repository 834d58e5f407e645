// Bit-level helpers for the three score dtypes, for tests: conversions between float and the raw
// bits of bfloat16 / float16 (round to nearest even), and raw loads/stores of one element. A raw
// score is held in a uint32_t: the float32 bits, or the 16 bits of a bfloat16/float16 in the low
// half.
#pragma once

#include <cstdint>

#include "litetopk/types.h"

namespace litetopk::testing {

uint32_t f32_bits(float value);
float f32_from_bits(uint32_t bits);

uint16_t bf16_bits_from_f32(float value);  // NaN -> 0x7fc0 with the input's sign
float f32_from_bf16_bits(uint16_t bits);
uint16_t f16_bits_from_f32(float value);  // NaN -> 0x7e00 with the input's sign; overflow -> inf
float f32_from_f16_bits(uint16_t bits);

// value rounded to the dtype, as raw bits; and back.
uint32_t encode_score(float value, DType dtype);
float decode_score(uint32_t raw, DType dtype);
bool is_nan_score(uint32_t raw, DType dtype);
// The order-preserving key of core/score_keys.h for a raw score (0 for NaN).
uint32_t score_key(uint32_t raw, DType dtype, bool largest);

// Element i of an array of dtype.
uint32_t load_score(const void* base, DType dtype, int64_t i);
void store_score(void* base, DType dtype, int64_t i, uint32_t raw);

}  // namespace litetopk::testing
