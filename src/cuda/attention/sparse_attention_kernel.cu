// Sparse MLA attention, the plain algorithm (SparseAttentionAlgo::kPlain): a kernel that favours
// being plainly right over speed, with warp-level bf16 tensor-core MMAs (mma.sync m16n8k16) and
// no pipelining; the GPU cross-check of the Hopper kernels (sparse_attention_sm90.cu).
//
// Pipeline of sparse_attention_kernel (block = 16 heads of one query, 4 warps):
// 1. The query's 16 x d_qk rows into shared memory.
// 2. Per tile of 64 selection slots: the slots' kv rows gathered into shared memory with cp.async
//    (a skipped slot, outside [0, s_kv) or past topk, gets a zero row and is masked).
// 3. S = q K^T (warp w: slots 16 w .. 16 w + 15), scaled to base-2 logits (sm_scale * log2 e),
//    skipped slots -inf.
// 4. Online softmax per head: running max m and sum l, P = 2^(S - m) rounded to bf16, and the
//    factor 2^(m_old - m) for what was accumulated.
// 5. O = factor * O + P V (warp w: value columns 128 w .. 128 w + 127), fp32 accumulators.
// 6. out = O / l in bf16; max_logits = m and lse = m + log2 l (base 2); a head with no valid slot
//    gets out = 0 and -inf for both.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/mma_sync_sm80.cuh"

namespace litetopk::cuda_attention {
namespace {

constexpr int kHeads = 16;   // MMA rows: heads of one query per block
constexpr int kSlots = 64;   // selection slots per tile
constexpr int kThreads = 128;
constexpr int kMaxDqk = 576;
constexpr int kDv = 512;
constexpr int kRow = kMaxDqk + 8;  // padded row (1168 bytes): conflict-free fragment loads

struct alignas(16) Shared {
  __nv_bfloat16 q[kHeads][kRow];
  __nv_bfloat16 kv[kSlots][kRow];
  float s[kHeads][kSlots];
  __nv_bfloat16 p[kHeads][kSlots];
  float row_max[kHeads];
  float row_sum[kHeads];
  float row_factor[kHeads];
  int32_t valid[kSlots];
};

__device__ __forceinline__ uint32_t pair_at(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ uint32_t pack(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(low)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(high)) << 16);
}

__global__ void __launch_bounds__(kThreads)
    sparse_attention_kernel(const SparseAttentionArgs args) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<Shared*>(shared_raw);
  const int groups = args.h_q / kHeads;
  const int64_t query = blockIdx.x / groups;
  const int head0 = static_cast<int>(blockIdx.x % groups) * kHeads;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int r = lane / 4;          // fragment row (and + 8)
  const int c2 = (lane % 4) * 2;   // fragment column pair
  const int chunks = args.d_qk / 8;  // 16-byte chunks per row

  // 1.
  const __nv_bfloat16* q_rows = args.q + (query * args.h_q + head0) * args.d_qk;
  for (int i = tid; i < kHeads * chunks; i += kThreads) {
    sm90::cp_async_16(&s.q[i / chunks][(i % chunks) * 8], q_rows + (i / chunks) * args.d_qk +
                      (i % chunks) * 8, true);
  }
  sm90::cp_async_commit();
  if (tid < kHeads) {
    s.row_max[tid] = -INFINITY;
    s.row_sum[tid] = 0.0f;
  }
  float o[16][4];
#pragma unroll
  for (int t = 0; t < 16; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;

  const int32_t* row_indices = args.indices + query * args.topk;
  for (int first = 0; first < args.topk; first += kSlots) {
    // 2.
    if (tid < kSlots) {
      const int slot = first + tid;
      const int32_t token = slot < args.topk ? row_indices[slot] : -1;
      s.valid[tid] = token >= 0 && token < args.s_kv ? token : -1;
    }
    __syncthreads();
    for (int i = tid; i < kSlots * chunks; i += kThreads) {
      const int slot = i / chunks;
      const int32_t token = s.valid[slot];
      const __nv_bfloat16* source = args.kv + (token >= 0 ? int64_t{token} * args.d_qk : 0) +
                                    (i % chunks) * 8;
      sm90::cp_async_16(&s.kv[slot][(i % chunks) * 8], source, token >= 0);
    }
    sm90::cp_async_commit();
    sm90::cp_async_wait<0>();
    __syncthreads();

    // 3.
    float acc[2][4] = {};
    for (int k0 = 0; k0 < args.d_qk; k0 += 16) {
      const uint32_t a[4] = {pair_at(&s.q[r][k0 + c2]), pair_at(&s.q[r + 8][k0 + c2]),
                             pair_at(&s.q[r][k0 + 8 + c2]), pair_at(&s.q[r + 8][k0 + 8 + c2])};
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int n = warp * 16 + t * 8 + r;
        sm80::mma_bf16(acc[t], a, pair_at(&s.kv[n][k0 + c2]), pair_at(&s.kv[n][k0 + 8 + c2]));
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int col = warp * 16 + t * 8 + c2;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r + (e / 2) * 8;
        const int slot = col + e % 2;
        s.s[row][slot] = s.valid[slot] >= 0 ? acc[t][e] * args.scale2 : -INFINITY;
      }
    }
    __syncthreads();

    // 4. Eight threads per head row, eight slots each.
    {
      const int row = tid / 8;
      const int part = tid % 8;
      float local_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < 8; ++i) local_max = fmaxf(local_max, s.s[row][part * 8 + i]);
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2) {
        local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, offset));
      }
      const float old_max = s.row_max[row];
      const float new_max = fmaxf(old_max, local_max);
      const float factor = new_max == -INFINITY ? 1.0f : exp2f(old_max - new_max);
      float local_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float logit = s.s[row][part * 8 + i];
        const float p = new_max == -INFINITY ? 0.0f : exp2f(logit - new_max);
        local_sum += p;
        s.p[row][part * 8 + i] = __float2bfloat16_rn(p);
      }
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2) {
        local_sum += __shfl_xor_sync(0xffffffffu, local_sum, offset);
      }
      __syncwarp();
      if (part == 0) {
        s.row_max[row] = new_max;
        s.row_sum[row] = s.row_sum[row] * factor + local_sum;
        s.row_factor[row] = factor;
      }
    }
    __syncthreads();

    // 5.
    const float factor0 = s.row_factor[r];
    const float factor1 = s.row_factor[r + 8];
