// The fused retrieval path (sm_90a): a wgmma GEMM over corpus tiles with the top-k gate in its
// epilogue, so that the [batch, n] scores are never written. Pipeline in fused_retrieval_launch.cu;
// the scoring kernel in fused_retrieval_kernel.cu, the final selection in
// fused_retrieval_select.cu.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "heuristics/retrieval_heuristics.h"
#include "litetopk/retrieval.h"
#include "litetopk/status.h"

namespace litetopk::cuda_retrieval {

// Corpus rows per tile (the wgmma's N), queries per block (its M), math warpgroups per block
// (each with its own lists).
constexpr int kFusedTileRows = static_cast<int>(heuristics::kFusedRetrievalTileRows);
constexpr int kFusedQueryRows = static_cast<int>(heuristics::kFusedRetrievalQueryRows);
constexpr int kFusedMathGroups = static_cast<int>(heuristics::kFusedRetrievalMathGroups);

// Stages of each math warpgroup's ring for rows of `dim` columns (as many as shared memory
// holds, from 2 to 4).
int fused_stage_count(int64_t dim);

// Why the fused path cannot run `p` on the current device (a float16 or bfloat16 corpus on
// sm_90 is needed), or an empty string when it can.
Status fused_retrieval_unsupported(const RetrievalProblem& p, std::string* why);

// Fills the plan's fused_* fields, sample_select and workspace_bytes for the fused path.
Status plan_fused_retrieval(RetrievalPlan* plan);

// The fused path's launches in order (fused_retrieval_launch.cu).
Status launch_fused_retrieval(const RetrievalPlan& plan, const RetrievalProblem& p,
                              void* workspace, cudaStream_t stream);

// The arrays of one launch, carved from the caller's workspace.
struct FusedScan {
  CUtensorMap query_map;
  CUtensorMap corpus_map;
  const float* corpus_norms = nullptr;  // l2
  const float* query_norms = nullptr;   // l2
  const uint8_t* bitmap = nullptr;
  const int32_t* starts = nullptr;
  const int32_t* ends = nullptr;
  float* sample_scores = nullptr;  // [batch, sample_tiles * 128]
  uint64_t* gates = nullptr;       // [batch] composite gates: a row is kept when above
  uint64_t* lists = nullptr;       // [batch, lanes, capacity] composites
  uint32_t* counts = nullptr;      // [batch, lanes]: what is left in each list after the scan
  uint64_t* pool = nullptr;        // [batch, pool_capacity] composites
  uint32_t* pool_counts = nullptr;  // [batch]: slots reserved (past the capacity: the pool is full)
};

// The scoring kernel over the sample tiles (sample = true: their scores into sample_scores) or
// over every tile (the gate and the lists).
Status launch_fused_scan(const RetrievalPlan& plan, const FusedScan& scan, bool sample,
                         cudaStream_t stream);

// gates[b] from the k best sample scores of query b (values [batch, k], NaN padded): the k-th
// one's key (any row scoring at least as well is kept), or every non-NaN score when the sample
// has fewer than k; with no sample (values null) every non-NaN score. And an empty pool.
Status launch_fused_gates(const float* values, int64_t batch, int64_t k, uint64_t* gates,
                          uint32_t* pool_counts, cudaStream_t stream);

// Per query: the k best of its pool (and of the lists that did not fit it), written as indices
// and scores (or, when composites is not null, as composites for the sort).
Status launch_fused_select(const RetrievalPlan& plan, const FusedScan& scan, int32_t* indices,
                           float* scores, uint64_t* composites, cudaStream_t stream);

}  // namespace litetopk::cuda_retrieval
