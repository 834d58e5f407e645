// Stand-ins for the CUDA retrieval backend in a build without CUDA: every GPU call says so.
#include "api/retrieval_backend.h"

namespace litetopk::detail {

namespace {
Status retrieval_not_compiled() {
  return Status(StatusCode::kNotCompiled,
                "this litetopk build has no CUDA backend (configure with LITETOPK_ENABLE_CUDA=ON)");
}
}  // namespace

Status cuda_retrieval_plan(RetrievalPath, RetrievalPlan*) { return retrieval_not_compiled(); }
Status cuda_retrieval_launch(const RetrievalPlan&, const RetrievalProblem&, void*, cudaStream_t) {
  return retrieval_not_compiled();
}
Status cuda_retrieval_corpus_norms(const RetrievalProblem&, float*, cudaStream_t) {
  return retrieval_not_compiled();
}

}  // namespace litetopk::detail