#pragma unroll
    for (int t = 0; t < 16; ++t) {
      o[t][0] *= factor0;
      o[t][1] *= factor0;
      o[t][2] *= factor1;
      o[t][3] *= factor1;
    }
#pragma unroll
    for (int k0 = 0; k0 < kSlots; k0 += 16) {
      const uint32_t a[4] = {pair_at(&s.p[r][k0 + c2]), pair_at(&s.p[r + 8][k0 + c2]),
                             pair_at(&s.p[r][k0 + 8 + c2]), pair_at(&s.p[r + 8][k0 + 8 + c2])};
#pragma unroll
      for (int t = 0; t < 16; ++t) {
        const int n = warp * 128 + t * 8 + r;
        const uint32_t b0 = pack(s.kv[k0 + c2][n], s.kv[k0 + c2 + 1][n]);
        const uint32_t b1 = pack(s.kv[k0 + 8 + c2][n], s.kv[k0 + 9 + c2][n]);
        sm80::mma_bf16(o[t], a, b0, b1);
      }
    }
    __syncthreads();  // the next tile overwrites kv, s and p
  }

  // 6.
  const float sum0 = s.row_sum[r];
  const float sum1 = s.row_sum[r + 8];
  const float inv0 = sum0 > 0.0f ? 1.0f / sum0 : 0.0f;
  const float inv1 = sum1 > 0.0f ? 1.0f / sum1 : 0.0f;
  __nv_bfloat16* out_rows = args.out + (query * args.h_q + head0) * kDv;
#pragma unroll
  for (int t = 0; t < 16; ++t) {
    const int col = warp * 128 + t * 8 + c2;
    *reinterpret_cast<__nv_bfloat162*>(&out_rows[r * kDv + col]) =
        __floats2bfloat162_rn(o[t][0] * inv0, o[t][1] * inv0);
    *reinterpret_cast<__nv_bfloat162*>(&out_rows[(r + 8) * kDv + col]) =
        __floats2bfloat162_rn(o[t][2] * inv1, o[t][3] * inv1);
  }
  if (tid < kHeads) {
    const int64_t at = query * args.h_q + head0 + tid;
    const float m = s.row_max[tid];
    const float l = s.row_sum[tid];
    if (args.max_logits != nullptr) args.max_logits[at] = m;
    if (args.lse != nullptr) args.lse[at] = l > 0.0f ? m + log2f(l) : -INFINITY;
  }
}

}  // namespace

Status launch_sparse_attention_plain(const SparseAttentionArgs& args, cudaStream_t stream) {
  const int smem = static_cast<int>(sizeof(Shared));
  if (Status s = cuda_common::allow_dynamic_shared_memory(
          reinterpret_cast<const void*>(sparse_attention_kernel), smem);
      !s) {
    return s;
  }
  const int64_t blocks = args.s_q * (args.h_q / kHeads);
  if (blocks > 0x7fffffff) {
    return Status(StatusCode::kUnsupported,
                  "sparse_attention: s_q * h_q / 16 must be < 2^31 (one block per 16 heads)");
  }
  sparse_attention_kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(args);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_attention
