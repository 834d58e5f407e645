// The gated decode path's selection: the exact top-k of each row's candidates (every visible
// score at or above the row's bound, so the row's top-k is among them), and this step's positions
// into the decode state for the next step's bound.
//
// Pipeline of decode_select_kernel (grid: one block per row; a dependent launch of the gated
// kernel):
// 1. The row's candidates lie in the gated blocks' regions: their counts' prefix sums (one warp)
//    give n and each region's first rank; the loops below go region by region (a warp per
//    region, or the whole block per region when there are fewer regions than warps). At most k:
//    all are selected.
// 2. Otherwise the keys (order-preserving, formats/score_keys.h) are staged in shared memory when
//    n fits there (a few thousand on coherent steps; else they are read from the candidate
//    buffer each pass), with their smallest and largest key.
// 3. A radix select within that range: the window [base, base + 2^shift) holding the k-th key
//    (at first the candidates' whole range) is cut into up to 2048 bins of its low bits; a
//    shared-memory histogram of the keys in the window, one warp finds the bin holding the k-th
//    (paged_radix_select.cuh), and the window narrows to it. The candidates lie just above the
//    gate, so the bins spread them evenly (no atomics piling onto a few bins of the key's top
//    bits); done when the bin holds exactly the entries still needed or one key value.
// 4. Emit: entries above the window, then ties up to k, at slots reserved by shared atomics:
//    positions to indices and to the state, scores to values; -1 padding (values NaN, state -1)
//    past the selected.
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>

#include "api/format.h"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/warp_scan.cuh"
#include "cuda/indexer/decode_state_kernels.h"
#include "cuda/indexer/paged_radix_select.cuh"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kSelectThreads = 1024;
constexpr int kCachedKeys = 16384;  // candidates whose keys are staged in shared memory
constexpr int kDigitBits = 11;
constexpr int kMaxRegions = 1024;  // gated blocks per request (launch_decode_select checks)

struct SelectShared {
  uint32_t keys[kCachedKeys];
  uint32_t starts[kMaxRegions + 1];  // candidates before each region
  uint32_t histogram[radix::kBins];
  uint32_t lowest;
  uint32_t highest;
  uint32_t base;     // the window [base, base + 2^shift) holds the rank-th key
  int32_t shift;
  uint32_t rank;     // entries still needed in the window
  uint32_t above;    // entries above the window (all selected)
  bool done;
  uint32_t above_used;
  uint32_t ties_used;
};

struct SelectParams {
  const uint32_t* counts;
  const float* candidate_scores;
  const int32_t* candidate_positions;
  int32_t splits;
  int32_t span;
  int32_t k;
  int32_t* indices;
  float* values;
  int32_t* state;
};

// Bits needed to count `width` - 1 (0 for a width of 1).
__device__ __forceinline__ int width_bits(uint64_t width) {
  return width <= 1 ? 0 : 64 - __clzll(static_cast<long long>(width - 1));
}

