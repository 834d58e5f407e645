// sparse_kv_from_dense on the GPU: builds the sparse cache from tokens [0, dense.lengths[b]).
// The lengths live on the device, so the grid covers every block the dense capacity can hold, one
// task per (sequence b, KV head h, block j) (grid-stride over the tasks), and a task beyond the
// sequence's length exits:
//   1. len = dense.lengths[b]; task (b, 0, 0) stores it into cache.lengths[b] (the only write to
//      lengths; when both pointers are the same array it stores the value already there).
//   2. Values: the block's tokens (< len) to its value slot (copy_rows: 8 loads in flight).
//   3. A full block (j < len / BS): quantize its keys straight from the dense rows into its slot.
//      The open block: its keys (tokens nf*BS .. len-1) to the tail rows.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "api/sparse_decode_validation.h"
#include "formats/sparse_kv_format.h"
#include "cuda/common/cuda_check.h"
#include "cuda/decode/quantize_block.cuh"
#include "cuda/decode/sparse_kv_writers.h"

namespace litetopk::cuda_kv {
namespace {

constexpr int kThreads = 256;

template <bool kBf16, int kBlockSize>
__global__ void __launch_bounds__(kThreads)
    from_dense_kernel(DenseKvCache dense, detail::DenseStrides strides, SparseKvCache cache,
                      int64_t blocks_per_sequence) {
  __shared__ QuantizeSmem<kThreads> smem;
  const int64_t tasks = cache.batch * cache.num_kv_heads * blocks_per_sequence;
  // Element strides in 16-byte vectors (validation made them multiples of 8 elements).
  const int64_t token_vectors = strides.token / kChannelsPerVector;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t j = task % blocks_per_sequence, sequence_head = task / blocks_per_sequence;
    const int64_t h = sequence_head % cache.num_kv_heads, b = sequence_head / cache.num_kv_heads;
    const int64_t len = dense.lengths[b];
    if (j == 0 && h == 0 && threadIdx.x == 0) cache.lengths[b] = static_cast<int32_t>(len);
    const int64_t first = j * kBlockSize;
    if (first >= len) continue;
    const int count = static_cast<int>(std::min<int64_t>(kBlockSize, len - first));
    const int64_t slot =
        sparse_kv::slot_index(cache.block_table, cache.num_kv_heads, cache.max_blocks, b, h, j);
    const int64_t source = (b * strides.batch + h * strides.head + first * strides.token) /
                           kChannelsPerVector;
    const uint4* keys = static_cast<const uint4*>(dense.keys) + source;
    const uint4* values = static_cast<const uint4*>(dense.values) + source;

    copy_rows<kThreads>(static_cast<uint4*>(cache.values) + slot * kBlockSize * kRowVectors,
                        values, count, token_vectors);
    if (count == kBlockSize) {
      const auto row = [&](int t) { return keys + t * token_vectors; };
      quantize_block<kBf16, kBlockSize, kThreads>(
          row, cache.key_codes + slot * kBlockSize * kCodeBytesPerRow,
          static_cast<uint16_t*>(cache.key_scales) + slot * kHeadDim,
          cache.key_residuals + slot * kBlockSize * kHeadDim, smem);
    } else {
      copy_rows<kThreads>(
          static_cast<uint4*>(cache.tail_keys) + sequence_head * kBlockSize * kRowVectors, keys,
          count, token_vectors);
    }
  }
}

template <bool kBf16, int kBlockSize>
Status launch(const DenseKvCache& dense, const SparseKvCache& cache, cudaStream_t stream) {
  const int64_t blocks_per_sequence = std::max<int64_t>(
      1, (dense.capacity + kBlockSize - 1) / kBlockSize);  // 1: the lengths are still copied
  const int64_t tasks = cache.batch * cache.num_kv_heads * blocks_per_sequence;
  constexpr int64_t kMaxGrid = int64_t{1} << 30;
  from_dense_kernel<kBf16, kBlockSize>
      <<<static_cast<unsigned>(std::min(tasks, kMaxGrid)), kThreads, 0, stream>>>(
          dense, detail::dense_strides(dense), cache, blocks_per_sequence);
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace

Status launch_sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                                   cudaStream_t stream) {
  const bool bf16 = cache.dtype == DType::kBFloat16;
  if (cache.block_size == 128) {
    return bf16 ? launch<true, 128>(dense, cache, stream) : launch<false, 128>(dense, cache, stream);
  }
  return bf16 ? launch<true, 256>(dense, cache, stream) : launch<false, 256>(dense, cache, stream);
}

}  // namespace litetopk::cuda_kv
