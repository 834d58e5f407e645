// Radix select of short rows held in registers: one CTA of kThreads threads a row. The row's
// 16-byte vectors go round the threads (thread t holds vectors t, t + kThreads, ...: P = 8, 16 or
// 32 keys a thread, rows of up to 16K entries), so that a warp's loads and writes cover contiguous
// runs of the row and of the output. No shared-memory copy of the row, no workspace, one kernel
// node.
//
// Pipeline of register_select_kernel:
// 1. Load: the thread's vectors of scores (element by element when the row's range does not start
//    on 16 bytes, and past the last whole vector) become keys (formats/score_keys.h; NaN and
//    entries past the row's end are key 0), each valid key counted by its first digit (11 bits)
//    into one of kCopies shared histograms and by a per-warp sum into the row's count of valid
//    keys.
// 2. Digits: the copies are summed and DigitFinder finds the bin of the k-th key; each further
//    digit (11 and 10 bits of an fp32 key, 5 of a 16-bit one) counts only the keys of that bin,
//    straight from the registers. A bin taken whole, or the last digit, ends it; a row with at most
//    k valid keys takes them all.
// 3. Write: for each of its vectors each thread counts its keys above the pivot and its ties; a
//    warp scan per vector and one scan of the warps' totals (vector by vector, warp by warp: index
//    order) place them, and every thread writes its keys at their slots: the ties with the
//    smallest indices win, in any mode. Padding (-1) fills a row with fewer than k valid keys.
#include <cuda_runtime_api.h>

#include <cub/warp/warp_scan.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// Copies of the first digit's histogram (lane % kCopies picks one): float keys crowd into a few
// top bins, where one copy would serialize the atomics of a warp. Copies 1 and 2 are the later
// digits' histograms.
constexpr int kCopies = 4;
constexpr int kMaxPerThread = 32;
constexpr int kWords4 = kRadixBins / 4;  // 16-byte words of one histogram
static_assert(kWords4 == kThreads, "a thread sums one 16-byte word of the copies");

