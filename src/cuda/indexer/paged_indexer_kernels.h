// Host-side entry points of the paged decode indexer's kernels (paged_logits_kernel.cu,
// paged_fused_kernel.cu) and their launch plan (paged_indexer_launch.cu).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/indexer/paged_scoring_sm90.cuh"
#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

// One launch of a paged kernel: the TMA maps of q ([B * next_n * H, 128] rows, boxes of a
// request's padded columns) and of the cache's keys (3-D: 128 bytes x 64 slots x num_blocks, block stride
// 8448 bytes), the arguments, and the grid: splits x batch blocks.
struct PagedLaunch {
  CUtensorMap q_map;
  CUtensorMap kv_map;
  paged::PagedArgs args;
  unsigned splits = 0;
  unsigned batch = 0;
  int heads = 64;
  int columns = 64;
};

// A request's next_n * H query-head columns padded to 64, 128 or 256: the kernels' N.
inline int paged_columns(const PagedIndexerProblem& problem) {
  const int64_t columns = problem.next_n * problem.num_heads;
  return columns <= 64 ? 64 : (columns <= 128 ? 128 : 256);
}

// body(std::integral_constant<int, H>, std::integral_constant<int, columns>) for the shapes the
// kernels are built for: H 64 with 64, 128 or 256 columns, H 32 with 64 or 128.
template <class Body>
auto dispatch_paged_shape(int heads, int columns, Body&& body) {
  using H64 = std::integral_constant<int, 64>;
  using H32 = std::integral_constant<int, 32>;
  if (heads == 64) {
    if (columns == 64) return body(H64{}, std::integral_constant<int, 64>{});
    if (columns == 128) return body(H64{}, std::integral_constant<int, 128>{});
    return body(H64{}, std::integral_constant<int, 256>{});
  }
  if (columns == 64) return body(H32{}, std::integral_constant<int, 64>{});
  return body(H32{}, std::integral_constant<int, 128>{});
}
// Tiles (cache blocks) of the longest row: ceil(max_context / 64).
inline int64_t paged_max_tiles(const PagedIndexerProblem& problem) {
  return (problem.max_context + paged::kTileKeys - 1) / paged::kTileKeys;
}

// The logits kernel's ring, shared by the gated decode kernel (the same core over every tile):
// each key tile is used once, so the bytes in flight set the bandwidth: 16 stages per SM, in one
// block, or in two blocks of 12 when the registers allow two (64 columns: twice the warps to hide
// the epilogue).
template <int kColumns>
constexpr int kLogitsBlocksPerSm = kColumns == 64 ? 2 : 1;
template <int kColumns>
constexpr int kLogitsStages = kColumns == 64 ? 12 : 16;
// The logits kernel's math warpgroups: three in the one block of an SM at 128 columns (next_n 2
// at H 64: the epilogue's work per tile doubles; four would need more than the 96 registers
// ptxas allows 544 threads), two otherwise.
template <int kColumns>
constexpr int kLogitsGroups = kColumns == 128 ? 3 : 2;

// The current device's SMs.
Status paged_sm_count(int* sms);

// Fills `launch` for `splits` blocks per request (each taking ceil(max tiles / splits) tiles).
Status prepare_paged_launch(const PagedIndexerProblem& problem, int64_t splits,
                            PagedLaunch* launch);

// Writes the logits of every row's positions [0, max_context) when fill_unseen (else only of the
// tiles some query of the request sees), and row_ends[r] = row r's visible count when row_ends is
// not null. One wave of blocks (a block per request when the batch is larger) shares the batch's
// tiles, scheduled on the device from the context lengths; the launch's splits and
// tiles_per_split are not used.
Status launch_paged_logits(const PagedLaunch& launch, float* logits, int64_t stride,
                           bool fill_unseen, int32_t* row_ends, cudaStream_t stream);

// ---- the fused kernel ----
// Scores a block keeps on chip: next_n * tiles_per_split * 64 must not exceed this.
int64_t paged_fused_score_capacity(int heads, int columns);
// Workspace of the fused kernel's selection across blocks (zeroed by a kernel of the launch): per
// row three histograms and two counters, per request a barrier counter.
std::size_t paged_fused_workspace_bytes(const PagedIndexerProblem& problem);
// Whether every block of a `blocks`-block grid of the fused kernel can be resident at once on the
// current device (its blocks wait for each other).
Status paged_fused_fits(const PagedIndexerProblem& problem, int64_t blocks, bool* fits);
// A grid of `sms` blocks, one an SM; launch.splits only sets the bound
// launch.args.tiles_per_split on a block's tiles (the blocks share the batch's tiles from the
// device's context lengths).
Status launch_paged_fused(const PagedLaunch& launch, const PagedIndexerProblem& problem, int sms,
                          void* workspace, cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
