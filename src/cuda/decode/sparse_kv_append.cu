// sparse_kv_append on the GPU: one new token per sequence and KV head. Every length is read on
// the device, so one captured graph serves every decoding step.
//
// Kernel 1, one CTA per (sequence b, KV head h), len = lengths[b] (a sequence at capacity exits):
//   1. Store the new key as tail row len % BS and the new value in block len / BS's value slot.
//   2. When the token fills the block, quantize it into that block's slot: rows 0..BS-2 from the
//      tail buffer, row BS-1 straight from the new key (nothing read back from this launch).
//   CTAs of 1024 threads when there are fewer (b, h) than SMs (the quantizing step's latency is
//   one CTA's), else 256 (more CTAs per SM for a large batch).
// Kernel 2, one thread per sequence: lengths[b] += 1 below capacity. A separate launch because
//   the KV heads of a sequence share lengths[b]: every CTA of kernel 1 has read the old value
//   once it starts (stream order), with no counter or grid-wide barrier.
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>

#include "formats/sparse_kv_format.h"
#include "cuda/common/cuda_check.h"
#include "cuda/decode/quantize_block.cuh"
#include "cuda/decode/sparse_kv_writers.h"
#include "cuda/common/device_shape.h"
#include "cuda/common/workspace_carver.h"

namespace litetopk::cuda_kv {
namespace {

template <bool kBf16, int kBlockSize, int kThreads>
__global__ void __launch_bounds__(kThreads)
    append_token_kernel(SparseKvCache cache, const uint4* __restrict__ new_keys,
                        const uint4* __restrict__ new_values) {
  __shared__ QuantizeSmem<kThreads> smem;
  const int64_t task = blockIdx.x;  // b * num_kv_heads + h
  const int64_t b = task / cache.num_kv_heads, h = task % cache.num_kv_heads;
  const int64_t len = cache.lengths[b];
  if (len >= cache.max_blocks * kBlockSize) return;
  const int64_t j = len / kBlockSize;
  const int i = static_cast<int>(len % kBlockSize);
  const int64_t slot =
      sparse_kv::slot_index(cache.block_table, cache.num_kv_heads, cache.max_blocks, b, h, j);
  const uint4* key = new_keys + task * kRowVectors;
  uint4* tail = static_cast<uint4*>(cache.tail_keys) + task * kBlockSize * kRowVectors;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kRowVectors) {
    tail[i * kRowVectors + tid] = key[tid];
  } else if (tid < 2 * kRowVectors) {
    static_cast<uint4*>(cache.values)[(slot * kBlockSize + i) * kRowVectors + tid - kRowVectors] =
        new_values[task * kRowVectors + tid - kRowVectors];
  }
  if (i + 1 < kBlockSize) return;
  const auto row = [&](int t) { return t + 1 < kBlockSize ? tail + t * kRowVectors : key; };
  quantize_block<kBf16, kBlockSize, kThreads>(row, cache.key_codes + slot * kBlockSize * kCodeBytesPerRow,
                                    static_cast<uint16_t*>(cache.key_scales) + slot * kHeadDim,
                                    cache.key_residuals + slot * kBlockSize * kHeadDim, smem);
}

__global__ void count_appended_kernel(int32_t* lengths, int64_t batch, int64_t capacity) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < batch && lengths[b] < capacity) lengths[b] += 1;
}

template <bool kBf16, int kBlockSize>
Status launch(const SparseKvCache& cache, const void* new_keys, const void* new_values,
              int sm_count, cudaStream_t stream) {
  const auto ctas = static_cast<unsigned>(cache.batch * cache.num_kv_heads);
  const auto* keys = static_cast<const uint4*>(new_keys);
  const auto* values = static_cast<const uint4*>(new_values);
  if (ctas < static_cast<unsigned>(sm_count)) {
    append_token_kernel<kBf16, kBlockSize, 1024><<<ctas, 1024, 0, stream>>>(cache, keys, values);
  } else {
    append_token_kernel<kBf16, kBlockSize, 256><<<ctas, 256, 0, stream>>>(cache, keys, values);
  }
  LITETOPK_CUDA_TRY(cudaGetLastError());
  constexpr int kThreads = 256;
  count_appended_kernel<<<static_cast<unsigned>((cache.batch + kThreads - 1) / kThreads), kThreads,
                          0, stream>>>(cache.lengths, cache.batch,
                                       cache.max_blocks * cache.block_size);
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace

Status launch_sparse_kv_append(const SparseKvCache& cache, const void* new_keys,
                               const void* new_values, cudaStream_t stream) {
  if (cache.batch * cache.num_kv_heads > INT_MAX) {
    return Status(StatusCode::kUnsupported,
                  "sparse_kv_append: batch * num_kv_heads must be <= 2^31 - 1 (one CTA each)");
  }
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  const int sm_count = device.sm_count;
  const bool bf16 = cache.dtype == DType::kBFloat16;
  if (cache.block_size == 128) {
    return bf16 ? launch<true, 128>(cache, new_keys, new_values, sm_count, stream)
                : launch<false, 128>(cache, new_keys, new_values, sm_count, stream);
  }
  return bf16 ? launch<true, 256>(cache, new_keys, new_values, sm_count, stream)
              : launch<false, 256>(cache, new_keys, new_values, sm_count, stream);
}

}  // namespace litetopk::cuda_kv
