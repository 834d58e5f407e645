// Thin PTX wrappers for asynchronous copies: shared-memory mbarriers, cp.async (sm_80 and later),
// the bulk copy engine (cp.async.bulk, 1-D, global -> shared, completing on an mbarrier; sm_90)
// and the fence between generic-proxy writes and the async proxy.
#pragma once

#include <cstdint>

namespace litetopk::sm90 {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Initializes a barrier that completes a phase after `arrivals` arrivals (and all expected bytes).
__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(arrivals));
}

// Makes initialized barriers visible to the async proxy (the copy engine).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of copies that will complete on this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   shared_address(barrier)),
               "r"(bytes)
               : "memory");
}

// One arrival (no bytes announced).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
}

// Whether the barrier's phase with parity `parity` has completed (one poll).
__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* barrier, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(shared_address(barrier)), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the barrier's phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  while (!mbarrier_try_wait(barrier, parity)) {
  }
}

// Copies 16 bytes from global to shared memory asynchronously (cp.async, L2 only); with
// `valid` false it writes 16 zero bytes and reads nothing. Completion: cp_async_commit /
// cp_async_wait.
__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(shared_dst)),
               "l"(global_src), "r"(valid ? 16 : 0)
               : "memory");
}
// An L2 policy that keeps the lines a load brings in over others (evict_last), for data that is
// read again soon (by another block).
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// An L2 policy for data read once (evict_first): its lines go before others'.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// cp_async_16 with an L2 cache policy (l2_evict_last_policy, l2_evict_first_policy).
__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src, bool valid,
                                            uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(
                   shared_address(shared_dst)),
               "l"(global_src), "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// One arrival on `barrier` once every cp.async this thread issued before has completed (counted
// against the arrivals the barrier expects).
__device__ __forceinline__ void cp_async_arrive(uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(shared_address(barrier))
               : "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory;
// completion is signalled on `barrier` as transferred bytes.
__device__ __forceinline__ void bulk_copy_global_to_shared(void* shared_dst, const void* global_src,
                                                          uint32_t bytes, uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(shared_dst)),
      "l"(global_src), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}

// bulk_copy_global_to_shared with an L2 cache policy.
__device__ __forceinline__ void bulk_copy_global_to_shared(void* shared_dst, const void* global_src,
                                                          uint32_t bytes, uint64_t* barrier,
                                                          uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], "
      "%2, [%3], %4;" ::"r"(shared_address(shared_dst)),
      "l"(global_src), "r"(bytes), "r"(shared_address(barrier)), "l"(policy)
      : "memory");
}

// Makes this thread's generic-proxy shared-memory writes visible to the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

}  // namespace litetopk::sm90
