// merge_rows_kernel: one block per row of merge_topk, an exact radix selection over the row's
// candidate composites (formats/merge_candidates.h), read straight from the shard lists in any
// layout.
//
// 1. Histogram the top 11-bit digit of every non-empty candidate and count them.
// 2. At most k non-empty candidates: every one is selected. Otherwise refine digit by digit
//    (DigitFinder over 11, 11, 10, 11, 11, 10 bits) until the bin of the k-th best composite holds
//    only selected entries, or all 64 bits are resolved.
// 3. Emit: composites above the pivot take output slots from one counter, those in its bin from
//    another (up to the ones still wanted), one atomic per warp; the slots past the selection
//    are padded (-1, NaN).
#include <cuda_runtime_api.h>

#include <cub/block/block_reduce.cuh>

#include "api/format.h"
#include "cuda/common/cuda_check.h"
#include "cuda/merge/merge_kernels.h"
#include "cuda/select/radix_digits.cuh"
#include "formats/merge_candidates.h"

namespace litetopk::cuda_merge {
namespace {

using cuda_select::DigitFinder;
using cuda_select::kRadixBins;

constexpr int kThreads = 256;

// Calls fn(composite) for every slot of row `row`'s lists up to each list's length (empty slots
// as the empty composite). The loop bounds are the row's, so all lanes of a warp run every step.
template <typename Fn>
__device__ __forceinline__ void for_each_candidate(const MergeLists& lists, int64_t row, Fn&& fn) {
  for (int64_t s = 0; s < lists.shards; ++s) {
    const int64_t length = merge::list_length(lists.counts, row * lists.shards + s, lists.k_in);
    const int64_t base = row * lists.row_stride + s * lists.shard_stride;
    for (int64_t first = 0; first < length; first += kThreads) {
      const int64_t j = first + threadIdx.x;
      uint64_t c = keys::kEmptyComposite;
      if (j < length) {
        c = merge::candidate_composite(__float_as_uint(lists.values[base + j]),
                                       lists.indices[base + j], true, lists.largest);
      }
      fn(c);
    }
  }
}

// Output slot (from `counter`, in shared memory) of each lane that wants one: one atomic per
// warp. Every lane of the warp calls it.
__device__ __forceinline__ uint32_t warp_slot(bool want, uint32_t* counter) {
  const unsigned lanes = __ballot_sync(0xffffffffu, want);
  if (lanes == 0) return 0;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int leader = __ffs(lanes) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, static_cast<uint32_t>(__popc(lanes)));
  base = __shfl_sync(0xffffffffu, base, leader);
  return base + static_cast<uint32_t>(__popc(lanes & ((1u << lane) - 1u)));
}

__global__ void __launch_bounds__(kThreads)
    merge_rows_kernel(const MergeLists lists, const cuda_select::SelectArgs out) {
  using Finder = DigitFinder<kThreads>;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ uint32_t histogram[kRadixBins];
  __shared__ typename Finder::Storage finder;
  __shared__ typename Reduce::TempStorage reduce;
  __shared__ uint32_t non_empty;
  __shared__ uint32_t above_slots;
  __shared__ uint32_t tie_slots;
  const int64_t row = blockIdx.x;
  const auto k = static_cast<uint32_t>(out.k);

  // 1-2. The pivot: (c >> shift) > prefix is selected (count_greater of them), == prefix ties,
  // of which `wanted` are selected.
  uint64_t prefix = 0;
  int shift = 64;
  uint32_t count_greater = 0;
  uint32_t wanted = k;
  uint32_t total = 0;
  bool take_all = false;
  while (shift > 0) {
    const int width = cuda_select::digit_width(shift);
    const int next = shift - width;
    const uint64_t mask = (uint64_t{1} << width) - 1;
    for (int i = threadIdx.x; i < kRadixBins; i += kThreads) histogram[i] = 0;
    __syncthreads();
    uint32_t counted = 0;
    for_each_candidate(lists, row, [&](uint64_t c) {
      if (c != keys::kEmptyComposite && cuda_select::matches_prefix(c, prefix, shift)) {
        atomicAdd(&histogram[(c >> next) & mask], 1u);
        ++counted;
      }
    });
    if (shift == 64) {
      const uint32_t sum = Reduce(reduce).Sum(counted);
      if (threadIdx.x == 0) non_empty = sum;
    }
    __syncthreads();
    if (shift == 64) {
      total = non_empty;
      if (total <= k) {
        take_all = true;
        break;
      }
    }
    uint32_t above = 0;
    const uint32_t digit = Finder::find(finder, histogram, wanted, &above);
    const uint32_t in_bin = histogram[digit];
    count_greater += above;
    wanted -= above;
    prefix = (prefix << width) | digit;
    shift = next;
    __syncthreads();  // every thread has read the histogram before the next pass clears it
    if (in_bin == wanted) break;
  }

  // 3. Emit.
  if (threadIdx.x == 0) {
    above_slots = 0;
    tie_slots = 0;
  }
  __syncthreads();
  for_each_candidate(lists, row, [&](uint64_t c) {
    const bool non_empty_slot = c != keys::kEmptyComposite;
    const uint64_t v = take_all ? 0 : c >> shift;
    const bool greater = non_empty_slot && (take_all || v > prefix);
    const bool tie = non_empty_slot && !take_all && v == prefix;
    const uint32_t slot = warp_slot(greater, &above_slots);
    if (greater) {
      cuda_select::write_output<cuda_select::Float32Scores>(out, row, static_cast<int32_t>(slot),
                                                           c);
    }
    const uint32_t tie_slot = warp_slot(tie, &tie_slots);
    if (tie && tie_slot < wanted) {
      cuda_select::write_output<cuda_select::Float32Scores>(
          out, row, static_cast<int32_t>(count_greater + tie_slot), c);
    }
  });
  const uint32_t selected = take_all ? total : k;
  for (uint32_t slot = selected + threadIdx.x; slot < k; slot += kThreads) {
    cuda_select::write_output<cuda_select::Float32Scores>(out, row, static_cast<int32_t>(slot),
                                                         keys::kEmptyComposite);
  }
}

}  // namespace

Status launch_merge_rows(const MergeLists& lists, const cuda_select::SelectArgs& out,
                         int64_t batch, cudaStream_t stream) {
  if (batch == 0) return Status::ok();
  if (batch > 0x7fffffff) {
    return Status(StatusCode::kUnsupported,
                  detail::concat("batch must be <= 2147483647 on the GPU (one block per row), got ",
                                 batch));
  }
  merge_rows_kernel<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(lists, out);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_merge
