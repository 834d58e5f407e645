// Thin PTX wrappers for Hopper's tensor memory accelerator (sm_90a), device side: 2-D and 3-D tile
// loads through a tensor map (built on the host by tensor_map_sm90.h) into shared memory,
// completing on an mbarrier, and the tensor map prefetch.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/common/async_copy_sm90.cuh"

namespace litetopk::sm90 {

// Loads the box at element coordinates (x, y) of a 2-D tensor map into shared memory; completion
// is signalled on `barrier` as transferred bytes.
__device__ __forceinline__ void tma_load_2d(void* shared_dst, const CUtensorMap* map, int32_t x,
                                            int32_t y, uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(shared_address(shared_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(shared_address(barrier))
      : "memory");
}

// The same for a 3-D map, at element coordinates (x, y, z).
__device__ __forceinline__ void tma_load_3d(void* shared_dst, const CUtensorMap* map, int32_t x,
                                            int32_t y, int32_t z, uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];" ::"r"(shared_address(shared_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(shared_address(barrier))
      : "memory");
}

// tma_load_3d with an L2 cache policy (async_copy_sm90.cuh: l2_evict_first_policy, ...).
__device__ __forceinline__ void tma_load_3d(void* shared_dst, const CUtensorMap* map, int32_t x,
                                            int32_t y, int32_t z, uint64_t* barrier,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(shared_address(shared_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(shared_address(barrier)),
      "l"(policy)
      : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace litetopk::sm90
