// The CUDA backend of indexer_topk_paged and indexer_logits_paged: launch plans, workspace layout
// and dispatch. The unfused path: paged_logits_kernel writes [rows, max_context] fp32 and each
// row's visible count into the workspace, then the selection runs over [0, count) of each row.
// The logits kernel balances its blocks over the batch from the device's context lengths; the
// fused path: paged_fused_kernel, its grid co-resident, when every block's share of the context
// fits in its shared memory. The host plans from sizes (batch, max_context) only.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "api/format.h"
#include "api/paged_indexer_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_shape.h"
#include "cuda/common/tensor_map_sm90.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/indexer/paged_indexer_kernels.h"
#include "cuda/select/select_kernels.h"
#include "litetopk/select.h"

namespace litetopk::cuda_indexer {

Status prepare_paged_launch(const PagedIndexerProblem& problem, int64_t splits,
                            PagedLaunch* launch) {
  const int columns = paged_columns(problem);
  const auto q_rows = static_cast<uint64_t>(problem.batch * problem.next_n * problem.num_heads);
  if (Status s = detail::make_row_tile_map(problem.q, q_rows,
                                           static_cast<uint32_t>(columns),
                                           &launch->q_map);
      !s) {
    return s;
  }
  // Without cache blocks no tile is ever loaded (every entry is outside the cache): the map only
  // needs a valid address.
  const bool has_blocks = problem.num_blocks > 0 && problem.kv_cache != nullptr;
  if (Status s = detail::make_paged_block_map(
          has_blocks ? problem.kv_cache : problem.q,
          static_cast<uint64_t>(has_blocks ? problem.num_blocks : 1),
          static_cast<uint64_t>(paged::kBlockBytes), &launch->kv_map);
      !s) {
    return s;
  }
  const int64_t tiles = paged_max_tiles(problem);
  launch->args = {static_cast<const uint8_t*>(problem.kv_cache),
                  problem.weights,
                  problem.context_lens,
                  problem.block_table,
                  static_cast<int32_t>(problem.next_n),
                  static_cast<int32_t>(problem.max_blocks),
                  static_cast<int32_t>(problem.num_blocks),
                  static_cast<int32_t>(problem.max_context),
                  static_cast<int32_t>(splits > 0 ? (tiles + splits - 1) / splits : 0)};
  launch->splits = static_cast<unsigned>(splits);
  launch->batch = static_cast<unsigned>(problem.batch);
  launch->heads = static_cast<int>(problem.num_heads);
  launch->columns = columns;
  return Status::ok();
}

Status paged_sm_count(int* sms) {
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  *sms = device.sm_count;
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer

namespace litetopk::detail {
namespace {

using cuda_indexer::paged_max_tiles;

// Fused: a grid of one block an SM, every block resident at once, the batch's tiles balanced
// over it on the device, each block holding at most next_n * ceil(max tiles / splits) * 64 scores
// (splits = SMs / batch). 0 when the problem does not fit.
Status fused_splits(const PagedIndexerProblem& problem, int sms, int64_t* splits) {
  *splits = 0;
  const int64_t tiles = paged_max_tiles(problem);
  if (tiles == 0 || problem.batch == 0 || problem.batch > sms) return Status::ok();
  const int64_t candidate = std::clamp<int64_t>(sms / problem.batch, 1, tiles);
  const int64_t per_split = (tiles + candidate - 1) / candidate;
  const int64_t capacity = cuda_indexer::paged_fused_score_capacity(
      static_cast<int>(problem.num_heads), cuda_indexer::paged_columns(problem));
  if (problem.next_n * per_split * cuda_indexer::paged::kTileKeys > capacity) return Status::ok();
  bool fits = false;
  if (Status s = cuda_indexer::paged_fused_fits(problem, sms, &fits); !s) {
    return s;
  }
  if (fits) *splits = candidate;
  return Status::ok();
}

SelectProblem row_selection(const PagedIndexerProblem& problem, const float* logits,
                            const int32_t* row_ends) {
  SelectProblem select;
  select.scores = logits;
  select.dtype = DType::kFloat32;
  select.batch = problem.batch * problem.next_n;
  select.n = problem.max_context;
  select.row_stride = problem.max_context;
  select.row_ends = row_ends;
  select.k = problem.k;
  select.indices = problem.indices;
  select.values = problem.values;
  return select;
}

// The unfused path's workspace (only sized when base is null).
struct UnfusedLayout {
  float* logits = nullptr;
  int32_t* row_ends = nullptr;
  void* select_workspace = nullptr;
  std::size_t bytes = 0;
};

Status lay_out_unfused(const PagedIndexerProblem& problem, void* base, UnfusedLayout* layout) {
  cuda_common::WorkspaceCarver carver(base);
  const auto rows = static_cast<std::size_t>(problem.batch * problem.next_n);
  layout->logits = carver.take<float>(rows * static_cast<std::size_t>(problem.max_context));
  layout->row_ends = carver.take<int32_t>(rows);
  std::size_t select_bytes = 0;
  if (problem.max_context > 0) {
    if (Status s = cuda_select::select_workspace_size(row_selection(problem, nullptr, nullptr),
                                                      &select_bytes);
        !s) {
      return s;
    }
  }
  layout->select_workspace = carver.take<unsigned char>(select_bytes);
  layout->bytes = carver.bytes();
  return Status::ok();
}

// Rows with no visible token at all: every slot -1 (values NaN).
Status fill_empty(const PagedIndexerProblem& problem, cudaStream_t stream) {
  const auto slots = static_cast<std::size_t>(problem.batch * problem.next_n * problem.k);
  LITETOPK_CUDA_TRY(cudaMemsetAsync(problem.indices, 0xff, slots * sizeof(int32_t), stream));
  if (problem.values != nullptr) {
    LITETOPK_CUDA_TRY(cudaMemsetAsync(problem.values, 0xff, slots * sizeof(float), stream));
  }
  return Status::ok();
}

}  // namespace

Status cuda_paged_indexer_workspace_size(const PagedIndexerProblem& problem, IndexerAlgo algo,
                                         std::size_t* workspace_bytes) {
  if (algo == IndexerAlgo::kFused) {
    *workspace_bytes = cuda_indexer::paged_fused_workspace_bytes(problem);
    return Status::ok();
  }
  UnfusedLayout layout;
  if (Status s = lay_out_unfused(problem, nullptr, &layout); !s) return s;
  *workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_paged_fused_fits(const PagedIndexerProblem& problem, bool* fits) {
  *fits = false;
  if (paged_max_tiles(problem) == 0) {
    *fits = true;  // nothing to score: either path only writes the padding
    return Status::ok();
  }
  int sms = 0;
  if (Status s = cuda_indexer::paged_sm_count(&sms); !s) return s;
  int64_t splits = 0;
  if (Status s = fused_splits(problem, sms, &splits); !s) return s;
  *fits = splits > 0;
  return Status::ok();
}

Status cuda_paged_indexer_topk(const PagedIndexerProblem& problem, IndexerAlgo algo,
                               void* workspace, cudaStream_t stream) {
  if (paged_max_tiles(problem) == 0) return fill_empty(problem, stream);
  cuda_indexer::PagedLaunch launch;
  if (algo == IndexerAlgo::kFused) {
    int sms = 0;
    if (Status s = cuda_indexer::paged_sm_count(&sms); !s) return s;
    int64_t splits = 0;
    if (Status s = fused_splits(problem, sms, &splits); !s) return s;
    if (splits == 0) {
      return Status(StatusCode::kUnsupported,
                    concat("the fused paged indexer needs batch <= SMs (", sms,
                           ") and next_n * ceil(max_context / 64 / splits) * 64 scores per block "
                           "within its shared memory; batch ", problem.batch, ", next_n ",
                           problem.next_n, ", max_context ", problem.max_context,
                           ": use algo unfused (or auto)"));
    }
    if (Status s = cuda_indexer::prepare_paged_launch(problem, splits, &launch); !s) return s;
    return cuda_indexer::launch_paged_fused(launch, problem, sms, workspace, stream);
  }
  UnfusedLayout layout;
  if (Status s = lay_out_unfused(problem, workspace, &layout); !s) return s;
  if (Status s = cuda_indexer::prepare_paged_launch(problem, 1, &launch); !s) return s;
  if (Status s = cuda_indexer::launch_paged_logits(launch, layout.logits, problem.max_context,
                                                   /*fill_unseen=*/false, layout.row_ends, stream);
      !s) {
    return s;
  }
  return cuda_select::select_rows(row_selection(problem, layout.logits, layout.row_ends),
                                  layout.select_workspace, stream);
}

Status cuda_paged_indexer_logits(const PagedIndexerProblem& problem, float* logits,
                                 int64_t logits_stride, cudaStream_t stream) {
  cuda_indexer::PagedLaunch launch;
  if (Status s = cuda_indexer::prepare_paged_launch(problem, 1, &launch); !s) return s;
  return cuda_indexer::launch_paged_logits(launch, logits, logits_stride, /*fill_unseen=*/true,
                                           nullptr, stream);
}

}  // namespace litetopk::detail
