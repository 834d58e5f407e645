// Radix select in one launch, for few rows: each row spread over `segments` blocks that wait for
// each other at grid-wide barriers instead of returning to the host between passes (a cooperative
// launch: every block is resident), reading the row twice.
//
// Pipeline of grid_radix_kernel (block = (row, segment)):
// 1. Count: the block's histogram of its segment's keys' top 11 bits (the composites' bits
//    63..53; four copies while counting, against atomic contention) is added into the row's
//    global one; the row's blocks meet at a barrier; every block
//    copies the sums and finds the same bin d0 holding the k-th best key (DigitFinder). A row
//    with at most k valid entries takes them all.
// 2. Split: each block reserves, with one atomic per counter, output slots for its entries above
//    d0 and buffer slots for its entries in d0 (its own counts from step 1), then streams its
//    segment again, writing the former to the output and the latter, as composites, to the row's
//    candidate buffer. A bin taken whole is written out directly; a bin larger than the buffer is
//    refined from the row itself instead (more passes over the bin's entries, same result).
// 3. Refine: the radix baseline's next digits (radix_digits.cuh) over the candidates, each block
//    a slice, one barrier per digit, until the pivot is found; then the candidates above it and
//    the ties still needed are written (slots from warp-aggregated atomics).
// The per-row histograms and counters are zeroed by a memset before the launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/common/group_barrier.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/warp_scan.cuh"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

using cuda_common::warp_aggregated_slot;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
constexpr int kMaxDigits = 6;
constexpr int kFirstShift = 64 - kRadixBits;  // the first digit: composite bits 63..53
constexpr int kCopies = 4;

