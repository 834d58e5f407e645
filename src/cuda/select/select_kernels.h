// Host-side entry points of the GPU selection kernels (one .cu file each). The orchestration in
// select_launch.cu plans the workspace, launches one algorithm, and (for sorted output) sorts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/device_shape.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/select/score_source.cuh"
#include "litetopk/select.h"

namespace litetopk::cuda_select {

// ---- Sample-Filter-Select (sample_filter_select.cu) ----
struct SampleFilterPlan {
  bool large_k;     // the kMaxK = 8192 configuration (one block per SM)
  int segments;     // blocks per row
  int blocks_per_sm;
  int threads;      // per block: 256 (narrow) or 512 (wide: every block resident at once)
};
SampleFilterPlan plan_sample_filter(const SelectProblem& problem, const cuda_common::DeviceShape& device);
// Carves this algorithm's workspace (bytes counted when carver has no base).
struct SampleFilterWorkspace {
  uint64_t* row_bounds;      // [batch] shared lower bound of each row's k-th composite
  uint64_t* row_cuts;        // [batch] highest estimated gate of a row's segments
  uint32_t* row_counters;    // [2 * batch] candidate-list length, blocks finished
  uint64_t* candidate_lists; // [batch, segments * capacity] (only when segments > 1)
  int64_t list_capacity;
};
SampleFilterWorkspace carve_sample_filter(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem,
                                          const SampleFilterPlan& plan);
Status launch_sample_filter(const SelectProblem& problem, const SampleFilterPlan& plan,
                            const SelectArgs& args, const SampleFilterWorkspace& ws,
                            cudaStream_t stream);

// ---- Radix select baseline (radix_select.cu) ----
struct RadixPlan {
  int segments;  // blocks per row in the histogram and emit passes
};
RadixPlan plan_radix(const SelectProblem& problem, const cuda_common::DeviceShape& device);
struct RadixWorkspace {
  void* row_states;      // [batch] per-row selection state
  uint32_t* histograms;  // [batch, kRadixBins]
};
RadixWorkspace carve_radix(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem);
Status launch_radix(const SelectProblem& problem, const RadixPlan& plan, const SelectArgs& args,
                    const RadixWorkspace& ws, cudaStream_t stream);

// ---- Radix select in one launch for few rows (grid_radix_select.cu) ----
struct GridRadixPlan {
  int segments;  // blocks per row, all resident at once; 0 when the rows do not fit
};
Status plan_grid_radix(const SelectProblem& problem, GridRadixPlan* plan);
struct GridRadixWorkspace {
  void* rows;             // [batch] per-row histograms, barrier and counters
  std::size_t bytes;      // zeroed before each launch
  uint64_t* candidates;   // [batch, capacity] the k-th key's bin of each row
  int64_t capacity;
};
GridRadixWorkspace carve_grid_radix(cuda_common::WorkspaceCarver& carver,
                                    const SelectProblem& problem);
Status launch_grid_radix(const SelectProblem& problem, const GridRadixPlan& plan,
                         const SelectArgs& args, const GridRadixWorkspace& ws,
                         cudaStream_t stream);

// ---- Sieve select for few long rows (sieve_select.cu) ----
struct SievePlan {
  int segments;      // blocks per row; 0 when the survivors of a row would not fit one block
  int keep;          // the entries a segment aims to keep
  int capacity;      // the most a segment keeps
  int shared_bytes;  // dynamic shared memory per block
};
SievePlan plan_sieve(const SelectProblem& problem, const cuda_common::DeviceShape& device);
struct SieveWorkspace {
  uint32_t* arrivals;    // [batch] blocks done (zeroed before each launch)
  void* infos;           // [batch, segments] each segment's cutoff and flags
  uint64_t* survivors;   // [batch, segments * capacity]
};
SieveWorkspace carve_sieve(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem,
                           const SievePlan& plan);
Status launch_sieve(const SelectProblem& problem, const SievePlan& plan, const SelectArgs& args,
                    const SieveWorkspace& ws, cudaStream_t stream);

// ---- Cluster radix select for few rows (cluster_select.cu) ----
// Each row is held in the shared memory of a thread-block cluster of `cluster` CTAs, which merge
// their digit histograms through distributed shared memory: no global workspace, no memset.
struct ClusterPlan {
  int cluster;       // CTAs per row (1 to 16); 0 when a row does not fit the cluster
  int shared_bytes;  // dynamic shared memory per CTA
  int resident = 0;  // clusters of this shape the device runs at once (set by plan_cluster)
};
// The largest cluster (up to 16 CTAs of about 8K scores, or 16K when the clusters would fill the
// device) the device holds; cluster 0 when none fits.
ClusterPlan plan_cluster(const SelectProblem& problem);
// The launch shape of `cluster` CTAs a row (a plan_cluster result's cluster).
ClusterPlan cluster_plan_for(const SelectProblem& problem, int cluster);
Status launch_cluster(const SelectProblem& problem, const ClusterPlan& plan,
                      const SelectArgs& args, cudaStream_t stream);

// ---- Register select for short rows (register_select.cu) ----
// One CTA a row holds the row's keys in registers: rows of up to 16K entries, no workspace.
struct RegisterPlan {
  int per_thread;  // keys a thread holds (8, 16 or 32); 0 when a row does not fit
};
RegisterPlan plan_register(const SelectProblem& problem);
Status launch_register(const SelectProblem& problem, const RegisterPlan& plan,
                       const SelectArgs& args, cudaStream_t stream);

// ---- Sorted output (sort_selected.cu) ----
struct SortWorkspace {
  uint64_t* composites;  // [batch, k] written by the selection
  uint64_t* sorted;      // [batch, k]
  int64_t* offsets;      // [batch + 1]
  void* cub_temp;
  std::size_t cub_temp_bytes;
};
Status carve_sort(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem, SortWorkspace* ws);
// Sorts each row's composites best-first and writes indices/values.
Status launch_sort_selected(const SelectProblem& problem, const SortWorkspace& ws,
                            cudaStream_t stream);

// ---- The internal launcher other features call (select_launch.cu) ----
// select_topk without the front door's validation (the caller builds a valid problem), with the
// algorithm kAuto picks.
Status select_workspace_size(const SelectProblem& problem, std::size_t* workspace_bytes);
Status select_rows(const SelectProblem& problem, void* workspace, cudaStream_t stream);

}  // namespace litetopk::cuda_select
