// Radix select in one launch, for few rows: the radix baseline's digits (radix_select.cu) with
// each row spread over `segments` blocks that wait for each other at grid-wide barriers instead of
// returning to the host between passes (a cooperative launch: every block is resident).
//
// Pipeline of grid_radix_kernel (block = (row, segment)):
// 1. Per digit, most significant first (11/11/10 bits of the key; of the index too when
//    deterministic): the block counts its segment's entries that match the digits found so far in
//    a shared histogram and adds it into the row's histogram of that digit in global memory; the
//    row's blocks meet at a barrier; every block copies the sums and finds the same digit (the bin
//    holding the k-th best entry, DigitFinder). A row is done when that bin is taken whole, after
//    the last digit, or after the first when it has at most k valid entries (all are taken).
// 2. Emit: every block writes its entries above the pivot (one atomic counter per row) and the
//    ties the row still needs (a second counter); block 0 of the row writes the -1 padding.
// The histograms and counters are zeroed by a memset before the launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/common/group_barrier.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
constexpr int kMaxDigits = 6;

// A row's workspace: one histogram per digit, the barrier and the emit counters.
struct GridRow {
  uint32_t histograms[kMaxDigits][kRadixBins];
  uint32_t barrier;
  uint32_t slot_counter;
  uint32_t tie_counter;
};

// The row's selection state, the same in every block of the row.
struct GridRowState {
  uint64_t prefix;
  int32_t top;       // bits at and above `top` are resolved
  uint32_t rank;     // entries still to take from the bin being refined
  uint32_t greater;  // entries known to be selected
  bool done;
};

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    grid_radix_kernel(const SelectArgs args, GridRow* rows, int segments, int digits) {
  using Finder = DigitFinder<kThreads>;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ uint32_t histogram[kRadixBins];
  __shared__ typename Finder::Storage finder;
  __shared__ typename Reduce::TempStorage reduce;
  __shared__ GridRowState state;
  __shared__ uint32_t row_total;
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  GridRow& ws = rows[row];
  if (threadIdx.x == 0) state = GridRowState{0, 64, static_cast<uint32_t>(args.k), 0, false};
  const RowLayout<Traits> layout(args, row);
  __syncthreads();

  // 1.
  for (int d = 0; d < digits && !state.done; ++d) {
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) histogram[i] = 0;
    __syncthreads();
    const GridRowState now = state;
    const int width = digit_width(now.top);
    const int shift = now.top - width;
    const uint32_t mask = (1u << width) - 1;
    for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, segment, segments,
                                            [&](uint32_t key, uint32_t index) {
      const uint64_t c = keys::make_composite(key, index);
      if (key != 0 && matches_prefix(c, now.prefix, now.top)) {
        atomicAdd(&histogram[(c >> shift) & mask], 1u);
      }
    });
    __syncthreads();
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
      if (histogram[i] != 0) atomicAdd(&ws.histograms[d][i], histogram[i]);
    }
    cuda_common::group_barrier(&ws.barrier, static_cast<uint32_t>(segments),
                               static_cast<uint32_t>(d + 1));
    uint32_t local = 0;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
      histogram[i] = __ldcg(&ws.histograms[d][i]);
      local += histogram[i];
    }
    const uint32_t total = Reduce(reduce).Sum(local);  // valid in thread 0
    if (threadIdx.x == 0) row_total = total;
    __syncthreads();
    if (d == 0 && row_total <= now.rank) {
      // At most k valid entries: take every one (key >= 1 means (c >> 32) > 0).
      if (threadIdx.x == 0) state = GridRowState{0, 32, 0, row_total, true};
      __syncthreads();
      break;
    }
    uint32_t above = 0;
    const uint32_t digit = Finder::find(finder, histogram, now.rank, &above);
    if (threadIdx.x == 0) {
      GridRowState next = now;
      next.rank -= above;
      next.greater = now.greater + above;
      next.prefix = (now.prefix << width) | digit;
      next.top = shift;
      next.done = histogram[digit] == next.rank || shift == final_shift(args.deterministic);
      state = next;
    }
    __syncthreads();
  }

  // 2.
  const GridRowState final_state = state;
  const Pivot pivot{final_state.prefix, final_state.top, final_state.greater};
  const uint32_t ties_wanted = final_state.rank;
  for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, segment, segments,
                                          [&](uint32_t key, uint32_t index) {
    if (key == 0) return;
    const uint64_t c = keys::make_composite(key, index);
    const int order = compare_to_pivot(c, pivot);
    if (order > 0) {
      write_output<Traits>(args, row, static_cast<int32_t>(atomicAdd(&ws.slot_counter, 1u)), c);
    } else if (order == 0) {
      const uint32_t tie = atomicAdd(&ws.tie_counter, 1u);
      if (tie < ties_wanted) {
        write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie), c);
      }
    }
  });
  if (segment == 0) {
    const auto first_empty = static_cast<int32_t>(final_state.greater + final_state.rank);
    for (int32_t slot = first_empty + static_cast<int32_t>(threadIdx.x); slot < args.k;
         slot += kThreads) {
      write_output<Traits>(args, row, slot, keys::kEmptyComposite);
    }
  }
}

template <typename Traits>
const void* kernel_of() {
  return reinterpret_cast<const void*>(grid_radix_kernel<Traits>);
}

}  // namespace

Status plan_grid_radix(const SelectProblem& problem, GridRadixPlan* plan) {
  plan->segments = 0;
  if (problem.batch == 0) {
    plan->segments = 1;  // nothing to launch
    return Status::ok();
  }
  int resident = 0;
  if (Status s = dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
        return cuda_common::resident_blocks(kernel_of<decltype(traits)>(), kThreads, 0, &resident);
      });
      !s) {
    return s;
  }
  // Every block resident; segments of at least 1024 entries.
  const int64_t by_residency = resident / problem.batch;
  const int64_t by_length = std::max<int64_t>(1, problem.n / 1024);
  plan->segments = static_cast<int>(std::min(by_residency, by_length));
  return Status::ok();
}

GridRadixWorkspace carve_grid_radix(cuda_common::WorkspaceCarver& carver,
                                    const SelectProblem& problem) {
  GridRadixWorkspace ws{};
  ws.rows = carver.take<unsigned char>(static_cast<std::size_t>(problem.batch) * sizeof(GridRow));
  ws.bytes = static_cast<std::size_t>(problem.batch) * sizeof(GridRow);
  return ws;
}

Status launch_grid_radix(const SelectProblem& problem, const GridRadixPlan& plan,
                         const SelectArgs& args, const GridRadixWorkspace& ws,
                         cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemsetAsync(ws.rows, 0, ws.bytes, stream));
  const int digits = 64 - final_shift(problem.deterministic) > 32 ? 6 : 3;
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    SelectArgs kernel_args_copy = args;
    auto* rows = static_cast<GridRow*>(ws.rows);
    int segments = plan.segments;
    int digit_count = digits;
    void* kernel_args[] = {&kernel_args_copy, &rows, &segments, &digit_count};
    return cuda_common::launch_cooperative(
        kernel_of<decltype(traits)>(),
        dim3(static_cast<unsigned>(problem.batch * plan.segments)), kThreads, 0, stream,
        kernel_args);
  });
}

}  // namespace litetopk::cuda_select
