// Radix select of few rows, each held on chip by a thread-block cluster (sm90): the row's CTAs
// merge their digit histograms through distributed shared memory, so the whole selection is one
// kernel node with no global workspace, no memset and no grid-wide barrier.
//
// Pipeline of cluster_select_kernel (a cluster of C CTAs per row; CTA r holds the contiguous slice
// [L r / C, L (r + 1) / C) of the row's range of L scores):
// 1. Load: the slice's scores (16-byte vectors, the unaligned ends one by one) become keys
//    (formats/score_keys.h; NaN is key 0) in shared memory, counted by their first digit as they
//    arrive.
// 2. First digit (11 bits): every CTA adds its counts over DSMEM into the bins' owners (runs of
//    32 bins round the cluster), the cluster meets at a barrier, and each CTA gathers every bin
//    from its owner and finds the same bin holding the k-th key (DigitFinder). A row with at
//    most k valid keys takes them all; a bin taken whole ends the selection.
// 3. Gather (fp32 keys, or clusters of 8 or more, when that bin holds at most kGatherCapacity
//    keys, the usual case): each CTA counts its keys of the bin and above it (one block scan
//    places each thread's), compacts the bin's at an offset read from the lower ranks' counts
//    and copies them into every CTA of the cluster, with its count of keys above the bin; one
//    cluster barrier, and every CTA resolves the remaining digits (11 and 10 bits of an fp32
//    key, 5 of a 16-bit one) alone over the gathered keys. Otherwise each further digit counts
//    the bin's keys in shared memory and merges as in step 2, until the bin is taken whole or
//    the key is resolved.
// 4. Write: each CTA counts its keys above the pivot and its ties (a thread a contiguous run); the
//    lower ranks' counts come from the gathered keys (or, without a gather, from a cluster
//    exchange), and every thread writes its run's keys in index order at offsets from exclusive
//    scans over the block and the cluster: the ties with the smallest indices win, in any mode.
//    Padding (-1) fills a row with fewer than k valid keys.
#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
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
constexpr int kMinHalvedCluster = 8;
constexpr int64_t kFilledCtas = 128;
// 64 keys a thread, so that a slice and its alignment pad fit 68 a thread: 200 KB of shared memory.
constexpr int64_t kMaxKeysPerCta = 64 * kThreads;
constexpr int kKeysPerWord4 = 4;  // keys per 16-byte shared-memory access

constexpr int kMaxDigits = 3;  // 11, 11 and 10 bits of an fp32 key
// The gathered keys of the k-th key's first-digit bin live in copies[1 ..], free after the first
// merge.
constexpr int kGatherCapacity = (kCopies - 1) * kRadixBins;

struct ClusterShared {
  // This CTA's counts of the current digit; after the first merge, copies[0] holds this CTA's
  // own counts of the first digit and copies[1 ..] the gathered keys.
  uint32_t copies[kCopies][kRadixBins];
  // The cluster's counts of the bins this CTA owns (bin_owner), one buffer per
  // digit: each is filled once, so no buffer is reused while another CTA may still read it.
  uint32_t owned[kMaxDigits][kRadixBins];
  uint32_t merged[kRadixBins];  // the cluster's counts of every bin, gathered from the owners
  uint32_t above_bin[kMaxCluster];  // after a gather: CTA m's keys above the gathered bin
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
__device__ __forceinline__ uint4 cluster_load4(uint32_t remote) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}
__device__ __forceinline__ void cluster_store(uint32_t remote, uint32_t value) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(value) : "memory");
}