__global__ void __launch_bounds__(kSelectThreads)
    decode_select_kernel(const SelectParams p) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<SelectShared*>(shared_raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int64_t r = blockIdx.x;
  sm90::wait_for_prerequisite_grids();
  sm90::allow_dependent_grids();
  // 1.
  const int64_t row_base = r * p.splits * int64_t{p.span};
  for (int x = tid; x < p.splits; x += kSelectThreads) {
    s.starts[x] = min(__ldcg(p.counts + r * p.splits + x), static_cast<uint32_t>(p.span));
  }
  __syncthreads();
  if (tid < 32) {  // in place: each region's count becomes the candidates before it
    const int per_lane = (p.splits + 31) / 32;
    const int first = lane * per_lane;
    const int last = min(first + per_lane, p.splits);
    uint32_t local = 0;
    for (int x = first; x < last; ++x) local += s.starts[x];
    const uint32_t inclusive = cuda_common::warp_inclusive_sum(local, lane);
    uint32_t start = inclusive - local;
    for (int x = first; x < last; ++x) {
      const uint32_t count = s.starts[x];
      s.starts[x] = start;
      start += count;
    }
    if (lane == 31) s.starts[p.splits] = inclusive;
  }
  __syncthreads();
  const int32_t n = static_cast<int32_t>(s.starts[p.splits]);
  const float* scores = p.candidate_scores;
  const int32_t* positions = p.candidate_positions;
  const bool select = n > p.k;
  const bool cached = select && n <= kCachedKeys;
  // fn(rank i among the row's candidates, its offset in the buffers), region by region: with at
  // least a region per warp, warp w takes regions w, w + 32, ..., its lanes a region's
  // candidates; with fewer (large batches: a few gated blocks per request), every thread takes
  // part in each region in turn.
  const int warp = tid / 32;
  constexpr int kWarps = kSelectThreads / 32;
  auto for_each = [&](auto&& fn) {
    const bool by_warp = p.splits >= kWarps;
    const int step = by_warp ? 32 : kSelectThreads;
    for (int x = by_warp ? warp : 0; x < p.splits; x += by_warp ? kWarps : 1) {
      const int32_t first = static_cast<int32_t>(s.starts[x]);
      const int32_t count = static_cast<int32_t>(s.starts[x + 1]) - first;
      const int64_t base = row_base + int64_t{x} * p.span;
      for (int32_t i = by_warp ? lane : tid; i < count; i += step) fn(first + i, base + i);
    }
  };
  auto key_at = [&](int32_t i, int64_t at) {
    return cached ? s.keys[i] : radix::score_key(__ldcg(scores + at));
  };
  if (tid == 0) {
    s.lowest = UINT_MAX;
    s.highest = 0;
    s.above_used = 0;
    s.ties_used = 0;
  }
  __syncthreads();
  // 2.
  if (select) {
    uint32_t lowest = UINT_MAX;
    uint32_t highest = 0;
    for_each([&](int32_t i, int64_t at) {
      const uint32_t key = radix::score_key(__ldcg(scores + at));
      if (cached) s.keys[i] = key;
      lowest = min(lowest, key);
      highest = max(highest, key);
    });
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      lowest = min(lowest, __shfl_xor_sync(0xffffffffu, lowest, offset));
      highest = max(highest, __shfl_xor_sync(0xffffffffu, highest, offset));
    }
    if (lane == 0) {
      atomicMin(&s.lowest, lowest);
      atomicMax(&s.highest, highest);
    }
  }
  __syncthreads();
  if (tid == 0) {
    s.base = s.lowest;
    s.shift = select ? width_bits(uint64_t{s.highest} - s.lowest + 1) : 0;
    s.rank = select ? static_cast<uint32_t>(p.k) : 0u;
    s.above = select ? 0u : static_cast<uint32_t>(n);
    s.done = !select || s.shift == 0;
  }
  __syncthreads();
  // 3.
  while (!s.done) {
    const uint32_t base = s.base;
    const int shift = s.shift;
    const int sub = shift > kDigitBits ? shift - kDigitBits : 0;
    const uint64_t width = uint64_t{1} << shift;
    const int bins = max(32, 1 << (shift - sub));
    for (int i = tid; i < bins; i += kSelectThreads) s.histogram[i] = 0;
    __syncthreads();
    auto count = [&](uint32_t key) {
      const uint64_t offset = uint64_t{key} - base;
      if (key >= base && offset < width) atomicAdd(&s.histogram[offset >> sub], 1u);
    };
    if (cached) {
      for (int32_t i = tid; i < n; i += kSelectThreads) count(s.keys[i]);
    } else {
      for_each([&](int32_t, int64_t at) { count(radix::score_key(__ldcg(scores + at))); });
    }
    __syncthreads();
    if (tid < 32) {
      uint32_t digit, above, in_bin, total;
      radix::find_digit(s.histogram, bins, s.rank, lane, &digit, &above, &in_bin, &total);
      if (lane == 0) {
        s.base = base + (digit << sub);
        s.shift = sub;
        s.above += above;
        s.rank -= above;
        s.done = sub == 0 || in_bin == s.rank;
      }
    }
    __syncthreads();
  }
  // 4. Without a selection (n <= k) the window is empty and every candidate is "above".
  const uint64_t top = select ? uint64_t{s.base} + (uint64_t{1} << s.shift) : 0;
  const uint32_t base = select ? s.base : 0u;
  const uint32_t rank = s.rank;
  const uint32_t above_count = s.above;
  const int64_t out = r * p.k;
  for_each([&](int32_t i, int64_t at) {
    const uint32_t key = select ? key_at(i, at) : 1u;
    uint32_t slot;
    if (key >= top) {
      slot = cuda_common::warp_aggregated_slot(&s.above_used);
    } else if (key >= base) {
      const uint32_t t = cuda_common::warp_aggregated_slot(&s.ties_used);
      if (t >= rank) return;
      slot = above_count + t;
    } else {
      return;
    }
    const int32_t position = __ldcg(positions + at);
    p.indices[out + slot] = position;
    if (p.values != nullptr) p.values[out + slot] = __ldcg(scores + at);
    p.state[out + slot] = position;
  });
  for (int32_t slot = static_cast<int32_t>(above_count + rank) + tid; slot < p.k;
       slot += kSelectThreads) {
    p.indices[out + slot] = -1;
    if (p.values != nullptr) p.values[out + slot] = NAN;
    p.state[out + slot] = -1;
  }
}

}  // namespace

Status launch_decode_select(const PagedIndexerProblem& problem, const DecodeBuffers& buffers,
                            cudaStream_t stream) {
  const auto rows = static_cast<unsigned>(problem.batch * problem.next_n);
  if (rows == 0) return Status::ok();
  if (buffers.splits > kMaxRegions) {
    return Status(StatusCode::kUnsupported,
                  detail::concat("the gated paged indexer takes at most ", kMaxRegions,
                                 " blocks per request, planned ", buffers.splits));
  }
  const void* kernel = reinterpret_cast<const void*>(decode_select_kernel);
  const int smem = static_cast<int>(sizeof(SelectShared));
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  SelectParams params{buffers.counts,     buffers.candidate_scores,
                      buffers.candidate_positions, buffers.splits, buffers.span,
                      static_cast<int32_t>(problem.k), problem.indices, problem.values,
                      buffers.next};
  void* kernel_args[] = {&params};
  return cuda_common::launch_dependent(kernel, dim3(rows), kSelectThreads, smem,
                                       /*dependent=*/true, stream, kernel_args);
}

}  // namespace litetopk::cuda_indexer
