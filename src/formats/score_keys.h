// Order-preserving integer keys for scores, shared by the CPU and CUDA backends.
//
// A score becomes a 32-bit key whose unsigned order is the selection order (larger key = better):
// the float's bits are flipped so that unsigned comparison matches float comparison, then inverted
// for smallest-first selection. NaN maps to key 0 and every other value to a key >= 1, so a gate
// "key >= 1" drops NaN and keeps -inf. 16-bit types use the low 16 bits.
//
// A candidate is the 64-bit composite (key << 32) | ~index: larger composite = better score, then
// smaller index. Distinct positions have distinct composites, which is what makes `deterministic`
// selection a plain selection on composites. Composite 0 is the empty slot (index -1).
#pragma once

#include <cstdint>

#include "litetopk/host_device.h"

namespace litetopk::keys {

constexpr uint64_t kEmptyComposite = 0;
// Gate that admits every non-NaN score.
constexpr uint64_t kAdmitAllValid = uint64_t{1} << 32;

LITETOPK_HD uint32_t key_from_f32_bits(uint32_t bits, bool largest) {
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  const uint32_t key = largest ? ordered : ~ordered;
  return is_nan ? 0u : key;
}

// fp16 and bf16 share the sign-magnitude scheme; only the NaN test differs.
LITETOPK_HD uint32_t key_from_16bit(uint32_t bits, bool is_nan, bool largest) {
  const uint32_t ordered = (bits & 0x8000u) ? (~bits & 0xffffu) : (bits | 0x8000u);
  const uint32_t key = largest ? ordered : (~ordered & 0xffffu);
  return is_nan ? 0u : key;
}

LITETOPK_HD uint32_t key_from_f16_bits(uint32_t bits, bool largest) {
  return key_from_16bit(bits, (bits & 0x7fffu) > 0x7c00u, largest);
}

LITETOPK_HD uint32_t key_from_bf16_bits(uint32_t bits, bool largest) {
  return key_from_16bit(bits, (bits & 0x7fffu) > 0x7f80u, largest);
}

// Inverse of key_from_*_bits for a key >= 1 (never called on NaN's key 0).
LITETOPK_HD uint32_t f32_bits_from_key(uint32_t key, bool largest) {
  const uint32_t ordered = largest ? key : ~key;
  return (ordered & 0x80000000u) ? (ordered & 0x7fffffffu) : ~ordered;
}

LITETOPK_HD uint32_t bits16_from_key(uint32_t key, bool largest) {
  const uint32_t ordered = largest ? key : (~key & 0xffffu);
  return (ordered & 0x8000u) ? (ordered & 0x7fffu) : (~ordered & 0xffffu);
}

LITETOPK_HD uint64_t make_composite(uint32_t key, uint32_t index) {
  return (uint64_t{key} << 32) | uint64_t{~index};
}

LITETOPK_HD uint32_t composite_key(uint64_t c) { return static_cast<uint32_t>(c >> 32); }

// -1 for the empty slot.
LITETOPK_HD int32_t composite_index(uint64_t c) {
  return c == kEmptyComposite ? -1 : static_cast<int32_t>(~static_cast<uint32_t>(c));
}

}  // namespace litetopk::keys
