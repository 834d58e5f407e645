// merge_topk: the exact global top-k of per-shard top-k lists (values and global indices).
//
// Contract (see docs/distributed.md):
// - Candidate (b, s, j) of row b, shard s, slot j (0 <= j < k_in) is values[off] / indices[off] at
//   off = b * row_stride + s * shard_stride + j (elements). The defaults (strides 0) are the
//   contiguous [batch, shards, k_in] layout; the result of torch.distributed's
//   all_gather_into_tensor, [shards, batch, k_in], is row_stride = k_in, shard_stride =
//   batch * k_in.
// - A candidate is empty, and never selected, when its index is negative (the -1 padding of a
//   select_topk result), its value is NaN, or j >= counts[b * shards + s] (counts [batch, shards]
//   int32, optional; each count is clamped into [0, k_in]). +-inf are ordinary values.
// - out_indices [batch, k] int32 holds the selected candidates' global indices: the k best
//   non-empty candidates of the row, then -1 once a row has fewer than k. out_values [batch, k]
//   (optional) holds their values, NaN in padded slots.
// - The indices of one row must be distinct (shards hold disjoint keys); a repeated (value, index)
//   pair may be selected more than once.
// - Ties are resolved like select_topk with `deterministic`: among equal values the smallest
//   global indices win, whatever `deterministic` says (the merge orders candidates by value, then
//   index). Order is unspecified unless `sorted` (best first, ties by ascending index).
// - `largest` = false selects the smallest values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

struct MergeProblem {
  const float* values = nullptr;     // candidate values, required
  const int32_t* indices = nullptr;  // candidate global indices (< 0: empty), required
  const int32_t* counts = nullptr;   // [batch, shards] non-empty prefix of each list, or null
  int64_t batch = 0;
  int64_t shards = 0;
  int64_t k_in = 0;          // slots per shard list
  int64_t row_stride = 0;    // elements from row b to row b + 1; 0 means shards * k_in
  int64_t shard_stride = 0;  // elements from shard s to shard s + 1; 0 means k_in
  int64_t k = 0;
  bool largest = true;
  bool sorted = false;
  bool deterministic = false;  // accepted for select_topk's interface: the merge always is
  int32_t* out_indices = nullptr;  // [batch, k], required
  float* out_values = nullptr;     // [batch, k], optional
};

// ---- GPU (all pointers are device pointers) ----

// One merge planned once (merge_topk_plan): the sizes validated and the workspace sized, for
// launches with any addresses (merge_topk_launch). Read-only once planned.
struct MergePlan {
  MergeProblem problem{};          // sizes and flags of the planned call (its pointers unused)
  std::size_t workspace_bytes = 0;  // caller-owned device workspace each launch needs
  bool has_counts = false;          // the launches pass counts or not
  bool has_values = false;          // the launches write out_values or not
  bool planned = false;             // made by merge_topk_plan
};

// The addresses of one launch of a plan (device pointers).
struct MergeAddresses {
  const float* values = nullptr;
  const int32_t* indices = nullptr;
  const int32_t* counts = nullptr;  // required when the plan has counts, else ignored
  int32_t* out_indices = nullptr;
  float* out_values = nullptr;      // required when the plan has values, else ignored
};

// Validates the sizes, strides and flags (pointers may be null: only whether counts and
// out_values are null is kept) and sizes the workspace. No allocation, no synchronization.
Status merge_topk_plan(const MergeProblem& problem, MergePlan* plan);

// Launches a plan on `stream` with `workspace` (plan.workspace_bytes of device memory). Checks only
// that the addresses are set and aligned. No allocation, no synchronization: graph-capturable.
Status merge_topk_launch(const MergePlan& plan, const MergeAddresses& addresses, void* workspace,
                         cudaStream_t stream);

// Bytes of caller-owned device workspace merge_topk needs (0 unless `sorted`).
Status merge_topk_workspace_size(const MergeProblem& problem, std::size_t* workspace_bytes);

// Plans and launches in one go on `stream`. No allocation, no synchronization.
Status merge_topk(const MergeProblem& problem, void* workspace, std::size_t workspace_bytes,
                  cudaStream_t stream);

// ---- CPU (all pointers are host pointers) ----

// The plain reference: each row's non-empty candidates fully sorted, the first k kept (its output
// is always sorted).
Status merge_topk_cpu(const MergeProblem& problem);

// Checks sizes, strides, flags, pointers and their alignment (not the contents of the arrays).
Status validate_merge_problem(const MergeProblem& problem);

}  // namespace litetopk
