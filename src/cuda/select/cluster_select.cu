// Radix select of few rows, each held on chip by a thread-block cluster (sm90): the row's CTAs
// merge their digit histograms through distributed shared memory, so the whole selection is one
// kernel node with no global workspace, no memset and no grid-wide barrier.
//
// Pipeline of cluster_select_kernel (a cluster of C CTAs per row; CTA r holds the contiguous slice
// [L r / C, L (r + 1) / C) of the row's range of L scores):
// 1. Load: the slice's scores (16-byte vectors, the unaligned ends one by one) become keys
//    (formats/score_keys.h; NaN is key 0) in shared memory, counted by their first digit as they
//    arrive.
// 2. Digits (11, 11 and 10 bits of an fp32 key; 11 and 5 of a 16-bit one): every CTA adds its
//    counts over DSMEM into the bins' owners (bin b: CTA b % C), the cluster meets at a barrier,
//    and each CTA gathers every bin from its owner and finds the same bin holding the k-th key
//    (DigitFinder). The next digit counts
//    only that bin's keys, from shared memory. It stops once the bin is taken whole or the key is
//    resolved. A row with at most k valid keys takes them all.
// 3. Write: each CTA counts its keys above the pivot and its ties (a thread a contiguous run), the
//    cluster exchanges the counts, and every thread writes its run's keys in index order at
//    offsets from exclusive scans over the block and the cluster: the ties with the smallest
//    indices win, in any mode. Padding (-1) fills a row with fewer than k valid keys.
#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>
#include <cub/block/block_scan.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/select/radix_digits.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
// Copies of the first digit's histogram (lane % kCopies picks one): float keys crowd into a few
// top bins, where one copy would serialize the atomics of a warp.
constexpr int kCopies = 4;
constexpr int kMaxCluster = 16;
constexpr int64_t kTargetKeysPerCta = 8192;
// 64 keys a thread, so that a slice and its alignment pad fit 68 a thread: 200 KB of shared memory.
constexpr int64_t kMaxKeysPerCta = 64 * kThreads;
constexpr int kKeysPerWord4 = 4;  // keys per 16-byte shared-memory access

constexpr int kMaxDigits = 3;  // 11, 11 and 10 bits of an fp32 key

struct ClusterShared {
  uint32_t copies[kCopies][kRadixBins];  // this CTA's counts of the current digit
  // The cluster's counts of the bins this CTA owns (bin b belongs to CTA b % C), one buffer per
  // digit: each is filled once, so no buffer is reused while another CTA may still read it.
  uint32_t owned[kMaxDigits][kRadixBins];
  uint32_t merged[kRadixBins];  // the cluster's counts of every bin, gathered from the owners
  // The keys follow: key of slice position i at keys[pad + i], zeros around.
};

// Distributed shared memory: the address of `local`'s counterpart in CTA `rank` of the cluster,
// a relaxed add to it, and a load from it.
__device__ __forceinline__ uint32_t cluster_address(const void* local, int rank) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
__device__ __forceinline__ void cluster_add(uint32_t remote, uint32_t value) {
  asm volatile("red.relaxed.cluster.shared::cluster.add.u32 [%0], %1;" ::"r"(remote), "r"(value)
               : "memory");
}
__device__ __forceinline__ uint32_t cluster_load(uint32_t remote) {
  uint32_t value;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(remote) : "memory");
  return value;
}

// Keys a thread holds for the write's runs (a multiple of 4) when a slice has `count` scores.
__host__ __device__ constexpr int64_t keys_per_thread(int64_t count) {
  const int64_t with_pad = count + kKeysPerWord4 - 1;
  const int64_t per = (with_pad + kThreads - 1) / kThreads;
  return (per + kKeysPerWord4 - 1) / kKeysPerWord4 * kKeysPerWord4;
}

int64_t shared_bytes_for(int64_t keys_per_cta) {
  return static_cast<int64_t>(sizeof(ClusterShared)) +
         keys_per_thread(keys_per_cta) * kThreads * static_cast<int64_t>(sizeof(uint32_t));
}

