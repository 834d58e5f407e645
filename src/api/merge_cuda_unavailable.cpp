// Stand-ins for the CUDA merge backend in a build without CUDA: every GPU call says so.
#include "api/merge_backend.h"

namespace litetopk::detail {

namespace {
Status merge_not_compiled() {
  return Status(StatusCode::kNotCompiled,
                "this litetopk build has no CUDA backend (configure with LITETOPK_ENABLE_CUDA=ON)");
}
}  // namespace

Status cuda_merge_workspace_size(const MergeProblem&, std::size_t*) {
  return merge_not_compiled();
}
Status cuda_merge_launch(const MergeProblem&, void*, cudaStream_t) { return merge_not_compiled(); }

}  // namespace litetopk::detail
