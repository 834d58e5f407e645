// select_topk: exact top-k of each row of a score matrix that is already in memory.
//
// Contract (see docs/select.md):
// - scores [batch, n] of dtype float32, bfloat16 or float16; row b starts at scores + b * row_stride
//   (elements, row_stride >= n).
// - Optional half-open ranges [row_starts[b], row_ends[b]) restrict row b (either array may be
//   null: start 0, end n). Indices are relative to the row's start.
// - indices [batch, k] int32. A row with fewer than k selectable entries returns all of them, then
//   -1. values [batch, k] (optional) has the scores' dtype; padded slots hold NaN.
// - NaN is never selected; +-inf are ordinary values.
// - Order is unspecified unless `sorted` (best first, ties by ascending index). Among ties at the
//   k-th value any member may be chosen, unless `deterministic`: then the smallest indices win.
// - `largest` = false selects the smallest values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

struct SelectProblem {
  const void* scores = nullptr;
  DType dtype = DType::kFloat32;
  int64_t batch = 0;
  int64_t n = 0;
  int64_t row_stride = 0;  // elements between row starts; 0 means n
  const int32_t* row_starts = nullptr;  // [batch] or null
  const int32_t* row_ends = nullptr;    // [batch] or null
  int64_t k = 0;
  bool largest = true;
  bool sorted = false;
  bool deterministic = false;
  int32_t* indices = nullptr;  // [batch, k], required
  void* values = nullptr;      // [batch, k] of dtype, optional
};

// Which GPU algorithm runs. kAuto lets the cost model choose per shape.
enum class SelectAlgo : int {
  kAuto = 0,
  kRadix = 1,         // multi-pass radix select: robust on any input, any k
  kSampleFilter = 2,  // one streaming pass with a rising threshold (k <= kSampleFilterMaxK)
  kGridRadix = 3,     // radix select in one launch: each row's blocks wait for each other at
                      // grid-wide barriers (for few rows; every block must be resident at once,
                      // else kUnsupported)
  kSieve = 4,         // for few long rows: each row's segments keep their few best entries and
                      // the row's last block selects among them (one read; kUnsupported when a
                      // row's survivors would not fit one block)
  kCluster = 5,       // radix select of each row by a thread-block cluster of up to 16 CTAs that
                      // hold the row in shared memory and merge their digit histograms through
                      // distributed shared memory (rows of up to 512K entries, any k; auto
                      // takes it for many short rows and for up to 8 rows of up to 128K;
                      // kUnsupported when a row does not fit)
  kRegister = 6,      // radix select of each row by one CTA that holds it in registers (rows of
                      // up to 16K entries, any k; auto takes it for rows of up to 8K, and of
                      // 8K to 16K from 128 rows; kUnsupported for longer rows)
};
constexpr int64_t kSampleFilterMaxK = 8192;

const char* select_algo_name(SelectAlgo algo);
bool parse_select_algo(const char* name, SelectAlgo* algo);

struct SelectOptions {
  SelectAlgo algo = SelectAlgo::kAuto;
  // Copy the row ranges to the host and check 0 <= start <= end <= n before launching. This
  // synchronizes the stream, so it is off by default (and must stay off inside CUDA graph capture).
  // Without it, out-of-range bounds are clamped into [0, n] and an inverted range is empty:
  // nothing is ever read or written out of bounds.
  bool validate_ranges = false;
};

// ---- GPU (all pointers are device pointers) ----

// One select call planned once (select_topk_plan): the problem's sizes and flags validated, the
// algorithm resolved and the workspace sized, for launches with any addresses
// (select_topk_launch). Plan on the device the launches run on. Read-only once planned.
struct SelectPlan {
  SelectProblem problem{};  // sizes and flags of the planned call (its pointers are not used)
  SelectAlgo algo = SelectAlgo::kAuto;  // the algorithm that runs: never kAuto once planned
  std::size_t workspace_bytes = 0;      // caller-owned device workspace each launch needs
  bool validate_ranges = false;         // options.validate_ranges (synchronizes each launch)
  bool has_row_starts = false;          // the launches pass row_starts (row_ends) or not
  bool has_row_ends = false;
  bool has_values = false;              // the launches write values or not
  int32_t segments = 0;       // blocks per row of the planned algorithm
  int32_t blocks_per_sm = 0;  // sample-filter's occupancy
  bool large_k = false;       // sample-filter's k > 2048 configuration
  int32_t threads_per_block = 0;  // sample-filter's block size (256, or 512 for one wave)
  int32_t sieve_keep = 0;          // sieve: the entries each segment aims to keep
  int32_t sieve_capacity = 0;      // sieve: the most each segment keeps
  int32_t sieve_shared_bytes = 0;  // sieve: dynamic shared memory per block
};

// The addresses of one launch of a plan (device pointers).
struct SelectAddresses {
  const void* scores = nullptr;
  const int32_t* row_starts = nullptr;  // required when the plan has row starts, else ignored
  const int32_t* row_ends = nullptr;    // likewise
  int32_t* indices = nullptr;
  void* values = nullptr;               // required when the plan has values, else ignored
};

// Validates the problem's sizes and flags (its pointers may be null: only whether row_starts,
// row_ends and values are null is kept), resolves options.algo on the current device and sizes
// the workspace. No allocation, no synchronization.
Status select_topk_plan(const SelectProblem& problem, const SelectOptions& options,
                        SelectPlan* plan);

// Launches a plan on `stream` with `workspace` (plan.workspace_bytes of device memory). Checks only
// what the plan could not: that the addresses are set and aligned. No allocation, no
// synchronization (unless plan.validate_ranges), so it can be captured in a CUDA graph.
Status select_topk_launch(const SelectPlan& plan, const SelectAddresses& addresses,
                          void* workspace, cudaStream_t stream);

// The one-shot calls below plan and launch in one go.

// Bytes of caller-owned device workspace select_topk needs for this problem and options.
Status select_topk_workspace_size(const SelectProblem& problem, std::size_t* workspace_bytes,
                                  const SelectOptions& options = {});

// Launches the selection on `stream`. No allocation, no synchronization (unless
// options.validate_ranges), so it can be captured in a CUDA graph.
Status select_topk(const SelectProblem& problem, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream, const SelectOptions& options = {});

// The algorithm kAuto picks for this problem on the current device.
SelectAlgo select_topk_dispatch(const SelectProblem& problem);

// ---- CPU (all pointers are host pointers) ----

enum class CpuSelectAlgo : int {
  kReference = 0,  // plain full sort of each row: the test oracle
  kFast = 1,       // threaded streaming filter
};

// num_threads = 0 uses every hardware thread.
Status select_topk_cpu(const SelectProblem& problem, CpuSelectAlgo algo = CpuSelectAlgo::kFast,
                       int num_threads = 0);

// Checks shapes, pointers and options (not the contents of device range arrays).
Status validate_select_problem(const SelectProblem& problem);
// Checks 0 <= start <= end <= n for host copies of the range arrays (either may be null).
Status validate_select_ranges(const SelectProblem& problem, const int32_t* host_starts,
                              const int32_t* host_ends);

}  // namespace litetopk
