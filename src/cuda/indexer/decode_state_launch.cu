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
#include "cuda/common/device_shape.h"
#include "cuda/common/tensor_map_sm90.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/indexer/decode_state_kernels.h"

namespace litetopk::cuda_indexer {
namespace {

constexpr int64_t kMaxGatherTiles = 16;  // decode_bound_kernel's next_n * bound_tiles

// The bound kernel's split of a row's k history slots: about two blocks per SM over the batch.
void bound_split(const PagedIndexerProblem& problem, int sms, int32_t* splits, int32_t* tiles) {
  const int64_t history_tiles = (problem.k + paged::kTileKeys - 1) / paged::kTileKeys;
  const int64_t most_tiles = std::max<int64_t>(1, kMaxGatherTiles / problem.next_n);
  const int64_t wanted = std::clamp<int64_t>(2 * sms / std::max<int64_t>(problem.batch, 1), 1,
                                             history_tiles);
  const int64_t per_block =
      std::min<int64_t>(most_tiles, (history_tiles + wanted - 1) / wanted);
  *tiles = static_cast<int32_t>(per_block);
  *splits = static_cast<int32_t>((history_tiles + per_block - 1) / per_block);
}

Status lay_out(const PagedIndexerProblem& problem, int sms, void* base, DecodeBuffers* buffers,
               std::size_t* bytes) {
  cuda_common::WorkspaceCarver carver(base);
  const auto rows = static_cast<std::size_t>(problem.batch * problem.next_n);
  bound_split(problem, sms, &buffers->bound_splits, &buffers->bound_tiles);
  buffers->capacity = static_cast<int32_t>(problem.max_context);
  const std::size_t partials = rows * static_cast<std::size_t>(buffers->bound_splits);
  const std::size_t candidates = rows * static_cast<std::size_t>(problem.max_context);
  buffers->partial_keys = carver.take<uint32_t>(partials);
  buffers->partial_counts = carver.take<uint32_t>(partials);
  buffers->counts = carver.take<uint32_t>(rows);
  buffers->candidate_scores = carver.take<float>(candidates);
  buffers->candidate_positions = carver.take<int32_t>(candidates);
  *bytes = carver.bytes();
  return Status::ok();
}

Status sm_count(int* sms) {
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  *sms = device.sm_count;
  return Status::ok();
}

}  // namespace

Status launch_decode_kernel(const void* kernel, dim3 grid, int threads, int smem, bool dependent,
                            cudaStream_t stream, void** args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = dependent ? &attribute : nullptr;
  config.numAttrs = dependent ? 1 : 0;
  LITETOPK_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer

namespace litetopk::detail {

Status cuda_paged_decode_workspace_size(const PagedIndexerProblem& problem,
                                        std::size_t* workspace_bytes) {
  int sms = 0;
  if (Status s = cuda_indexer::sm_count(&sms); !s) return s;
  cuda_indexer::DecodeBuffers buffers;
  return cuda_indexer::lay_out(problem, sms, nullptr, &buffers, workspace_bytes);
}

Status cuda_paged_decode_topk(const PagedIndexerProblem& problem, void* state, void* workspace,
                              cudaStream_t stream) {
  int sms = 0;
  if (Status s = cuda_indexer::sm_count(&sms); !s) return s;
  cuda_indexer::DecodeBuffers buffers;
  std::size_t bytes = 0;
  if (Status s = cuda_indexer::lay_out(problem, sms, workspace, &buffers, &bytes); !s) return s;
  buffers.previous = static_cast<const int32_t*>(state);
  buffers.next = static_cast<int32_t*>(state);
  // The gated kernel's grid: one wave of resident blocks over the batch, as the logits kernel's.
  int wave = 0;
  if (Status s = cuda_indexer::decode_gated_resident_blocks(problem, &wave); !s) return s;
  const int64_t tiles = cuda_indexer::paged_max_tiles(problem);
  const int64_t splits = std::clamp<int64_t>(wave / problem.batch, 1, tiles);
  cuda_indexer::PagedLaunch launch;
  if (Status s = cuda_indexer::prepare_paged_launch(problem, splits, &launch); !s) return s;
  // The cache as 128-byte rows (66 per block: 64 keys, then the scales) for one-row loads.
  CUtensorMap row_map;
  const bool has_blocks = problem.num_blocks > 0 && problem.kv_cache != nullptr;
  const int64_t rows_per_block = cuda_indexer::paged::kBlockBytes / cuda_indexer::paged::kHeadDim;
  if (Status s = make_row_tile_map(has_blocks ? problem.kv_cache : problem.q,
                                   static_cast<uint64_t>(has_blocks ? problem.num_blocks * rows_per_block : 1),
                                   1, &row_map);
      !s) {
    return s;
  }
  if (Status s = cuda_indexer::launch_decode_bound(launch, row_map, problem, buffers, stream); !s) {
    return s;
  }
  if (Status s = cuda_indexer::launch_decode_gated(launch, problem, buffers, stream); !s) return s;
  return cuda_indexer::launch_decode_select(problem, buffers, stream);
}

}  // namespace litetopk::detail
