// The sparse KV cache's element format (litetopk/sparse_decode.h), shared by the CPU reference and
// the CUDA kernels so that both quantize bit for bit alike: the slot of a block, the packing of
// 2-bit codes, the quantization of one key element given its channel scale, and the rebuild.
// Every function is plain fp32 arithmetic with round-to-nearest (no fused multiply-add is
// possible in these expressions), so host and device agree exactly.
//
// The channel scale itself is rounded to the cache dtype by the caller (host: scale_from_amax in
// this header with a dtype encoder; device: __float2half_rn / __float2bfloat16_rn).
#pragma once

#include <cmath>
#include <cstdint>

#include "litetopk/host_device.h"

namespace litetopk::sparse_kv {

constexpr int kCodesPerByte = 4;
constexpr int kCodeBits = 2;

// Slot of block j of sequence b, KV head h (block_table: [batch, max_blocks] or null).
LITETOPK_HD int64_t slot_index(const int32_t* block_table, int64_t num_kv_heads,
                               int64_t max_blocks, int64_t b, int64_t h, int64_t j) {
  if (block_table == nullptr) return (b * num_kv_heads + h) * max_blocks + j;
  return static_cast<int64_t>(block_table[b * max_blocks + j]) * num_kv_heads + h;
}

// Level of a code: {0, 1, 2, 3} -> {-1.5, -0.5, 0.5, 1.5}.
LITETOPK_HD float code_level(uint32_t code) { return static_cast<float>(code) - 1.5f; }

// The nearest level's code for x = key / scale; ties (x = -1, 0, 1) go up.
LITETOPK_HD uint32_t code_of(float x) {
  return static_cast<uint32_t>(x >= -1.0f) + static_cast<uint32_t>(x >= 0.0f) +
         static_cast<uint32_t>(x >= 1.0f);
}

// Code of channel c in a token's packed row (D/4 bytes).
LITETOPK_HD uint32_t unpack_code(const uint8_t* row, int64_t c) {
  return (static_cast<uint32_t>(row[c / kCodesPerByte]) >> (kCodeBits * (c % kCodesPerByte))) & 3u;
}

// Sets the code of channel c in a packed row (the other channels' bits are kept).
LITETOPK_HD void pack_code(uint8_t* row, int64_t c, uint32_t code) {
  const int shift = kCodeBits * static_cast<int>(c % kCodesPerByte);
  const uint32_t kept = static_cast<uint32_t>(row[c / kCodesPerByte]) & ~(3u << shift);
  row[c / kCodesPerByte] = static_cast<uint8_t>(kept | ((code & 3u) << shift));
}

// The residual: an int8 r (two's complement) for R = (r + 1/2) * 2^-8 in units of the scale, the
// midpoints of the 256 cells of width 2^-8 that tile [-0.5, 0.5]: every |R| <= 0.5 is within
// 2^-9 of its code.
constexpr int kResidualShift = 8;

struct QuantizedElement {
  uint32_t code;     // 0..3
  uint8_t residual;  // int8 r: R = (r + 1/2) * 2^-8
};

// One key element k (exact in fp32) with its channel's scale s (already rounded to the dtype,
// >= 0): x = k / s (0 when s == 0), code = nearest level, r = floor((x - level) * 2^8) clamped to
// [-128, 127] (x - level and its product with 2^8 are exact in fp32). The clamp acts only beyond
// |x - level| = 0.5, which only subnormal scales allow (by up to 0.24).
LITETOPK_HD QuantizedElement quantize_element(float k, float s) {
  const float x = s > 0.0f ? k / s : 0.0f;
  const uint32_t code = code_of(x);
  const float cell = floorf((x - code_level(code)) * static_cast<float>(1 << kResidualShift));
  const float r = cell > 127.0f ? 127.0f : (cell < -128.0f ? -128.0f : cell);
  return {code, static_cast<uint8_t>(static_cast<int8_t>(r))};
}

// The residual R = (r + 1/2) * 2^-8 of a stored byte (exact).
LITETOPK_HD float residual_value(uint8_t residual) {
  return (static_cast<float>(static_cast<int8_t>(residual)) + 0.5f) *
         (1.0f / static_cast<float>(1 << kResidualShift));
}

// The rebuilt key s * (level + R): exact in fp32 (level + R is an odd multiple of 2^-9 below 2.3
// in magnitude; s has at most 11 significant bits).
LITETOPK_HD float rebuild_element(float s, uint32_t code, uint8_t residual) {
  return s * (code_level(code) + residual_value(residual));
}

// The 2-bit estimate of a key element: s * level.
LITETOPK_HD float estimate_element(float s, uint32_t code) { return s * code_level(code); }

// The channel scale before rounding to the dtype: amax / 1.5 (IEEE division, so host and device
// agree), which puts the outer levels +-1.5 s at +-amax.
LITETOPK_HD float unrounded_scale(float amax) { return amax / 1.5f; }

}  // namespace litetopk::sparse_kv
