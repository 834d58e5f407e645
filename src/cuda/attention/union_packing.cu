// LiteDSA's union packing (launch_union_packing in attention_kernels.h): for each group of G
// neighbouring queries, the union of their selections as one slot list in token order, each token
// once with the bits of the queries that selected it, for the union-packed sparse attention
// kernel. Two kernels build the same lists: a bitmap over the tokens when s_kv is small enough
// for shared memory (kBitmapMaxTokens), else a block radix sort.
//
// Pipeline of union_bitmap_kernel (block = one group, 256 threads):
// 1. A 4-bit cell per token in shared memory, zeroed; each of the group's valid slots ors its
//    query's bit into its token's cell (a bit already set: a query lists the token twice).
// 2. Each warp counts the nonzero cells of its run of words (lane l: words l, l + 32, ...: no
//    bank conflicts); the warps' counts place the runs.
// 3. Each nonzero cell writes token << 4 | its bits, in token order (a warp scan places a lane's
//    cells after those of the lanes before it); the count is the union size, or -1 for a group
//    with a repeat or whose union is too large to pay (packing_pays): it runs per query.
//
// Pipeline of union_packing_kernel (block = one group, 256 threads):
// 1. The group's G x topk slots as keys token * 4 + query (a skipped slot: all ones, last).
// 2. Block radix sort of the keys (CUB), over the bits that 4 * s_kv needs.
// 3. A token's run of keys (at most G long) is one union slot: run heads counted and placed with
//    a block scan; a key equal to its predecessor (a query listing a token twice) marks the group.
// 4. Each run head writes token << 4 | its run's query bits; the count is the union size, or -1
//    for a marked group or one whose union is too large to pay (it runs per query).
#include <cuda_runtime_api.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"

