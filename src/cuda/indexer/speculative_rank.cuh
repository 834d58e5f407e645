// The cold sample's speculative gate rank, shared by the fused kernels.
#pragma once

#include <cstdint>

namespace litetopk::cuda_indexer {

// The speculative gate's sample rank for a sample of `cold` of the `tiles` key tiles: the sample's
// share of a query's k best is about binomial with mean mu = cold k / tiles, and the sample's
// r-th best with r = mu + 6 sqrt(mu) + 2 lies below the query's k-th best but with a
// probability of about 1e-8 (Poisson tail at mu = 18, the sample of 512K keys). With 4.75 (about
// 3e-6) one query of the benchmark's 8192 x 512K, H = 32 failed, and re-running its block alone
// on one SM cost 10 ms (20%); the wider margin admits about 0.3k more sparse candidates.
__device__ __forceinline__ uint32_t speculative_rank(int cold, int tiles, int32_t k) {
  const float mu = static_cast<float>(cold) * static_cast<float>(k) / static_cast<float>(tiles);
  return static_cast<uint32_t>(ceilf(mu + 6.0f * sqrtf(mu))) + 2;
}

}  // namespace litetopk::cuda_indexer
