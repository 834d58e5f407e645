// Radix select baseline: robust on any input and any k, a few passes over the scores.
//
// Pipeline (per row; histogram and emit passes use `segments` blocks per row):
// 1. radix_init_kernel: reset the row's state and fill its output with -1 padding.
// 2. Per digit, most significant first (11/11/10 bits of the key; and of the index too when
//    deterministic): radix_histogram_kernel counts the row's entries that match the digits chosen
//    so far, radix_choose_kernel picks the digit holding the k-th best entry. A row is done early
//    when the chosen bin is taken whole, or when it has at most k valid entries.
// 3. radix_emit_kernel writes the entries above the pivot and the first ties needed at it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

struct RadixRowState {
  uint64_t prefix;
  int32_t top;             // bits at and above `top` are resolved
  uint32_t rank;           // entries still to take from the bin being refined
  uint32_t greater;        // entries already known to be selected
  uint32_t done;
  uint32_t slot_counter;   // emit: slots taken by entries above the pivot
  uint32_t tie_counter;    // emit: ties seen
};

template <typename Traits>
__global__ void __launch_bounds__(256)
    radix_init_kernel(const SelectArgs args, RadixRowState* states, uint32_t* histograms) {
  const int64_t row = blockIdx.x;
  if (threadIdx.x == 0) {
    states[row] = RadixRowState{0, 64, static_cast<uint32_t>(args.k), 0, 0, 0, 0};
  }
  for (int i = threadIdx.x; i < kRadixBins; i += blockDim.x) histograms[row * kRadixBins + i] = 0;
  for (int32_t slot = threadIdx.x; slot < args.k; slot += blockDim.x) {
    write_output<Traits>(args, row, slot, keys::kEmptyComposite);
  }
}

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    radix_histogram_kernel(const SelectArgs args, const RadixRowState* states,
                           uint32_t* histograms, int segments) {
  __shared__ uint32_t histogram[kRadixBins];
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  const RadixRowState state = states[row];
  if (state.done) return;
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) histogram[i] = 0;
  __syncthreads();
  const int width = digit_width(state.top);
  const int shift = state.top - width;
  const uint32_t mask = (1u << width) - 1;
  const RowLayout<Traits> layout(args, row);
  for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, segment, segments,
                                          [&](uint32_t key, uint32_t index) {
    const uint64_t c = keys::make_composite(key, index);
    if (key != 0 && matches_prefix(c, state.prefix, state.top)) {
      atomicAdd(&histogram[(c >> shift) & mask], 1u);
    }
  });
  __syncthreads();
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
    if (histogram[i] != 0) atomicAdd(&histograms[row * kRadixBins + i], histogram[i]);
  }
}

__global__ void __launch_bounds__(kThreads)
    radix_choose_kernel(RadixRowState* states, uint32_t* histograms, bool deterministic) {
  using Finder = DigitFinder<kThreads>;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ uint32_t histogram[kRadixBins];
  __shared__ typename Finder::Storage finder;
  __shared__ typename Reduce::TempStorage reduce;
  __shared__ uint32_t total;
  const int64_t row = blockIdx.x;
  RadixRowState state = states[row];
  if (state.done) return;
  uint32_t local = 0;
  for (int i = threadIdx.x; i < kRadixBins; i += kThreads) {
    histogram[i] = histograms[row * kRadixBins + i];
    histograms[row * kRadixBins + i] = 0;  // ready for the next digit
    local += histogram[i];
  }
  const uint32_t sum = Reduce(reduce).Sum(local);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  if (state.top == 64 && total <= state.rank) {
    // At most k valid entries: take every one (key >= 1 means (c >> 32) > 0).
    if (threadIdx.x == 0) states[row] = RadixRowState{0, 32, 0, total, 1, 0, 0};
    return;
  }
  uint32_t above = 0;
  const uint32_t digit = Finder::find(finder, histogram, state.rank, &above);
  if (threadIdx.x == 0) {
    const int width = digit_width(state.top);
    state.rank -= above;
    state.greater += above;
    state.prefix = (state.prefix << width) | digit;
    state.top -= width;
    state.done = histogram[digit] == state.rank || state.top == final_shift(deterministic);
    states[row] = state;
  }
}

template <typename Traits>
__global__ void __launch_bounds__(kThreads)
    radix_emit_kernel(const SelectArgs args, RadixRowState* states, int segments) {
  const int64_t row = blockIdx.x / segments;
  const int segment = static_cast<int>(blockIdx.x % segments);
  RadixRowState* state = &states[row];
  const Pivot pivot{state->prefix, state->top, state->greater};
  const uint32_t ties_wanted = state->rank;
  const RowLayout<Traits> layout(args, row);
  for_each_key<Traits, kThreads, kUnroll>(layout, args.largest, segment, segments,
                                          [&](uint32_t key, uint32_t index) {
    if (key == 0) return;
    const uint64_t c = keys::make_composite(key, index);
    const int order = compare_to_pivot(c, pivot);
    if (order > 0) {
      write_output<Traits>(args, row, static_cast<int32_t>(atomicAdd(&state->slot_counter, 1u)), c);
    } else if (order == 0) {
      const uint32_t tie = atomicAdd(&state->tie_counter, 1u);
      if (tie < ties_wanted) {
        write_output<Traits>(args, row, static_cast<int32_t>(pivot.count_greater + tie), c);
      }
    }
  });
}

}  // namespace

RadixPlan plan_radix(const SelectProblem& problem, const cuda_common::DeviceShape& device) {
  // About four blocks per SM in all, each with at least 32K elements.
  const int64_t slots = int64_t{device.sm_count} * 4;
  const int64_t wanted = std::max<int64_t>(1, slots / std::max<int64_t>(problem.batch, 1));
  const int64_t max_segments = std::max<int64_t>(1, problem.n / 32768);
  return {static_cast<int>(std::min(wanted, max_segments))};
}

RadixWorkspace carve_radix(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem) {
  RadixWorkspace ws{};
  ws.row_states = carver.take<RadixRowState>(problem.batch);
  ws.histograms = carver.take<uint32_t>(problem.batch * kRadixBins);
  return ws;
}

Status launch_radix(const SelectProblem& problem, const RadixPlan& plan, const SelectArgs& args,
                    const RadixWorkspace& ws, cudaStream_t stream) {
  auto* states = static_cast<RadixRowState*>(ws.row_states);
  const auto rows = static_cast<unsigned>(problem.batch);
  const auto blocks = static_cast<unsigned>(problem.batch * plan.segments);
  const int digits = 64 - final_shift(problem.deterministic) > 32 ? 6 : 3;
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    radix_init_kernel<Traits><<<rows, 256, 0, stream>>>(args, states, ws.histograms);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    for (int d = 0; d < digits; ++d) {
      radix_histogram_kernel<Traits>
          <<<blocks, kThreads, 0, stream>>>(args, states, ws.histograms, plan.segments);
      LITETOPK_CUDA_TRY(cudaPeekAtLastError());
      radix_choose_kernel<<<rows, kThreads, 0, stream>>>(states, ws.histograms,
                                                         problem.deterministic);
      LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    }
    radix_emit_kernel<Traits><<<blocks, kThreads, 0, stream>>>(args, states, plan.segments);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace litetopk::cuda_select
