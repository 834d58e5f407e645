// Public GPU entry points of sparse_attention: validation, the (empty) workspace, launch.
#include <cstddef>

#include "api/format.h"
#include "api/sparse_attention_backend.h"
#include "api/workspace.h"
#include "litetopk/attention.h"

namespace litetopk {

Status sparse_attention_workspace_size(const SparseAttentionProblem& problem,
                                       std::size_t* workspace_bytes) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  return validate_sparse_attention_problem(problem);
}

Status sparse_attention(const SparseAttentionProblem& problem, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  if (Status s = detail::check_workspace(0, workspace, workspace_bytes); !s) return s;
  return detail::cuda_sparse_attention(problem, stream);
}

}  // namespace litetopk
