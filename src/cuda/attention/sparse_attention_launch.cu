// The CUDA backend of sparse_attention (api/sparse_attention_backend.h): the kernels' arguments
// from the problem and the plan, then per query, union packing then the union-packed kernel, or
// the plain kernel.
#include <cuda_bf16.h>

#include <cstdint>

#include "api/sparse_attention_backend.h"
#include "cuda/attention/attention_kernels.h"

namespace litetopk::detail {

Status cuda_sparse_attention(const SparseAttentionProblem& problem,
                             const SparseAttentionPlan& plan, void* workspace,
                             cudaStream_t stream) {
  using namespace cuda_attention;
  if (problem.s_q == 0) return Status::ok();
  SparseAttentionArgs args{};
  args.q = static_cast<const __nv_bfloat16*>(problem.q);
  args.kv = static_cast<const __nv_bfloat16*>(problem.kv);
  args.indices = problem.indices;
  args.s_q = problem.s_q;
  args.s_kv = static_cast<int32_t>(problem.s_kv);
  args.h_q = static_cast<int32_t>(problem.h_q);
  args.d_qk = static_cast<int32_t>(problem.d_qk);
  args.topk = static_cast<int32_t>(problem.topk);
  args.scale2 = problem.sm_scale * 1.4426950408889634f;  // log2(e)
  args.out = static_cast<__nv_bfloat16*>(problem.out);
  args.max_logits = problem.max_logits;
  args.lse = problem.lse;
  args.group = plan.group;
  switch (plan.algo) {
    case SparseAttentionAlgo::kPlain: return launch_sparse_attention_plain(args, stream);
    case SparseAttentionAlgo::kUnionPacked: {
      auto* base = static_cast<unsigned char*>(workspace);
      auto* slots = reinterpret_cast<int32_t*>(base);
      auto* counts = reinterpret_cast<int32_t*>(base + plan.counts_offset);
      if (Status s = launch_union_packing(args, slots, counts, stream); !s) return s;
      args.union_slots = slots;
      args.union_counts = counts;
      return launch_sparse_attention_sm90(args, stream);
    }
    default: return launch_sparse_attention_sm90(args, stream);
  }
}

}  // namespace litetopk::detail
