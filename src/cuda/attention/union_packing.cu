// LiteDSA's union packing (launch_union_packing in attention_kernels.h): for each group of G
// neighbouring queries, the union of their selections as one slot list, each token once with the
// bits of the queries that selected it, for the union-packed sparse attention kernel.
//
// Pipeline of union_packing_kernel (block = one group, 256 threads):
// 1. The group's G x topk slots as keys token * 4 + query (a skipped slot: all ones, last).
// 2. Block radix sort of the keys (CUB), over the bits that 4 * s_kv needs.
// 3. A token's run of keys (at most G long) is one union slot: run heads counted and placed with
//    a block scan; a key equal to its predecessor (a query listing a token twice) marks the group.
// 4. Each run head writes token << 4 | its run's query bits; the count is the union size, or -1
//    for a marked group (it runs per query).
#include <cuda_runtime_api.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/common/cuda_check.h"

namespace litetopk::cuda_attention {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = static_cast<int>(kUnionMaxSlots) / kThreads;
constexpr int kQueryBits = 2;  // G <= 4
constexpr uint32_t kSkipped = 0xffffffffu;

using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems>;
using Scan = cub::BlockScan<int, kThreads>;

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
  const int64_t left = args.s_q - query0;
  const int queries = left < args.group ? static_cast<int>(left) : args.group;
  const int n = queries * args.topk;

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
  repeated = __syncthreads_or(repeated) != 0;

  // 4.
  int32_t* slots = union_slots + group * args.group * args.topk;
  if (!repeated) {
#pragma unroll
    for (int item = 0; item < kItems; ++item) {
      const int at = tid * kItems + item;
      const uint32_t key = keys[item];
      if (key == kSkipped) continue;
      const uint32_t token = key >> kQueryBits;
      if (at > 0 && (shared.sorted[at - 1] >> kQueryBits) == token) continue;
      uint32_t bits = 0;
      for (int run = at; run < kUnionMaxSlots && (shared.sorted[run] >> kQueryBits) == token; ++run) {
        bits |= 1u << (shared.sorted[run] & ((1u << kQueryBits) - 1));
      }
      slots[offset++] = static_cast<int32_t>((token << kUnionTokenShift) | bits);
    }
  }
  if (tid == 0) union_counts[group] = repeated ? -1 : total;
}

}  // namespace

Status launch_union_packing(const SparseAttentionArgs& args, int32_t* union_slots,
                            int32_t* union_counts, cudaStream_t stream) {
  const int64_t groups = (args.s_q + args.group - 1) / args.group;
  if (groups == 0) return Status::ok();
  int end_bit = 1;
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= uint64_t{4} * static_cast<uint64_t>(args.s_kv)) {
    ++end_bit;
  }
  union_packing_kernel<<<static_cast<unsigned>(groups), kThreads, 0, stream>>>(
      args, union_slots, union_counts, end_bit);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_attention
