// The bounded-mass pick of sparse decode (litetopk/sparse_decode.h, selection kMass): per query
// head, the lightest non-anchor blocks whose estimated mass adds up to at most mass_target of the
// total are skipped.
//
// Grid (num_q_heads, batch), 256 threads; one CTA per (sequence, query head) row.
// 1. Lets the dependent attend pass launch, then waits for the scan pass's block masses.
// 2. Reads the length; w_j = exp2(mass2_j - max mass2) for the nf full blocks, kept in shared
//    memory as fp32 bits (the anchors, never skipped, as +inf bits); T = sum of every w_j.
// 3. Bisection over the fp32 bit patterns v in [0, 1.0f] (positive floats order as their bits):
//    the largest v with S(v) = sum of the candidates' w_j <= v at most mass_target * T. Each S is
//    a fixed-order CTA sum, so every thread sees the same value and the same v.
// 4. keep_rows[row, j] = 1 for w_j > v (the anchors included), 0 for the skipped blocks.
// Ties: equal masses have equal bits, so a run of them is skipped or kept as a whole.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"

namespace litetopk::decode {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr uint32_t kAnchorBits = 0x7f800000u;  // +inf: above every candidate's v
constexpr uint32_t kOneBits = 0x3f800000u;     // 1.0f, the heaviest block's w

struct PickParams {
  const int32_t* lengths;
  const float* block_mass2;
  uint8_t* keep_rows;
  int num_q_heads, block_size, max_blocks;
  float mass_target;
};

// Sum of x over the CTA in a fixed order, returned to every thread. scratch holds two rounds
// of warp sums, so consecutive calls need one barrier each.
__device__ __forceinline__ float cta_sum(float x, float (*scratch)[kWarps], int round) {
#pragma unroll
  for (int k = 16; k > 0; k /= 2) x += __shfl_xor_sync(0xffffffffu, x, k);
  if ((threadIdx.x & 31) == 0) scratch[round & 1][threadIdx.x >> 5] = x;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += scratch[round & 1][w];
  return total;
}

__device__ __forceinline__ float cta_max(float x, float (*scratch)[kWarps], int round) {
#pragma unroll
  for (int k = 16; k > 0; k /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, k));
  if ((threadIdx.x & 31) == 0) scratch[round & 1][threadIdx.x >> 5] = x;
  __syncthreads();
  float top = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) top = fmaxf(top, scratch[round & 1][w]);
  return top;
}

__global__ void __launch_bounds__(kThreads) sparse_pick_kernel(const PickParams p) {
  sm90::allow_dependent_grids();
  sm90::wait_for_prerequisite_grids();
  extern __shared__ uint32_t w_bits[];  // [nf]
  __shared__ float scratch[2][kWarps];
  const int b = blockIdx.y;
  const int64_t row = static_cast<int64_t>(b) * p.num_q_heads + blockIdx.x;
  const int nf = p.lengths[b] / p.block_size;
  if (nf == 0) return;
  const float* mass2 = p.block_mass2 + row * p.max_blocks;
  uint8_t* keep = p.keep_rows + row * p.max_blocks;
  int round = 0;

  float top = -INFINITY;
  for (int j = threadIdx.x; j < nf; j += kThreads) top = fmaxf(top, mass2[j]);
  top = cta_max(top, scratch, round++);
  float part = 0.0f;
  for (int j = threadIdx.x; j < nf; j += kThreads) {
    const float w = exp2f(mass2[j] - top);
    part += w;
    w_bits[j] = (j == 0 || j == nf - 1) ? kAnchorBits : __float_as_uint(w);
  }
  const float budget = p.mass_target * cta_sum(part, scratch, round++);  // its barrier: w_bits set

  const auto skipped_mass = [&](uint32_t v) {
    float s = 0.0f;
    for (int j = threadIdx.x; j < nf; j += kThreads) {
      const uint32_t bits = w_bits[j];
      if (bits <= v) s += __uint_as_float(bits);
    }
    return cta_sum(s, scratch, round++);
  };
  // The largest v with S(v) <= budget: S(0) <= budget (only zero masses are <= 0), and v = 1.0f
  // skips every candidate.
  uint32_t lo = 0;
  if (skipped_mass(kOneBits) <= budget) {
    lo = kOneBits;
  } else {
    for (uint32_t hi = kOneBits; hi - lo > 1;) {  // S(lo) <= budget < S(hi)
      const uint32_t mid = lo + (hi - lo) / 2;
      if (skipped_mass(mid) <= budget) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
  }
  for (int j = threadIdx.x; j < nf; j += kThreads) keep[j] = w_bits[j] > lo ? 1 : 0;
}

}  // namespace

Status launch_sparse_pick(const SparseDecodeProblem& problem,
                          const SparseSelectionBuffers& selection, cudaStream_t stream) {
  const SparseKvCache& c = problem.cache;
  PickParams params{};
  params.lengths = c.lengths;
  params.block_mass2 = selection.block_mass2;
  params.keep_rows = selection.keep_rows;
  params.num_q_heads = static_cast<int>(problem.num_q_heads);
  params.block_size = static_cast<int>(c.block_size);
  params.max_blocks = static_cast<int>(c.max_blocks);
  params.mass_target = problem.mass_target;
  const dim3 grid(static_cast<unsigned>(problem.num_q_heads), static_cast<unsigned>(c.batch));
  return launch_kernel(sparse_pick_kernel, grid, dim3(kThreads),
                       static_cast<std::size_t>(c.max_blocks) * sizeof(uint32_t), true, stream,
                       params);
}

}  // namespace litetopk::decode
