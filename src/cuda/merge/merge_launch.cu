// The CUDA backend of merge_topk: the workspace (select's sort workspace, for sorted output), the
// merge kernel, then select's sort of the selected composites for sorted output.
#include <cuda_runtime_api.h>

#include "api/merge_backend.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/merge/merge_kernels.h"
#include "cuda/select/select_kernels.h"

namespace litetopk::detail {
namespace {

// The merge's output as a select_topk problem: what select's sort reads and writes.
SelectProblem output_problem(const MergeProblem& p) {
  SelectProblem out;
  out.dtype = DType::kFloat32;
  out.batch = p.batch;
  out.k = p.k;
  out.largest = p.largest;
  out.sorted = p.sorted;
  out.indices = p.out_indices;
  out.values = p.out_values;
  return out;
}

// Carves the workspace of one launch into *sort (only counts bytes when base is null).
Status lay_out(const MergeProblem& p, void* base, cuda_select::SortWorkspace* sort,
               std::size_t* bytes) {
  cuda_common::WorkspaceCarver carver(base);
  *sort = cuda_select::SortWorkspace{};
  if (p.sorted) {
    if (Status status = cuda_select::carve_sort(carver, output_problem(p), sort); !status) {
      return status;
    }
  }
  *bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

Status cuda_merge_workspace_size(const MergeProblem& problem, std::size_t* workspace_bytes) {
  cuda_select::SortWorkspace sort{};
  return lay_out(problem, nullptr, &sort, workspace_bytes);
}

Status cuda_merge_launch(const MergeProblem& p, void* workspace, cudaStream_t stream) {
  cuda_select::SortWorkspace sort{};
  std::size_t bytes = 0;
  if (Status status = lay_out(p, workspace, &sort, &bytes); !status) return status;
  const cuda_merge::MergeLists lists{p.values,     p.indices,    p.counts,  p.shards,
                                     p.k_in,       p.row_stride, p.shard_stride, p.largest};
  cuda_select::SelectArgs out{};
  out.k = static_cast<int32_t>(p.k);
  out.largest = p.largest;
  out.indices = p.out_indices;
  out.values = p.out_values;
  out.out_composites = p.sorted ? sort.composites : nullptr;
  if (Status launched = cuda_merge::launch_merge_rows(lists, out, p.batch, stream); !launched) {
    return launched;
  }
  if (!p.sorted) return Status::ok();
  return cuda_select::launch_sort_selected(output_problem(p), sort, stream);
}

}  // namespace litetopk::detail