namespace litetopk::cuda_attention {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = static_cast<int>(kUnionMaxSlots) / kThreads;
constexpr int kQueryBits = 2;  // G <= 4
constexpr uint32_t kSkipped = 0xffffffffu;
// The bitmap kernel's reach: 4 bits per token in at most 128 KB of shared memory.
constexpr int64_t kBitmapMaxTokens = int64_t{1} << 18;

using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems>;
using Scan = cub::BlockScan<int, kThreads>;

// Whether a group's union of `total` slots over its `queries` queries pays packed. Measured on
// the H200 (docs/BENCHMARKS.md, "Sparse attention beside FlashMLA"): at G = 4 (h_q 16) packing
// wins even when the queries share nothing (per query, 16 heads fill a quarter of the 64 MMA
// rows); at G = 2 (h_q 32) it loses 8% with nothing shared and wins at a union of 3/4 of the
// queries' slots, so a pair packs up to 27/32 of them. Else the group runs per query.
__device__ __forceinline__ bool packing_pays(int group, int queries, int topk, int total) {
  return group != 2 || 32 * int64_t{total} <= 27 * int64_t{queries} * topk;
}

__global__ void __launch_bounds__(kThreads)
    union_packing_kernel(const SparseAttentionArgs args, int32_t* union_slots,
                         int32_t* union_counts, int end_bit) {
  __shared__ union {
    typename Sort::TempStorage sort;
    uint32_t sorted[kUnionMaxSlots];
  } shared;
  __shared__ typename Scan::TempStorage scan;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t group = blockIdx.x;
  const int64_t query0 = group * args.group;
  const int n = union_group_queries(args, query0) * args.topk;

  // 1.
  uint32_t keys[kItems];
  const int32_t* indices = args.indices + query0 * args.topk;
#pragma unroll
  for (int item = 0; item < kItems; ++item) {
    const int i = item * kThreads + tid;
    keys[item] = kSkipped;
    if (i < n) {
      const int32_t token = indices[i];
      if (token >= 0 && token < args.s_kv) {
        keys[item] = (static_cast<uint32_t>(token) << kQueryBits) |
                     static_cast<uint32_t>(i / args.topk);
      }
    }
  }

  // 2.
  Sort(shared.sort).Sort(keys, 0, end_bit);
  __syncthreads();
#pragma unroll
  for (int item = 0; item < kItems; ++item) shared.sorted[tid * kItems + item] = keys[item];
  __syncthreads();

  // 3.
  int heads = 0;
  bool repeated = false;
#pragma unroll
  for (int item = 0; item < kItems; ++item) {
    const int at = tid * kItems + item;
    const uint32_t key = keys[item];
    if (key == kSkipped) continue;
    const uint32_t previous = at > 0 ? shared.sorted[at - 1] : kSkipped;
    repeated |= previous == key;
    heads += (previous >> kQueryBits) != (key >> kQueryBits) ? 1 : 0;
  }
  int offset = 0;
  int total = 0;
  Scan(scan).ExclusiveSum(heads, offset, total);
  // A repeat, or a union too large to pay: the group runs per query.
  const bool per_query = __syncthreads_or(repeated) != 0 ||
                         !packing_pays(args.group, n / args.topk, args.topk, total);

  // 4.
  int32_t* slots = union_slots + group * args.group * args.topk;
  if (!per_query) {
#pragma unroll
    for (int item = 0; item < kItems; ++item) {
      const int at = tid * kItems + item;
      const uint32_t key = keys[item];
      if (key == kSkipped) continue;
      const uint32_t token = key >> kQueryBits;
      if (at > 0 && (shared.sorted[at - 1] >> kQueryBits) == token) continue;
      uint32_t bits = 0;
      for (int run = at; run < kUnionMaxSlots && (shared.sorted[run] >> kQueryBits) == token;
           ++run) {
        bits |= 1u << (shared.sorted[run] & ((1u << kQueryBits) - 1));
      }
      slots[offset++] = static_cast<int32_t>((token << kUnionTokenShift) | bits);
    }
  }
  if (tid == 0) union_counts[group] = per_query ? -1 : total;
}

// 1-3 of the bitmap pipeline; `words` 32-bit words of 8 cells cover s_kv tokens.
__global__ void __launch_bounds__(kThreads)
    union_bitmap_kernel(const SparseAttentionArgs args, int32_t* union_slots,
                        int32_t* union_counts, int words) {
  extern __shared__ uint32_t cells[];
  __shared__ int warp_counts[kWarps];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t group = blockIdx.x;
  const int64_t query0 = group * args.group;
  const int n = union_group_queries(args, query0) * args.topk;

  // 1.
  for (int i = tid; i < words; i += kThreads) cells[i] = 0;
  __syncthreads();
  const int32_t* indices = args.indices + query0 * args.topk;
  bool repeated = false;
  for (int i = tid; i < n; i += kThreads) {
    const int32_t token = indices[i];
    if (token < 0 || token >= args.s_kv) continue;
    const uint32_t bit = 1u << ((i / args.topk) + 4 * (token % 8));
    repeated |= (atomicOr(&cells[token / 8], bit) & bit) != 0;
  }
  repeated = __syncthreads_or(repeated) != 0;
  if (repeated) {
    if (tid == 0) union_counts[group] = -1;
    return;
  }

  // 2. Warp v scans a run of words 32 at a time (lane l: word base + l, no bank conflicts).
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int per_warp = (words + kWarps * 32 - 1) / (kWarps * 32) * 32;
  const int first = warp * per_warp;
  const int last = first + per_warp < words ? first + per_warp : words;
  auto nonzero_cells = [](uint32_t word) {
    return __popc((word | (word >> 1) | (word >> 2) | (word >> 3)) & 0x11111111u);
  };
  int nonzero = 0;
  for (int word = first + lane; word < last; word += 32) nonzero += nonzero_cells(cells[word]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    nonzero += __shfl_xor_sync(0xffffffffu, nonzero, offset);
  }
  if (lane == 0) warp_counts[warp] = nonzero;
  __syncthreads();
  int running = 0;
  int total = 0;
  for (int v = 0; v < kWarps; ++v) {
    running += v < warp ? warp_counts[v] : 0;
    total += warp_counts[v];
  }
  if (!packing_pays(args.group, n / args.topk, args.topk, total)) {
    if (tid == 0) union_counts[group] = -1;  // it runs per query
    return;
  }

  // 3. In token order: a lane's cells follow the cells of the lanes before it (a warp scan).
  int32_t* slots = union_slots + group * args.group * args.topk;
  for (int base = first; base < last; base += 32) {
    const int word = base + lane;
    uint32_t value = word < last ? cells[word] : 0u;
    const int count = nonzero_cells(value);
    int inclusive = count;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
    int at = running + inclusive - count;
    while (value != 0) {
      const int cell = (__ffs(static_cast<int>(value)) - 1) / 4;
      const uint32_t bits = (value >> (4 * cell)) & 0xfu;
      value &= ~(0xfu << (4 * cell));
      slots[at++] = ((word * 8 + cell) << kUnionTokenShift) | static_cast<int32_t>(bits);
    }
    running += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  if (tid == 0) union_counts[group] = total;
}

}  // namespace

Status launch_union_packing(const SparseAttentionArgs& args, int32_t* union_slots,
                            int32_t* union_counts, cudaStream_t stream) {
  const int64_t groups = (args.s_q + args.group - 1) / args.group;
  if (groups == 0) return Status::ok();
  if (args.s_kv <= kBitmapMaxTokens) {
    const int words = static_cast<int>((args.s_kv + 7) / 8);
    const int smem = std::max(words, 1) * 4;
    if (Status s = cuda_common::allow_dynamic_shared_memory(
            reinterpret_cast<const void*>(union_bitmap_kernel), smem);
        !s) {
      return s;
    }
    union_bitmap_kernel<<<static_cast<unsigned>(groups), kThreads, smem, stream>>>(
        args, union_slots, union_counts, words);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  }
  int end_bit = 1;
  const uint64_t largest_key = uint64_t{4} * static_cast<uint64_t>(args.s_kv);
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= largest_key) {
    ++end_bit;
  }
  union_packing_kernel<<<static_cast<unsigned>(groups), kThreads, 0, stream>>>(
      args, union_slots, union_counts, end_bit);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_attention
