// Thin PTX wrappers for warp-specialized kernels (sm_90a): warpgroup register reallocation
// (setmaxnreg) and named barriers among some of a block's warps (one with an OR reduction).
#pragma once

#include <cstdint>

namespace litetopk::sm90 {

template <uint32_t kRegisters>
__device__ __forceinline__ void warpgroup_registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <uint32_t kRegisters>
__device__ __forceinline__ void warpgroup_registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// named_barrier that also returns whether `condition` held on any of the `threads` threads.
__device__ __forceinline__ bool named_barrier_or(uint32_t id, uint32_t threads, bool condition) {
  uint32_t any = 0;
  asm volatile(
      "{\n"
      ".reg .pred c, p;\n"
      "setp.ne.u32 c, %1, 0;\n"
      "bar.red.or.pred p, %2, %3, c;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(condition)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}
// Arrives at barrier `id` without waiting: the producer's half of a producer-consumer handoff
// whose consumers call named_barrier(id, threads) (its writes before are visible to them after).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace litetopk::sm90