template <typename Traits>
__global__ void __launch_bounds__(kThreads, 2) cluster_select_kernel(const SelectArgs args) {
  using Finder = DigitFinder<kThreads>;
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  constexpr int kPer = Traits::kPerVector;
  constexpr int kKeyBits = kPer == 4 ? 32 : 16;
  constexpr int kFirstShift = kKeyBits - kRadixBits;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<ClusterShared*>(shared_raw);
  uint32_t* keys = reinterpret_cast<uint32_t*>(shared_raw + sizeof(ClusterShared));
  __shared__ typename Finder::Storage finder;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t cta_counts;  // this CTA's keys above the pivot | its ties << 16

  const cg::cluster_group cluster = cg::this_cluster();
  const auto members = static_cast<int>(cluster.num_blocks());
  const auto member = static_cast<int>(cluster.block_rank());
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x / members;
  const RowLayout<Traits> whole(args, row);
  const auto lo = static_cast<int32_t>(int64_t{whole.length} * member / members);
  const auto hi = static_cast<int32_t>(int64_t{whole.length} * (member + 1) / members);
  const int32_t count = hi - lo;
  const bool largest = args.largest;
  const auto k = static_cast<uint32_t>(args.k);

  // The slice as head + 16-byte vectors + tail, placed so that every vector lands on 16 bytes.
  const RowLayout<Traits> layout(whole.base + lo, count);
  const int32_t head = layout.head;
  const int32_t vectors = layout.num_vectors;
  const int32_t pad = (kKeysPerWord4 - head % kKeysPerWord4) % kKeysPerWord4;
  const auto per_thread = static_cast<int32_t>(keys_per_thread(count));
  const int32_t extent = per_thread * kThreads;

  for (int i = tid; i < kCopies * kRadixBins; i += kThreads) (&s.copies[0][0])[i] = 0;
  for (int i = tid; i < kMaxDigits * kRadixBins; i += kThreads) (&s.owned[0][0])[i] = 0;
  for (int i = tid; i < pad; i += kThreads) keys[i] = 0;
  for (int i = pad + count + tid; i < extent; i += kThreads) keys[i] = 0;
  __syncthreads();
  auto zeroed = cluster.barrier_arrive();  // no CTA adds to another's counts before they are zero

  // 1. Load.
  uint32_t* my_copy = s.copies[tid % kCopies];
  const auto count_first = [&](uint32_t key) {
    if (key != 0) atomicAdd(&my_copy[key >> kFirstShift], 1u);
  };
  for (int v0 = 0; v0 < vectors; v0 += kThreads * kUnroll) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + u * kThreads + tid;
      raw[u] = v < vectors ? layout.load_vector(v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + u * kThreads + tid;
      if (v >= vectors) break;
      uint32_t key[kPer];
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        key[e] = Traits::key(element_bits<Traits>(raw[u], e), largest);
        count_first(key[e]);
      }
      auto* out = reinterpret_cast<uint4*>(keys + pad + head + v * kPer);
#pragma unroll
      for (int w = 0; w < kPer / kKeysPerWord4; ++w) {
        out[w] = make_uint4(key[4 * w], key[4 * w + 1], key[4 * w + 2], key[4 * w + 3]);
      }
    }
  }
  for (int i = tid; i < layout.num_scalar(); i += kThreads) {
    const int32_t at = layout.scalar_index(i);
    const uint32_t key = layout.scalar_key(at, largest);
    keys[pad + at] = key;
    count_first(key);
  }
  __syncthreads();

  // 2. Digits: this CTA's counts go to the bins' owners, then every CTA gathers all bins.
  const auto merge = [&](int digit) {
    for (int i = tid; i < kRadixBins; i += kThreads) {
      uint32_t sum = 0;
#pragma unroll
      for (int copy = 0; copy < kCopies; ++copy) {
        sum += s.copies[copy][i];
        s.copies[copy][i] = 0;
      }
      if (sum != 0) cluster_add(cluster_address(&s.owned[digit][i], i % members), sum);
    }
    cluster.sync();
    for (int i = tid; i < kRadixBins; i += kThreads) {
      s.merged[i] = cluster_load(cluster_address(&s.owned[digit][i], i % members));
    }
    __syncthreads();
  };
  cluster.barrier_wait(std::move(zeroed));
  merge(0);
  uint32_t valid = 0;
  for (int i = tid; i < kRadixBins; i += kThreads) valid += s.merged[i];
  uint32_t unused = 0;
  uint32_t total = 0;
  Scan(scan).ExclusiveSum(valid, unused, total);
  const bool take_all = total <= k;
  uint32_t prefix = 0;  // the pivot: keys with (key >> top) == prefix are ties
  int top = kKeyBits;
  uint32_t rank = take_all ? 0 : k;  // ties to take
  uint32_t greater = take_all ? total : 0;
  if (!take_all) {
    for (int shift = kFirstShift, pass = 0;; shift = max(shift - kRadixBits, 0), ++pass) {
      if (pass > 0) {
        const uint32_t mask = (1u << (top - shift)) - 1u;
        for (int w = tid; w < extent / kKeysPerWord4; w += kThreads) {
          const uint4 word = reinterpret_cast<const uint4*>(keys)[w];
          const uint32_t quad[kKeysPerWord4] = {word.x, word.y, word.z, word.w};
#pragma unroll
          for (int e = 0; e < kKeysPerWord4; ++e) {
            if (quad[e] != 0 && (quad[e] >> top) == prefix) {
              atomicAdd(&my_copy[(quad[e] >> shift) & mask], 1u);
            }
          }
        }
        __syncthreads();
        merge(pass);
      }
      uint32_t above = 0;
      const uint32_t digit = Finder::find(finder, s.merged, rank, &above);
      rank -= above;
      greater += above;
      prefix = (prefix << (top - shift)) | digit;
      top = shift;
      const bool done = s.merged[digit] == rank || shift == 0;
      __syncthreads();  // merged is summed again by the next digit
      if (done) break;
    }
  }

  // 3. Write: the thread's run of keys[first, first + per_thread), in index order.
  const int32_t first = tid * per_thread;
  const auto is_above = [&](uint32_t key) {
    return key != 0 && (take_all || (key >> top) > prefix);
  };
  const auto is_tie = [&](uint32_t key) {
    return key != 0 && !take_all && (key >> top) == prefix;
  };
  uint32_t mine = 0;
  for (int32_t j = first; j < first + per_thread; j += kKeysPerWord4) {
    const uint4 word = *reinterpret_cast<const uint4*>(keys + j);
    const uint32_t quad[kKeysPerWord4] = {word.x, word.y, word.z, word.w};
#pragma unroll
    for (int e = 0; e < kKeysPerWord4; ++e) {
      mine += is_above(quad[e]) ? 1u : (is_tie(quad[e]) ? 1u << 16 : 0u);
    }
  }
  uint32_t before = 0;
  uint32_t cta_total = 0;
  __syncthreads();
  Scan(scan).ExclusiveSum(mine, before, cta_total);
  if (tid == 0) cta_counts = cta_total;
  cluster.sync();
  uint32_t above_slot = before & 0xffffu;  // the CTAs' counts are summed apart: a row's exceed 16 bits
  uint32_t tie_slot = before >> 16;
  for (int m = 0; m < member; ++m) {
    const uint32_t counts = *cluster.map_shared_rank(&cta_counts, m);
    above_slot += counts & 0xffffu;
    tie_slot += counts >> 16;
  }
  auto arrived = cluster.barrier_arrive();  // this CTA reads no other's shared memory after this
  for (int32_t j = first; j < first + per_thread; j += kKeysPerWord4) {
    const uint4 word = *reinterpret_cast<const uint4*>(keys + j);
    const uint32_t quad[kKeysPerWord4] = {word.x, word.y, word.z, word.w};
#pragma unroll
    for (int e = 0; e < kKeysPerWord4; ++e) {
      const auto index = static_cast<uint32_t>(lo + j + e - pad);
      if (is_above(quad[e])) {
        write_output<Traits>(args, row, static_cast<int32_t>(above_slot++),
                             keys::make_composite(quad[e], index));
      } else if (is_tie(quad[e])) {
        if (tie_slot < rank) {
          write_output<Traits>(args, row, static_cast<int32_t>(greater + tie_slot),
                               keys::make_composite(quad[e], index));
        }
        ++tie_slot;
      }
    }
  }
  if (take_all) {
    for (uint32_t slot = total + member * kThreads + tid; slot < k; slot += members * kThreads) {
      write_output<Traits>(args, row, static_cast<int32_t>(slot), keys::kEmptyComposite);
    }
  }
  cluster.barrier_wait(std::move(arrived));  // the others are done reading this CTA's shared memory
}

