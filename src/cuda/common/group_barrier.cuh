// A barrier among a group of blocks of one grid (the blocks of one row or one request), through
// an atomic counter in global memory. The grid must be launched cooperatively
// (cuda_common::launch_cooperative): a block waits for others that must already be resident.
#pragma once

#include <cstdint>

namespace litetopk::cuda_common {

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Waits until each of the group's `blocks` blocks has arrived `phase` times (phases count from 1
// on a counter that starts at 0); the block's earlier global writes are visible to the group
// after it.
__device__ __forceinline__ void group_barrier(uint32_t* counter, uint32_t blocks, uint32_t phase) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    const uint32_t target = phase * blocks;
    while (load_acquire(counter) < target) {
    }
  }
  __syncthreads();
}

}  // namespace litetopk::cuda_common