template <typename Traits, int kPerThread>
__global__ void __launch_bounds__(kThreads, kPerThread <= 16 ? 2 : 1)
    register_select_kernel(const SelectArgs args) {
  using Finder = DigitFinder<kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  using WarpScan = cub::WarpScan<uint32_t>;
  constexpr int kPer = Traits::kPerVector;
  constexpr int kVectors = kPerThread / kPer;  // a thread's 16-byte vectors
  constexpr int kKeyBits = kPer == 4 ? 32 : 16;
  constexpr int kFirstShift = kKeyBits - kRadixBits;
  static_assert(kPerThread % kPer == 0, "a thread holds whole vectors");
  __shared__ __align__(16) uint32_t copies[kCopies][kRadixBins];
  __shared__ typename Finder::Storage finder;
  __shared__ typename WarpScan::TempStorage warp_scan[kWarps];
  __shared__ uint32_t vector_counts[kVectors][kWarps];  // then their exclusive sums
  __shared__ uint32_t valid_count;

  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const bool largest = args.largest;
  const auto k = static_cast<uint32_t>(args.k);
  const RowLayout<Traits> layout(args, row);
  const int warp = tid / 32;
  const int lane = tid % 32;
  // The row position of key j * kPer + e of this thread.
  const auto entry = [&](int j, int e) { return (j * kThreads + tid) * kPer + e; };

  // 1. Load (issued before the counts are zeroed).
  uint32_t key[kPerThread];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int32_t v = j * kThreads + tid;
    if (layout.head == 0 && v < layout.num_vectors) {
      const uint4 raw = layout.load_vector(v);
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        key[j * kPer + e] = Traits::key(element_bits<Traits>(raw, e), largest);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int32_t at = entry(j, e);
        key[j * kPer + e] = at < layout.length ? layout.scalar_key(at, largest) : 0u;
      }
    }
  }
  reinterpret_cast<uint4*>(&copies[0][0])[tid] = make_uint4(0, 0, 0, 0);
  reinterpret_cast<uint4*>(&copies[1][0])[tid] = make_uint4(0, 0, 0, 0);
  reinterpret_cast<uint4*>(&copies[2][0])[tid] = make_uint4(0, 0, 0, 0);
  reinterpret_cast<uint4*>(&copies[3][0])[tid] = make_uint4(0, 0, 0, 0);
  if (tid == 0) valid_count = 0;
  __syncthreads();
  uint32_t* const my_copy = copies[tid % kCopies];
  uint32_t valid = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    if (key[i] != 0) {
      atomicAdd(&my_copy[key[i] >> kFirstShift], 1u);
      ++valid;
    }
  }
  valid = __reduce_add_sync(0xffffffffu, valid);
  if (tid % 32 == 0 && valid != 0) atomicAdd(&valid_count, valid);
  __syncthreads();

  // 2. Digits. Thread t sums bins [4 t, 4 t + 4) of the copies into copies[0] and clears them in
  //    copies 1 and 2 for the later digits.
  const uint32_t total = valid_count;
  const bool take_all = total <= k;
  uint32_t prefix = 0;  // the pivot: keys with (key >> top) == prefix are ties
  int top = kKeyBits;
  uint32_t rank = take_all ? 0 : k;  // ties to take
  uint32_t greater = take_all ? total : 0;
  if (!take_all) {
    uint4 sum = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int copy = 0; copy < kCopies; ++copy) {
      const uint4 c = reinterpret_cast<const uint4*>(copies[copy])[tid];
      sum = make_uint4(sum.x + c.x, sum.y + c.y, sum.z + c.z, sum.w + c.w);
    }
    reinterpret_cast<uint4*>(copies[0])[tid] = sum;
    reinterpret_cast<uint4*>(copies[1])[tid] = make_uint4(0, 0, 0, 0);
    reinterpret_cast<uint4*>(copies[2])[tid] = make_uint4(0, 0, 0, 0);
    __syncthreads();
    for (int shift = kFirstShift, pass = 0;; shift = max(shift - kRadixBits, 0), ++pass) {
      uint32_t* const histogram = copies[pass];
      if (pass > 0) {
        const uint32_t mask = (1u << (top - shift)) - 1u;
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
          if (key[i] != 0 && (key[i] >> top) == prefix) {
            atomicAdd(&histogram[(key[i] >> shift) & mask], 1u);
          }
        }
        __syncthreads();
      }
      uint32_t above = 0;
      const uint32_t digit = Finder::find(finder, histogram, rank, &above);
      rank -= above;
      greater += above;
      prefix = (prefix << (top - shift)) | digit;
      top = shift;
      if (histogram[digit] == rank || shift == 0) break;
    }
  }

  // 3. Write.
  const auto is_above = [&](uint32_t c) {
    return c != 0 && (take_all || (c >> top) > prefix);
  };
  const auto is_tie = [&](uint32_t c) { return c != 0 && !take_all && (c >> top) == prefix; };
  // A vector's count: 1 for each key above the pivot, 1 << 16 for each tie (a row holds fewer than
  // 2^16 keys).
  uint32_t before[kVectors];  // this thread's vector j: the counts before it in its warp
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    uint32_t mine = 0;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const uint32_t c = key[j * kPer + e];
      mine += is_above(c) ? 1u : (is_tie(c) ? 1u << 16 : 0u);
    }
    uint32_t warp_total = 0;
    WarpScan(warp_scan[warp]).ExclusiveSum(mine, before[j], warp_total);
    if (lane == 0) vector_counts[j][warp] = warp_total;
  }
  __syncthreads();
  if (warp == 0) {
    // Exclusive sums of the totals in index order (vector j of every warp, then vector j + 1).
    uint32_t* const totals = &vector_counts[0][0];
    uint32_t carry = 0;
#pragma unroll
    for (int at = 0; at < kVectors * kWarps; at += 32) {
      const uint32_t count = at + lane < kVectors * kWarps ? totals[at + lane] : 0u;
      uint32_t exclusive = 0;
      uint32_t chunk_total = 0;
      WarpScan(warp_scan[0]).ExclusiveSum(count, exclusive, chunk_total);
      if (at + lane < kVectors * kWarps) totals[at + lane] = carry + exclusive;
      carry += chunk_total;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const uint32_t slots = vector_counts[j][warp] + before[j];
    uint32_t above_slot = slots & 0xffffu;
    uint32_t tie_slot = slots >> 16;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const uint32_t c = key[j * kPer + e];
      const auto index = static_cast<uint32_t>(entry(j, e));
      if (is_above(c)) {
        write_output<Traits>(args, row, static_cast<int32_t>(above_slot++),
                             keys::make_composite(c, index));
      } else if (is_tie(c)) {
        if (tie_slot < rank) {
          write_output<Traits>(args, row, static_cast<int32_t>(greater + tie_slot),
                               keys::make_composite(c, index));
        }
        ++tie_slot;
      }
    }
  }
  if (take_all) {
    for (uint32_t slot = total + tid; slot < k; slot += kThreads) {
      write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::kEmptyComposite);
    }
  }
}

template <int kPerThread>
Status launch_with(const SelectProblem& problem, const SelectArgs& args, cudaStream_t stream) {
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    register_select_kernel<decltype(traits), kPerThread>
        <<<static_cast<unsigned>(problem.batch), kThreads, 0, stream>>>(args);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace

RegisterPlan plan_register(const SelectProblem& problem) {
  for (int per_thread = 8; per_thread <= kMaxPerThread; per_thread *= 2) {
    if (problem.n <= int64_t{kThreads} * per_thread) return RegisterPlan{per_thread};
  }
  return RegisterPlan{0};
}

Status launch_register(const SelectProblem& problem, const RegisterPlan& plan,
                       const SelectArgs& args, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  switch (plan.per_thread) {
    case 8: return launch_with<8>(problem, args, stream);
    case 16: return launch_with<16>(problem, args, stream);
    default: return launch_with<kMaxPerThread>(problem, args, stream);
  }
}

}  // namespace litetopk::cuda_select
