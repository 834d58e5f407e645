// The paged decode indexer's gated path (a decode state given, algo fused): the workspace layout,
// the three launches and their grids. Planned from max_context and k, never from the device
// lengths, so one captured graph serves every step; the state is read by the first launch and
// rewritten by the last.
// 1. decode_bound_kernel: the previous top-k re-scored, per-block minima and counts (a plain
//    launch: it reads the state the previous step wrote).
// 2. decode_gated_kernel: the scores, gated at each row's bound, into candidate buffers (PDL).
// 3. decode_select_kernel: the exact top-k of the candidates, indices, values and state (PDL).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/indexer/decode_state_kernels.h"

namespace litetopk::cuda_indexer {
namespace {

constexpr int64_t kMaxGatherTiles = 8;  // decode_bound_kernel's next_n * bound_tiles (its stages)

// The bound kernel's split of a row's k history slots: about four blocks per SM over the batch
// (its blocks are short and latency-bound: many in flight).
void bound_split(const PagedIndexerProblem& problem, int sms, int32_t* splits, int32_t* tiles) {
  const int64_t history_tiles = (problem.k + paged::kTileKeys - 1) / paged::kTileKeys;
  const int64_t most_tiles = std::max<int64_t>(1, kMaxGatherTiles / problem.next_n);
  const int64_t wanted = std::clamp<int64_t>(4 * sms / std::max<int64_t>(problem.batch, 1), 1,
                                             history_tiles);
  const int64_t per_block =
      std::min<int64_t>(most_tiles, (history_tiles + wanted - 1) / wanted);
  *tiles = static_cast<int32_t>(per_block);
  *splits = static_cast<int32_t>((history_tiles + per_block - 1) / per_block);
}

// The gated kernel's grid: one wave of resident blocks over the batch, as the logits kernel's.
Status gated_splits(const PagedIndexerProblem& problem, int64_t* splits) {
  int wave = 0;
  if (Status s = decode_gated_resident_blocks(problem, &wave); !s) return s;
  *splits = std::clamp<int64_t>(wave / problem.batch, 1, paged_max_tiles(problem));
  return Status::ok();
}

Status lay_out(const PagedIndexerProblem& problem, int sms, void* base, DecodeBuffers* buffers,
               std::size_t* bytes) {
  cuda_common::WorkspaceCarver carver(base);
  const auto rows = static_cast<std::size_t>(problem.batch * problem.next_n);
  bound_split(problem, sms, &buffers->bound_splits, &buffers->bound_tiles);
  int64_t splits = 0;
  if (Status s = gated_splits(problem, &splits); !s) return s;
  const int64_t tiles = paged_max_tiles(problem);
  buffers->splits = static_cast<int32_t>(splits);
  buffers->span = static_cast<int32_t>((tiles + splits - 1) / splits * paged::kTileKeys);
  const std::size_t partials = rows * static_cast<std::size_t>(buffers->bound_splits);
  const std::size_t candidates =
      rows * static_cast<std::size_t>(splits) * static_cast<std::size_t>(buffers->span);
  buffers->partial_keys = carver.take<uint32_t>(partials);
  buffers->partial_counts = carver.take<uint32_t>(partials);
  buffers->counts = carver.take<uint32_t>(rows * static_cast<std::size_t>(splits));
  buffers->candidate_scores = carver.take<float>(candidates);
  buffers->candidate_positions = carver.take<int32_t>(candidates);
  *bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

}  // namespace litetopk::cuda_indexer

namespace litetopk::detail {

Status cuda_paged_decode_workspace_size(const PagedIndexerProblem& problem,
                                        std::size_t* workspace_bytes) {
  int sms = 0;
  if (Status s = cuda_indexer::paged_sm_count(&sms); !s) return s;
  cuda_indexer::DecodeBuffers buffers;
  return cuda_indexer::lay_out(problem, sms, nullptr, &buffers, workspace_bytes);
}

Status cuda_paged_decode_topk(const PagedIndexerProblem& problem, void* state, void* workspace,
                              cudaStream_t stream) {
  int sms = 0;
  if (Status s = cuda_indexer::paged_sm_count(&sms); !s) return s;
  cuda_indexer::DecodeBuffers buffers;
  std::size_t bytes = 0;
  if (Status s = cuda_indexer::lay_out(problem, sms, workspace, &buffers, &bytes); !s) return s;
  buffers.previous = static_cast<const int32_t*>(state);
  buffers.next = static_cast<int32_t*>(state);
  cuda_indexer::PagedLaunch launch;
  if (Status s = cuda_indexer::prepare_paged_launch(problem, buffers.splits, &launch); !s) {
    return s;
  }
  if (Status s = cuda_indexer::launch_decode_bound(launch, problem, buffers, stream); !s) {
    return s;
  }
  if (Status s = cuda_indexer::launch_decode_gated(launch, problem, buffers, stream); !s) return s;
  return cuda_indexer::launch_decode_select(problem, buffers, stream);
}

}  // namespace litetopk::detail