// The CTA that owns (sums) bin `bin` of a merge: runs of kOwnerChunk bins go round the cluster,
// so that a warp gathers its 128 bins from four owners in four 128-byte requests (bins owned one
// by one cost a request per owner and word), while the crowded bins of float keys still spread
// over several owners.
constexpr int kOwnerChunk = 32;
__device__ __forceinline__ int bin_owner(int bin, int members) {
  return (bin / kOwnerChunk) % members;
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
  // Warp-scan block scans: every phase of the kernel waits on its scan.
  using Finder = DigitFinder<kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  using Scan = cub::BlockScan<uint32_t, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  constexpr int kPer = Traits::kPerVector;
  constexpr int kKeyBits = kPer == 4 ? 32 : 16;
  constexpr int kFirstShift = kKeyBits - kRadixBits;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<ClusterShared*>(shared_raw);
  uint32_t* keys = reinterpret_cast<uint32_t*>(shared_raw + sizeof(ClusterShared));
  __shared__ typename Finder::Storage finder;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t cta_counts;  // this CTA's keys above the pivot | its ties << 16
  __shared__ uint32_t gather_offset;  // where this CTA's gathered keys start

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

  // The first vectors of the slice are in flight while the counts are zeroed.
  uint4 raw[kUnroll];
  const auto load_vectors = [&](int v0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + u * kThreads + tid;
      raw[u] = v < vectors ? layout.load_vector(v) : make_uint4(0, 0, 0, 0);
    }
  };
  load_vectors(0);

  // copies and owned, contiguous, zeroed 16 bytes at a time.
  constexpr int kCountWords4 = (kCopies + kMaxDigits) * kRadixBins / kKeysPerWord4;
  static_assert(offsetof(ClusterShared, owned) == sizeof(s.copies), "owned follows copies");
  for (int i = tid; i < kCountWords4; i += kThreads) {
    reinterpret_cast<uint4*>(&s.copies[0][0])[i] = make_uint4(0, 0, 0, 0);
  }
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
    if (v0 > 0) load_vectors(v0);
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

  // 2. First digit: this CTA's counts go to the bins' owners, then every CTA gathers all bins.
  //    The first merge leaves this CTA's own counts in copies[0] (the gather's offsets).
  // Thread t sums and gathers bins [4 t, 4 t + 4), which share an owner.
  static_assert(kRadixBins == kKeysPerWord4 * kThreads && kOwnerChunk % kKeysPerWord4 == 0,
                "a thread's four bins have one owner");
  const int first_bin = kKeysPerWord4 * tid;
  const auto merge = [&](int digit) {
    uint4 sum = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int copy = 0; copy < kCopies; ++copy) {
      auto& counts = reinterpret_cast<uint4*>(s.copies[copy])[tid];
      const uint4 c = counts;
      sum = make_uint4(sum.x + c.x, sum.y + c.y, sum.z + c.z, sum.w + c.w);
      counts = make_uint4(0, 0, 0, 0);
    }
    if (digit == 0) reinterpret_cast<uint4*>(s.copies[0])[tid] = sum;
    const uint32_t owner_bins =
        cluster_address(&s.owned[digit][first_bin], bin_owner(first_bin, members));
    const uint32_t sums[kKeysPerWord4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int e = 0; e < kKeysPerWord4; ++e) {
      if (sums[e] != 0) cluster_add(owner_bins + e * sizeof(uint32_t), sums[e]);
    }
    cluster.sync();
    reinterpret_cast<uint4*>(s.merged)[tid] = cluster_load4(owner_bins);
    __syncthreads();
  };
  // 3. Gather: this CTA's keys of first-digit bin `bin` go to [base, base + own) of every CTA's
  //    gathered keys (base: the lower ranks' counts of the bin), its count of keys above the bin
  //    to every CTA's above_bin[member]; returns base.
  uint32_t* const gathered_keys = &s.copies[1][0];
  const auto gather = [&](uint32_t bin) -> uint32_t {
    if (tid < 32) {
      const uint32_t lower =
          tid < member ? cluster_load(cluster_address(&s.copies[0][bin], tid)) : 0u;
      const uint32_t sum = __reduce_add_sync(0xffffffffu, lower);
      if (tid == 0) gather_offset = sum;
    }
    // The thread's keys of the bin | its keys above it << 16 (a CTA holds fewer than 2^16 keys).
    const auto bin_weight = [&](uint32_t key) {
      const uint32_t digit = key >> kFirstShift;
      return digit > bin ? 1u << 16 : (digit == bin && key != 0 ? 1u : 0u);
    };
    uint32_t mine = 0;
    for (int w = tid; w < extent / kKeysPerWord4; w += kThreads) {
      const uint4 word = reinterpret_cast<const uint4*>(keys)[w];
      mine += bin_weight(word.x) + bin_weight(word.y) + bin_weight(word.z) + bin_weight(word.w);
    }
    uint32_t before = 0;
    uint32_t cta_total = 0;
    Scan(scan).ExclusiveSum(mine, before, cta_total);
    __syncthreads();  // gather_offset is set
    const uint32_t own = cta_total & 0xffffu;
    const uint32_t above_cta = cta_total >> 16;
    const uint32_t base = gather_offset;
    uint32_t* const own_keys = gathered_keys + base;
    uint32_t at = before & 0xffffu;
    for (int w = tid; w < extent / kKeysPerWord4; w += kThreads) {
      const uint4 word = reinterpret_cast<const uint4*>(keys)[w];
      const uint32_t quad[kKeysPerWord4] = {word.x, word.y, word.z, word.w};
#pragma unroll
      for (int e = 0; e < kKeysPerWord4; ++e) {
        if ((bin_weight(quad[e]) & 0xffffu) != 0) own_keys[at++] = quad[e];
      }
    }
    __syncthreads();
    const uint32_t copies_out = own * static_cast<uint32_t>(members - 1);
    for (uint32_t j = tid; j < copies_out; j += kThreads) {
      const uint32_t hop = j / own;
      const uint32_t at = j - hop * own;
      const int target = (member + 1 + static_cast<int>(hop)) % members;
      cluster_store(cluster_address(own_keys + at, target), own_keys[at]);
    }
    if (tid < members) cluster_store(cluster_address(&s.above_bin[member], tid), above_cta);
    cluster.sync();
    return base;
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
  // The gather replaces two merges of an fp32 key, one of a 16-bit key: that pays from
  // clusters of 8 on.
  const bool gather_pays = kKeyBits == 32 || members >= 8;
  uint32_t gathered = 0;  // keys gathered from the whole cluster (0: no gather)
  uint32_t gather_base = 0;  // where this CTA's own keys start among them
  if (!take_all) {
    const uint32_t* histogram = s.merged;
    for (int shift = kFirstShift, pass = 0;; shift = max(shift - kRadixBits, 0), ++pass) {
      if (pass > 0) {
        const uint32_t mask = (1u << (top - shift)) - 1u;
        if (gathered > 0) {
          // Every CTA counts the gathered keys alone, into a histogram no other CTA touches.
          uint32_t* const local = s.owned[pass];
          for (uint32_t j = tid; j < gathered; j += kThreads) {
            const uint32_t key = gathered_keys[j];
            if ((key >> top) == prefix) atomicAdd(&local[(key >> shift) & mask], 1u);
          }
          __syncthreads();
          histogram = local;
        } else {
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
      }
      uint32_t above = 0;
      const uint32_t digit = Finder::find(finder, histogram, rank, &above);
      rank -= above;
      greater += above;
      prefix = (prefix << (top - shift)) | digit;
      top = shift;
      const uint32_t in_bin = histogram[digit];
      const bool done = in_bin == rank || shift == 0;
      __syncthreads();  // merged is summed again by the next digit
      if (done) break;
      if (pass == 0) {
        if (gather_pays && in_bin <= static_cast<uint32_t>(kGatherCapacity)) {
          gather_base = gather(digit);
          gathered = in_bin;
        } else {
          for (int i = tid; i < kRadixBins; i += kThreads) s.copies[0][i] = 0;
          __syncthreads();
        }
      }
    }
  }

  // 4. Write: the thread's run of keys[first, first + per_thread), in index order.
  const int32_t first = tid * per_thread;
  const auto is_above = [&](uint32_t key) {
    return key != 0 && (take_all || (key >> top) > prefix);
  };
  const auto is_tie = [&](uint32_t key) {
    return key != 0 && !take_all && (key >> top) == prefix;
  };
  // A key's count: 1 if above the pivot, 1 << 16 if a tie (a CTA holds fewer than 2^16 keys).
  const auto weight = [&](uint32_t key) {
    return is_above(key) ? 1u : (is_tie(key) ? 1u << 16 : 0u);
  };
  uint32_t mine = 0;
  for (int32_t j = first; j < first + per_thread; j += kKeysPerWord4) {
    const uint4 word = *reinterpret_cast<const uint4*>(keys + j);
    const uint32_t quad[kKeysPerWord4] = {word.x, word.y, word.z, word.w};
#pragma unroll
    for (int e = 0; e < kKeysPerWord4; ++e) mine += weight(quad[e]);
  }
  uint32_t before = 0;
  uint32_t cta_total = 0;
  __syncthreads();
  Scan(scan).ExclusiveSum(mine, before, cta_total);
  uint32_t above_slot = before & 0xffffu;  // the CTAs' counts are summed apart: a row's exceed 16 bits
  uint32_t tie_slot = before >> 16;
  // The lower ranks' counts: from the gathered keys (theirs come first) and above_bin, or from
  // an exchange of every CTA's counts.
  const bool exchange = gathered == 0;
  if (!exchange) {
    uint32_t lower = 0;
    for (uint32_t j = tid; j < gather_base; j += kThreads) lower += weight(gathered_keys[j]);
    uint32_t lower_total = 0;
    __syncthreads();
    Scan(scan).ExclusiveSum(lower, unused, lower_total);
    above_slot += lower_total & 0xffffu;
    tie_slot += lower_total >> 16;
    for (int m = 0; m < member; ++m) above_slot += s.above_bin[m];
  } else {
    if (tid == 0) cta_counts = cta_total;
    cluster.sync();
    // Lane m of each warp reads rank m's counts; the warp sums them (the ranks' above and tie
    // counts apart, as a row's exceed 16 bits).
    const int lane = tid % 32;
    const uint32_t counts = lane < member ? cluster_load(cluster_address(&cta_counts, lane)) : 0u;
    above_slot += __reduce_add_sync(0xffffffffu, counts & 0xffffu);
    tie_slot += __reduce_add_sync(0xffffffffu, counts >> 16);
  }
  // Without a gather this CTA reads no other's shared memory after this arrival.
  cg::cluster_group::arrival_token arrived;
  if (exchange) arrived = cluster.barrier_arrive();
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
  // The others are done reading this CTA's shared memory (a gather's last remote access was
  // before its cluster barrier).
  if (exchange) cluster.barrier_wait(std::move(arrived));
}

template <typename Traits>
const void* kernel_of() {
  return reinterpret_cast<const void*>(cluster_select_kernel<Traits>);
}

}  // namespace