// A row's workspace: one histogram per digit, the barrier and the slot counters.
struct GridRow {
  uint32_t histograms[kMaxDigits][kRadixBins];
  uint32_t barrier;
  uint32_t above_slots;      // output slots taken by entries above the pivot
  uint32_t tie_slots;        // ties at the pivot seen
  uint32_t candidate_slots;  // the candidate buffer's entries
};

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    grid_radix_kernel(const SelectArgs args, GridRow* rows, uint64_t* candidates,
                      int64_t capacity, int segments) {
  using Finder = DigitFinder<kThreads>;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ uint32_t histogram[kRadixBins];
  // This block's counts of step 1, in kCopies copies (lane % kCopies picks one) while counting:
  // float keys crowd into a few top bins, where one copy would serialize its atomics 32-fold.
  __shared__ uint32_t own_copies[kCopies][kRadixBins];
  uint32_t* own = own_copies[0];
  __shared__ typename Finder::Storage finder;
  __shared__ typename Reduce::TempStorage reduce;
  __shared__ uint32_t shared_sum;
  __shared__ uint32_t base_above;
  __shared__ uint32_t base_candidates;
  __shared__ uint32_t block_above;
  __shared__ uint32_t block_candidates;
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  GridRow& ws = rows[row];
  uint64_t* row_candidates = candidates + row * capacity;
  const RowLayout<Traits> layout(args, row);
  const bool largest = args.largest;
  const auto k = static_cast<uint32_t>(args.k);
  const auto group = static_cast<uint32_t>(segments);
  const auto block_sum = [&](uint32_t value) {
    const uint32_t sum = Reduce(reduce).Sum(value);
    if (threadIdx.x == 0) shared_sum = sum;
    __syncthreads();
    return shared_sum;
  };

  // 1. Count.
  for (int i = threadIdx.x; i < kCopies * kRadixBins; i += kThreads) own[i] = 0;
  if (threadIdx.x == 0) {
    block_above = 0;
    block_candidates = 0;
  }
  __syncthreads();
  uint32_t* my_copy = own_copies[threadIdx.x % kCopies];
  for_each_key<Traits, kThreads, kUnroll>(layout, largest, segment, segments,
                                          [&](uint32_t key, uint32_t) {
    if (key != 0) atomicAdd(&my_copy[key >> (32 - kRadixBits)], 1u);
  });
  __syncthreads();
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
    uint32_t count = 0;
#pragma unroll
    for (int copy = 0; copy < kCopies; ++copy) count += own_copies[copy][i];
    own[i] = count;
    if (count != 0) atomicAdd(&ws.histograms[0][i], count);
  }
  cuda_common::group_barrier(&ws.barrier, group, 1);
  uint32_t local = 0;
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
    histogram[i] = __ldcg(&ws.histograms[0][i]);
    local += histogram[i];
  }
  const uint32_t total = block_sum(local);
  if (total <= k) {
    // At most k valid entries: take every one, then the padding.
    for_each_key<Traits, kThreads, kUnroll>(layout, largest, segment, segments,
                                            [&](uint32_t key, uint32_t index) {
      if (key == 0) return;
      write_output<Traits>(args, row, static_cast<int32_t>(warp_aggregated_slot(&ws.above_slots)),
                           keys::make_composite(key, index));
    });
    if (segment == 0) {
      for (uint32_t slot = total + threadIdx.x; slot < k; slot += kThreads) {
        write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::kEmptyComposite);
      }
    }
    return;
  }
  uint32_t above = 0;
  const uint32_t d0 = Finder::find(finder, histogram, k, &above);
  uint32_t rank = k - above;
  uint32_t greater = above;
  const uint32_t in_bin = histogram[d0];
  const bool whole_bin = in_bin == rank;
  const bool buffered = !whole_bin && in_bin <= capacity;

  // 2. Split: reserve, then stream the segment again.
  uint32_t mine_above = 0;
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
    const auto bin = static_cast<uint32_t>(i);
    mine_above += (bin > d0 || (bin == d0 && whole_bin)) ? own[i] : 0;
  }
  mine_above = block_sum(mine_above);
  if (threadIdx.x == 0) {
    base_above = mine_above ? atomicAdd(&ws.above_slots, mine_above) : 0;
    base_candidates =
        buffered && own[d0] ? atomicAdd(&ws.candidate_slots, own[d0]) : 0;
  }
  __syncthreads();
  for_each_key<Traits, kThreads, kUnroll>(layout, largest, segment, segments,
                                          [&](uint32_t key, uint32_t index) {
    if (key == 0) return;
    const uint32_t digit = key >> (32 - kRadixBits);
    if (digit > d0 || (digit == d0 && whole_bin)) {
      const uint32_t slot = base_above + warp_aggregated_slot(&block_above);
      write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::make_composite(key, index));
    } else if (digit == d0 && buffered) {
      row_candidates[base_candidates + warp_aggregated_slot(&block_candidates)] =
          keys::make_composite(key, index);
    }
  });
  if (whole_bin) return;
  cuda_common::group_barrier(&ws.barrier, group, 2);

  // 3. Refine, over this block's slice of the candidates (or its segment of the row).
  const uint32_t slice_begin = static_cast<uint32_t>(int64_t{in_bin} * segment / segments);
  const uint32_t slice_end = static_cast<uint32_t>(int64_t{in_bin} * (segment + 1) / segments);
  const auto for_each_in_bin = [&](auto&& fn) {
    if (buffered) {
      for (uint32_t i = slice_begin + threadIdx.x; i < slice_end; i += kThreads) {
        fn(__ldcg(&row_candidates[i]));
      }
    } else {
      // Only the bin's entries: those above it were written in step 2.
      for_each_key<Traits, kThreads, kUnroll>(layout, largest, segment, segments,
                                              [&](uint32_t key, uint32_t index) {
        if (key != 0 && key >> (32 - kRadixBits) == d0) fn(keys::make_composite(key, index));
      });
    }
  };
  uint64_t prefix = d0;
  int top = kFirstShift;
  const int final_bit = final_shift(args.deterministic);
  for (int d = 1; d < kMaxDigits; ++d) {
    const int width = digit_width(top);
    const int shift = top - width;
    const uint64_t mask = (uint64_t{1} << width) - 1;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) histogram[i] = 0;
    __syncthreads();
    for_each_in_bin([&](uint64_t c) {
      if (matches_prefix(c, prefix, top)) {
        atomicAdd(&histogram[static_cast<uint32_t>((c >> shift) & mask)], 1u);
      }
    });
    __syncthreads();
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
      if (histogram[i] != 0) atomicAdd(&ws.histograms[d][i], histogram[i]);
    }
    cuda_common::group_barrier(&ws.barrier, group, static_cast<uint32_t>(2 + d));
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
      histogram[i] = __ldcg(&ws.histograms[d][i]);
    }
    __syncthreads();
    const uint32_t digit = Finder::find(finder, histogram, rank, &above);
    rank -= above;
    greater += above;
    prefix = (prefix << width) | digit;
    top = shift;
    const bool done = histogram[digit] == rank || shift == final_bit;
    __syncthreads();
    if (done) break;
  }
  const Pivot pivot{prefix, top, greater};
  for_each_in_bin([&](uint64_t c) {
    const int order = compare_to_pivot(c, pivot);
    if (order > 0) {
      const auto slot = static_cast<int32_t>(warp_aggregated_slot(&ws.above_slots));
      write_output<Traits>(args, row, slot, c);
    } else if (order == 0) {
      const uint32_t tie = warp_aggregated_slot(&ws.tie_slots);
      if (tie < rank) write_output<Traits>(args, row, static_cast<int32_t>(greater + tie), c);
    }
  });
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
  // The k-th key's bin of random scores holds a few percent of a row; a quarter (at least 16K
  // entries) leaves room for skewed ones, and a larger bin is refined from the row.
  ws.capacity = std::min<int64_t>(problem.n, std::max<int64_t>(16384, problem.n / 4));
  ws.candidates = carver.take<uint64_t>(static_cast<std::size_t>(problem.batch * ws.capacity));
  return ws;
}

Status launch_grid_radix(const SelectProblem& problem, const GridRadixPlan& plan,
                         const SelectArgs& args, const GridRadixWorkspace& ws,
                         cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemsetAsync(ws.rows, 0, ws.bytes, stream));
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    SelectArgs kernel_args_copy = args;
    auto* rows = static_cast<GridRow*>(ws.rows);
    uint64_t* candidates = ws.candidates;
    int64_t capacity = ws.capacity;
    int segments = plan.segments;
    void* kernel_args[] = {&kernel_args_copy, &rows, &candidates, &capacity, &segments};
    return cuda_common::launch_cooperative(
        kernel_of<decltype(traits)>(),
        dim3(static_cast<unsigned>(problem.batch * plan.segments)), kThreads, 0, stream,
        kernel_args);
  });
}

}  // namespace litetopk::cuda_select
