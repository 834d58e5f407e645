// Stand-ins for the CUDA backend in a build without CUDA: every GPU call says so.
#include "api/select_backend.h"
#include "api/decode_backend.h"
#include "api/indexer_backend.h"
#include "api/paged_indexer_backend.h"
#include "api/sparse_attention_backend.h"
#include "litetopk/device.h"

namespace litetopk::detail {

namespace {
Status not_compiled() {
  return Status(StatusCode::kNotCompiled,
                "this litetopk build has no CUDA backend (configure with LITETOPK_ENABLE_CUDA=ON)");
}
}  // namespace

Status cuda_select_plan(const SelectProblem&, SelectAlgo, SelectPlan*) { return not_compiled(); }
Status cuda_select_launch(const SelectPlan&, const SelectProblem&, void*, cudaStream_t) {
  return not_compiled();
}
Status cuda_validate_select_ranges(const SelectProblem&, cudaStream_t) { return not_compiled(); }
SelectAlgo cuda_select_dispatch(const SelectProblem&) { return SelectAlgo::kRadix; }

}  // namespace litetopk::detail

namespace litetopk {

Status query_device(DeviceInfo* info) {
  *info = DeviceInfo{};
  return Status(StatusCode::kNotCompiled, "this litetopk build has no CUDA backend");
}

}  // namespace litetopk

namespace litetopk::detail {

Status cuda_indexer_workspace_size(const IndexerProblem&, IndexerAlgo, const IndexerOptions&,
                                   std::size_t*) {
  return not_compiled();
}
Status cuda_indexer_topk(const IndexerProblem&, IndexerAlgo, const IndexerOptions&, void*,
                         std::size_t, cudaStream_t) {
  return not_compiled();
}
Status cuda_indexer_logits(const IndexerProblem&, float*, int64_t, cudaStream_t) {
  return not_compiled();
}
Status cuda_paged_indexer_workspace_size(const PagedIndexerProblem&, IndexerAlgo, std::size_t*) {
  return not_compiled();
}
Status cuda_paged_indexer_topk(const PagedIndexerProblem&, IndexerAlgo, void*, cudaStream_t) {
  return not_compiled();
}
Status cuda_paged_fused_fits(const PagedIndexerProblem&, bool*) { return not_compiled(); }
Status cuda_paged_decode_workspace_size(const PagedIndexerProblem&, std::size_t*) {
  return not_compiled();
}
Status cuda_paged_decode_topk(const PagedIndexerProblem&, void*, void*, cudaStream_t) {
  return not_compiled();
}
Status cuda_paged_indexer_logits(const PagedIndexerProblem&, float*, int64_t, cudaStream_t) {
  return not_compiled();
}
Status cuda_sparse_attention(const SparseAttentionProblem&, const SparseAttentionPlan&,
                             void*, cudaStream_t) {
  return not_compiled();
}
Status cuda_memset_async(void*, std::size_t bytes, cudaStream_t) {
  return bytes == 0 ? Status::ok() : not_compiled();
}

}  // namespace litetopk::detail

namespace litetopk::detail {

Status cuda_sparse_kv_append(const SparseKvCache&, const void*, const void*, cudaStream_t) {
  return not_compiled();
}
Status cuda_sparse_kv_from_dense(const DenseKvCache&, const SparseKvCache&, cudaStream_t) {
  return not_compiled();
}
std::size_t cuda_sparse_decode_workspace_size(const SparseDecodeProblem&, const DecodeOptions&) {
  return 0;
}
Status cuda_sparse_decode(const SparseDecodeProblem&, void*, cudaStream_t, const DecodeOptions&) {
  return not_compiled();
}
std::size_t cuda_dense_decode_workspace_size(const DenseDecodeProblem&, const DecodeOptions&) {
  return 0;
}
Status cuda_dense_decode(const DenseDecodeProblem&, void*, cudaStream_t, const DecodeOptions&) {
  return not_compiled();
}

}  // namespace litetopk::detail