ClusterPlan cluster_plan_for(const SelectProblem& problem, int cluster) {
  const int64_t per_cta = (std::max<int64_t>(problem.n, 1) + cluster - 1) / cluster;
  return ClusterPlan{cluster, static_cast<int>(shared_bytes_for(per_cta)), 0};
}

ClusterPlan plan_cluster(const SelectProblem& problem) {
  const int64_t n = std::max<int64_t>(problem.n, 1);
  int wanted = 1;
  while (wanted < kMaxCluster && n > kTargetKeysPerCta * wanted) wanted *= 2;
  // Clusters of 8 or 16 that would fill the device take twice the keys a CTA, half the CTAs to
  // merge (8 x 131072: 0.0254 -> 0.0219 ms; 16 x 65536 bf16: 0.0216 -> 0.0183); below that the
  // shorter slices win (8 x 65536: 0.0165 against 0.0199).
  const bool halve = wanted >= kMinHalvedCluster && problem.batch * wanted >= kFilledCtas;
  // How many clusters of `cluster` CTAs with `bytes` of shared memory each the device holds.
  const auto resident = [&](int cluster, int bytes, int* clusters) {
    return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
      const void* kernel = kernel_of<decltype(traits)>();
      if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, bytes); !s) return s;
      return cuda_common::resident_clusters(kernel, kThreads, bytes, cluster, clusters);
    });
  };
  // The plan of `cluster` CTAs a row, or cluster 0 when its slices or its clusters do not fit.
  // Asked at the largest slice first (a cluster that fits with the most shared memory fits with
  // less), then at this row's.
  const auto try_cluster = [&](int cluster) {
    const ClusterPlan none{0, 0, 0};
    if ((n + cluster - 1) / cluster > kMaxKeysPerCta) return none;
    int clusters = 0;
    const Status fits =
        resident(cluster, static_cast<int>(shared_bytes_for(kMaxKeysPerCta)), &clusters);
    if (!fits || clusters == 0) return none;
    ClusterPlan chosen = cluster_plan_for(problem, cluster);
    if (!resident(cluster, chosen.shared_bytes, &chosen.resident)) return none;
    return chosen;
  };
  if (halve) {
    const ClusterPlan halved = try_cluster(wanted / 2);
    if (halved.cluster > 0) return halved;
  }
  for (int cluster = wanted; cluster >= 1; cluster /= 2) {
    const ClusterPlan plan = try_cluster(cluster);
    if (plan.cluster > 0) return plan;
  }
  return ClusterPlan{0, 0, 0};
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
