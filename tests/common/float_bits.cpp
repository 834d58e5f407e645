#include "common/float_bits.h"

#include "formats/score_keys.h"

namespace litetopk::testing {

bool is_nan_score(uint32_t raw, DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return (raw & 0x7fffu) > 0x7f80u;
    case DType::kFloat16: return (raw & 0x7fffu) > 0x7c00u;
    case DType::kFloat32: break;
  }
  return (raw & 0x7fffffffu) > 0x7f800000u;
}

uint32_t score_key(uint32_t raw, DType dtype, bool largest) {
  switch (dtype) {
    case DType::kBFloat16: return keys::key_from_bf16_bits(raw & 0xffffu, largest);
    case DType::kFloat16: return keys::key_from_f16_bits(raw & 0xffffu, largest);
    case DType::kFloat32: break;
  }
  return keys::key_from_f32_bits(raw, largest);
}

}  // namespace litetopk::testing
