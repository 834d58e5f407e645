// Host-side entry points of the paged decode indexer's gated path (the previous step's top-k in a
// decode state gates the scores): its three kernels (decode_bound_kernel.cu,
// decode_gated_kernel.cu, decode_select_kernel.cu) and their launcher (decode_state_launch.cu).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/indexer/paged_indexer_kernels.h"
#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

// The gated path's device buffers (the workspace's pieces and the state). rows = B * next_n.
struct DecodeBuffers {
  const int32_t* previous = nullptr;  // the state: [rows, k] the previous step's positions
  int32_t* next = nullptr;            // the same memory: this step's positions are written there
  uint32_t* partial_keys = nullptr;   // [rows, bound_splits] min key of the re-scored history
  uint32_t* partial_counts = nullptr; // [rows, bound_splits] distinct valid re-scored positions
  // The gated kernel's candidates: block x of request b appends row r's to region x of the row,
  // [x * span, x * span + counts[r, x]), so a region never overflows (a block has span tokens).
  uint32_t* counts = nullptr;              // [rows, splits]
  float* candidate_scores = nullptr;       // [rows, splits * span]
  int32_t* candidate_positions = nullptr;  // [rows, splits * span]
  int32_t splits = 0;                 // blocks per request of the gated kernel
  int32_t span = 0;                   // tokens of a gated block: tiles_per_split * 64
  int32_t bound_splits = 0;           // blocks per request of the bound kernel
  int32_t bound_tiles = 0;            // history tiles (64 slots) per row and bound block
};

// The largest k the gated path takes (the bound kernel's hash set of a row's history).
constexpr int64_t kDecodeMaxK = 4096;

// 1. Re-scores the previous step's positions of each row (distinct, visible, in the cache) and
// writes each bound block's minimum and count.
Status launch_decode_bound(const PagedLaunch& launch, const PagedIndexerProblem& problem,
                           const DecodeBuffers& buffers, cudaStream_t stream);
// 2. The paged scoring core with the gate in its epilogue: appends every visible score at or above
// its row's bound (the history's minimum once k positions count, else -inf) to the block's
// region of the row's candidates, and writes the region's count. A dependent launch (PDL) of the
// bound kernel; `launch` has buffers.splits blocks per request.
Status launch_decode_gated(const PagedLaunch& launch, const PagedIndexerProblem& problem,
                           const DecodeBuffers& buffers, cudaStream_t stream);
// The gated kernel's blocks the current device holds at once (one wave).
Status decode_gated_resident_blocks(const PagedIndexerProblem& problem, int* blocks);
// 3. The exact top-k of each row's candidates: indices (token positions), values, and the state.
// A dependent launch of the gated kernel.
Status launch_decode_select(const PagedIndexerProblem& problem, const DecodeBuffers& buffers,
                            cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
