// Host-side entry points of the decode attention kernels (one .cu file each) and the parameters
// they share. The orchestration (split sizes, workspace layout, launch order) is in
// decode_launch.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "litetopk/sparse_decode.h"

namespace litetopk::decode {

// The partial results of the splits and their arrival counters: a sequence of length len has
// max(1, ceil(len / split_tokens)) active splits (at most `splits`; split 0 also runs for an empty
// sequence, to write its zeros), and the last of them to finish merges them into the output
// (decode_merge_sm90.cuh).
struct SplitPartials {
  float* o = nullptr;     // [rows, splits, D], each normalized by its own softmax sum
  float* lse2 = nullptr;  // [rows, splits]: max + log2(sum), log2 units; -inf for an empty split
  uint32_t* arrivals = nullptr;  // [batch * num_kv_heads]: zeroed by the launch's first kernel
  int splits = 0;
  int64_t split_tokens = 0;
};

// ---- dense flash-decoding (dense_decode_kernel.cu) ----
constexpr int kDenseTileTokens = 64;  // tokens per pipeline stage; DecodeOptions' "block" here
// A programmatic dependent of cuda_common::launch_counter_reset; writes problem.out and
// problem.lse.
Status launch_dense_decode(const DenseDecodeProblem& problem, const SplitPartials& partials,
                           cudaStream_t stream);

// ---- sparse decode (sparse_anchor_kernel.cu, sparse_decode_kernel.cu) ----
// What both sparse kernels read of the problem: the query, the cache arrays and shape, the
// softmax scale in log2 units.
struct SparseCacheView {
  const void* q;
  const uint8_t* codes;
  const void* scales;
  const uint8_t* residuals;
  const void* values;
  const void* tail_keys;
  const int32_t* lengths;
  const int32_t* block_table;
  int num_kv_heads, group, block_size, max_blocks;
  float scale_log2;
};
SparseCacheView sparse_cache_view(const SparseDecodeProblem& problem);

constexpr int kAnchorChunkTokens = 64;
constexpr int kMaxBlocksPerSplit = 1024;
// Chunks of the anchor kernel per (sequence, KV head): block 0, block nf-1 and the open block,
// each in BS / 64 chunks.
inline int anchor_chunks(int64_t block_size) {
  return 3 * static_cast<int>(block_size / kAnchorChunkTokens);
}
// Per (sequence, query head, anchor chunk): the largest exact logit (log2 units) of the chunk's
// tokens, -inf for a chunk with none. Also zeroes the arrival counters of the kScanDelta pass
// that depends on it.
Status launch_sparse_anchors(const SparseDecodeProblem& problem, float* anchor_max,
                             uint32_t* arrivals, cudaStream_t stream);
// What one launch of the sparse kernel does (sparse_decode_kernel.cu): scan and attend (top-delta),
// scan only (block masses for the pick; it zeroes the arrival counters of the kAttendPicked pass
// after it), or attend only (the pick's blocks, or every block). The attending passes merge
// their splits into problem.out and problem.lse.
enum class SparsePass : int { kScanDelta, kScanMass, kAttendPicked, kAttendAll };
// The selection's workspace arrays a pass reads or writes (null when unused); rows = batch *
// num_q_heads.
struct SparseSelectionBuffers {
  float* anchor_max = nullptr;        // the anchor kernel writes, kScanDelta reads [rows, chunks]
  float* block_mass2 = nullptr;       // kScanMass writes, the pick reads [rows, max_blocks]: log2
                                      // of the block's pseudo-logit mass
  uint8_t* keep_rows = nullptr;       // the pick writes, kAttendPicked reads [rows, max_blocks]:
                                      // 1 when the head keeps the block
};
// `dependent`: a programmatic dependent of the previous kernel (kScanDelta: the anchor kernel;
// kAttendPicked: the pick kernel; kAttendAll: cuda_common::launch_counter_reset).
Status launch_sparse_decode(const SparseDecodeProblem& problem, int blocks_per_split,
                            SparsePass pass, const SparseSelectionBuffers& selection,
                            const SplitPartials& partials, bool dependent, cudaStream_t stream);

// ---- the bounded-mass pick (sparse_pick_kernel.cu) ----
// Per (sequence, query head): keep_rows[row, j] for the full blocks j < nf from block_mass2 and
// problem.mass_target (litetopk/sparse_decode.h, kMass). A programmatic dependent of the kScanMass
// pass. Needs 4 * max_blocks bytes of shared memory: at most kMaxPickBlocks blocks.
constexpr int64_t kMaxPickBlocks = 50 * 1024;
Status launch_sparse_pick(const SparseDecodeProblem& problem,
                          const SparseSelectionBuffers& selection, cudaStream_t stream);

}  // namespace litetopk::decode
