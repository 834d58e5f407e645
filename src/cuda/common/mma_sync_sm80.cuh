// Thin PTX wrappers for the warp-level tensor-core path (sm_80 and later): mma.sync m16n8k16
// (fp16/bf16 in, fp32 accumulate) and m16n8k32 (int8 in, int32 accumulate), and the 8x8 b16
// transpose (movmatrix) that turns a result fragment into an operand fragment.
//
// Fragment conventions (PTX m16n8k16, lane = 4 * g + t): A row-major 16x16 with a0a1 = (row g,
// k 2t..2t+1), a2a3 = (row g+8, same k), a4a5 = (row g, k 2t+8..), a6a7 = (row g+8, k 2t+8..);
// B 16x8 with b0b1 = (k 2t.., col g), b2b3 = (k 2t+8.., col g); C 16x8 with c0c1 = (row g, cols
// 2t, 2t+1), c2c3 = (row g+8, same cols). The low half of a 32-bit register is the lower k / col.
#pragma once

#include <cstdint>

namespace litetopk::sm80 {

// D += A * B with fp16 inputs.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D += A * B with bf16 inputs.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D += A * B with int8 inputs (m16n8k32: a0..a3 rows g / g+8 at k 4t..4t+3, then k 16+4t..;
// b0 k 4t..4t+3, b1 k 16+4t..; C as for m16n8k16), exact int32 accumulation.
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Transposes the 8x8 b16 matrix held one row fragment per lane (lane 4g+t: row g, cols 2t, 2t+1).
__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

}  // namespace litetopk::sm80
