// The sparse attention kernels' arguments and launchers (src/cuda/attention), as the backend
// (sparse_attention_launch.cu) calls them. Problems are validated before.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "heuristics/attention_plan.h"
#include "litetopk/status.h"

namespace litetopk::cuda_attention {

// A union slot word (union_packing.cu): token << kUnionTokenShift | the bits of the packed
// queries that selected the token (bit g: query g of the group). Tokens below 2^27.
constexpr int kUnionTokenShift = 4;
constexpr uint32_t kUnionBitsMask = (1u << kUnionTokenShift) - 1;
using heuristics::kUnionMaxSlots;   // G * topk: one block builds a group's union
using heuristics::kUnionMaxTokens;  // s_kv: a token beside its bits in a slot word

struct SparseAttentionArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* kv;
  const int32_t* indices;
  int64_t s_q;
  int32_t s_kv;
  int32_t h_q;
  int32_t d_qk;
  int32_t topk;
  float scale2;  // sm_scale * log2(e)
  __nv_bfloat16* out;
  float* max_logits;
  float* lse;
  // Union packing: G queries per group (1: every block runs per query); the groups' slot words
  // [groups][G * topk] and union sizes [groups] (-1: the group runs per query).
  int32_t group;
  const int32_t* union_slots;
  const int32_t* union_counts;
};

// The queries of the union group starting at query0: G, fewer for the chunk's last group.
__device__ __forceinline__ int union_group_queries(const SparseAttentionArgs& args,
                                                   int64_t query0) {
  const int64_t left = args.s_q - query0;
  return left < args.group ? static_cast<int>(left) : args.group;
}

// The Hopper kernel (sparse_attention_sm90.cu): per query when args.group is 1, else union-packed
// over the unions union_packing built.
Status launch_sparse_attention_sm90(const SparseAttentionArgs& args, cudaStream_t stream);

// Builds every group's union (sorted, each token once with its query bits) into
// args.union_slots / union_counts; a group in which a query lists a token twice gets count -1
// (it runs per query: a repeated token counts twice, which one union slot cannot express), and so
// does a pair of queries (h_q 32) sharing too few tokens for packing to pay.
// Needs args.group * args.topk <= kUnionMaxSlots and s_kv <= kUnionMaxTokens.
Status launch_union_packing(const SparseAttentionArgs& args, int32_t* union_slots,
                            int32_t* union_counts, cudaStream_t stream);

// The plain kernel (sparse_attention_kernel.cu: mma.sync, no pipelining), the GPU cross-check.
Status launch_sparse_attention_plain(const SparseAttentionArgs& args, cudaStream_t stream);

}  // namespace litetopk::cuda_attention
