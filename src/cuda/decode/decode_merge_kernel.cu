// The merge step of flash-decoding (dense and sparse): one warp per (sequence, query head).
// 1. Waits for the split kernel (programmatic dependent launch: its launch overlaps that
//    kernel's tail).
// 2. Reads the length on the device: ceil(len / split_tokens) splits are active.
// 3. M = max of their log2-sum-exps; out = sum_s 2^(lse2_s - M) o_s / sum_s 2^(lse2_s - M),
//    lse = (M + log2 sum) * ln 2. A sequence with no token (or no read token) gets zeros and
//    lse = -inf. Lanes share the splits' maxima and weights; each lane owns 4 of the 128 dims.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"
#include "cuda/decode/decode_mma_sm90.cuh"

namespace litetopk::decode {
namespace {

constexpr int kWarpsPerBlock = 4;

struct MergeParams {
  const float* o;
  const float* lse2;
  int splits;
  int64_t split_tokens;
  const int32_t* lengths;
  int64_t rows;
  int64_t num_q_heads;
  void* out;
  DType out_dtype;
  float* lse;
};

__device__ __forceinline__ void store4(void* out, DType dtype, int64_t at, const float (&v)[4]) {
  if (dtype == DType::kFloat32) {
    *reinterpret_cast<float4*>(static_cast<float*>(out) + at) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (dtype == DType::kFloat16) {
    uint2 w;
    w.x = pack2<__half>(v[0], v[1]);
    w.y = pack2<__half>(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__half*>(out) + at) = w;
  } else {
    uint2 w;
    w.x = pack2<__nv_bfloat16>(v[0], v[1]);
    w.y = pack2<__nv_bfloat16>(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(out) + at) = w;
  }
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) decode_merge_kernel(const MergeParams p) {
  sm90::wait_for_prerequisite_grids();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= p.rows) return;
  const int64_t len = p.lengths[row / p.num_q_heads];
  const int active =
      static_cast<int>(min(static_cast<int64_t>(p.splits), (len + p.split_tokens - 1) / p.split_tokens));
  const float* lse2 = p.lse2 + row * p.splits;
  float mx = -INFINITY;
  for (int s = lane; s < active; s += 32) mx = fmaxf(mx, lse2[s]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.0f;
    for (int s0 = 0; s0 < active; s0 += 32) {
      // Lane l holds the weight of split s0 + l; the loop broadcasts them one by one.
      const float mine = s0 + lane < active ? exp2f(lse2[s0 + lane] - mx) : 0.0f;
      sum += mine;
      const int count = min(32, active - s0);
#pragma unroll 4
      for (int k = 0; k < count; ++k) {
        const float w = __shfl_sync(0xffffffffu, mine, k);
        if (w == 0.0f) continue;
        const float4 o = *reinterpret_cast<const float4*>(p.o + (row * p.splits + s0 + k) * kHeadDim +
                                                          4 * lane);
        acc[0] += w * o.x;
        acc[1] += w * o.y;
        acc[2] += w * o.z;
        acc[3] += w * o.w;
      }
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = 1.0f / sum;
    for (float& a : acc) a *= inv;
    lse = (mx + log2f(sum)) / kLog2e;
  }
  store4(p.out, p.out_dtype, row * kHeadDim + 4 * lane, acc);
  if (p.lse != nullptr && lane == 0) p.lse[row] = lse;
}

}  // namespace

Status launch_decode_merge(const SplitPartials& partials, const int32_t* lengths, int64_t batch,
                           int64_t num_q_heads, void* out, DType out_dtype, float* lse,
                           cudaStream_t stream) {
  MergeParams params{};
  params.o = partials.o;
  params.lse2 = partials.lse2;
  params.splits = partials.splits;
  params.split_tokens = partials.split_tokens;
  params.lengths = lengths;
  params.rows = batch * num_q_heads;
  params.num_q_heads = num_q_heads;
  params.out = out;
  params.out_dtype = out_dtype;
  params.lse = lse;
  const auto blocks = static_cast<unsigned>((params.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return launch_kernel(decode_merge_kernel, dim3(blocks), dim3(kWarpsPerBlock * 32), 0, true,
                       stream, params);
}

}  // namespace litetopk::decode
