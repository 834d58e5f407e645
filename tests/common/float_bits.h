// The public bit-level conversions of the three score dtypes (litetopk/float_bits.h: float <->
// bfloat16 / float16 bits, raw loads/stores, encode/decode of a raw score), brought into
// litetopk::testing for the tests. A raw score is held in a uint32_t: the float32 bits, or the 16
// bits of a bfloat16/float16 in the low half.
#pragma once

#include <cstdint>

#include "litetopk/float_bits.h"
#include "litetopk/types.h"

namespace litetopk::testing {

using float_bits::bf16_bits_from_f32;  // NaN -> 0x7fc0 with the input's sign
using float_bits::decode_score;
using float_bits::encode_score;  // value rounded to the dtype, as raw bits
using float_bits::f16_bits_from_f32;  // NaN -> 0x7e00 with the input's sign; overflow -> inf
using float_bits::f32_bits;
using float_bits::f32_from_bf16_bits;
using float_bits::f32_from_bits;
using float_bits::f32_from_f16_bits;
using float_bits::load_score;  // element i of an array of dtype
using float_bits::store_score;

}  // namespace litetopk::testing