template <typename Traits>
const void* kernel_of() {
  return reinterpret_cast<const void*>(cluster_select_kernel<Traits>);
}

}  // namespace

ClusterPlan cluster_plan_for(const SelectProblem& problem, int cluster) {
  const int64_t per_cta = (std::max<int64_t>(problem.n, 1) + cluster - 1) / cluster;
  return ClusterPlan{cluster, static_cast<int>(shared_bytes_for(per_cta))};
}

ClusterPlan plan_cluster(const SelectProblem& problem) {
  ClusterPlan plan{0, 0};
  const int64_t n = std::max<int64_t>(problem.n, 1);
  int wanted = 1;
  while (wanted < kMaxCluster && n > kTargetKeysPerCta * wanted) wanted *= 2;
  for (int cluster = wanted; cluster >= 1; cluster /= 2) {
    if ((n + cluster - 1) / cluster > kMaxKeysPerCta) return plan;
    // Asked at the largest slice, so that one query per cluster size serves every row length
    // (a cluster that fits with the most shared memory fits with less).
    const auto most_bytes = static_cast<int>(shared_bytes_for(kMaxKeysPerCta));
    int clusters = 0;
    const Status fits = dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
      const void* kernel = kernel_of<decltype(traits)>();
      if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, most_bytes); !s) return s;
      return cuda_common::resident_clusters(kernel, kThreads, most_bytes, cluster, &clusters);
    });
    if (fits && clusters > 0) return cluster_plan_for(problem, cluster);
  }
  return plan;
}

Status launch_cluster(const SelectProblem& problem, const ClusterPlan& plan,
                      const SelectArgs& args, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    const void* kernel = kernel_of<decltype(traits)>();
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, plan.shared_bytes); !s) {
      return s;
    }
    SelectArgs kernel_args_copy = args;
    void* kernel_args[] = {&kernel_args_copy};
    return cuda_common::launch_clustered(
        kernel, dim3(static_cast<unsigned>(problem.batch * plan.cluster)), kThreads,
        plan.shared_bytes, plan.cluster, stream, kernel_args);
  });
}

}  // namespace litetopk::cuda_select
