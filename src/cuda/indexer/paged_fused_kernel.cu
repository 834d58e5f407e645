// The fused paged decode indexer: scores and exact top-k in one launch, without a
// [rows, max_context] buffer. For decode's small batches: the batch's tiles are shared over one
// block an SM (all resident at once: a cooperative launch), each keeping its tiles' scores in
// shared memory, and the blocks of a request find each row's k-th score together with a
// three-digit radix select over histograms summed in global memory.
//
// Pipeline of paged_fused_kernel (a grid of G blocks, one an SM):
// 0. A counter-reset kernel zeroes the workspace first; this grid is its programmatic dependent,
//    so it starts at once and waits for the reset only before step 4.
// 1. The balanced split, from the device's context lengths (split_of_block): request b's t_b
//    needed tiles go to max(1, ceil(t_b / c)) consecutive blocks of c tiles, c as small as the
//    grid allows; blocks past the last request's exit.
// 2.-3. paged_scoring_sm90.cuh scores the block's tiles; the epilogue stores every score of the
//    block's range in shared memory, NaN for tokens a query does not see or of blocks outside the
//    cache (the key 0 of formats/score_keys.h: never selected), and counts the first digit of
//    each selectable one in the block's histogram.
// 4. Select, per row, digits of 11, 11 and 10 bits of the order-preserving keys, most
//    significant first: each block histograms its keys that match the digits found so far (the
//    first digit's while scoring, the later ones where the key-tile ring was, or, for a block
//    with few keys in the row's bin, straight into the sums) and adds them into the row's global
//    histogram; the request's blocks meet at a barrier (an atomic counter); then every block
//    searches the same sums, the whole block at once (copied from L2 with coalesced loads, eight
//    bins a thread, a block scan), for the same digit: the bin holding the row's k-th key. A
//    row is done when its bin holds exactly the entries still needed, after the third digit, or
//    after the first when the row has at most k selectable tokens (all are taken).
// 5. Emit: each thread counts its entries above the pivot and its ties, a block scan gives each
//    thread its place in the block's share, one atomic add per row and counter reserves that
//    share, and each thread writes its own entries; ties beyond the k - above still needed are
//    dropped. A request's first block writes the -1 padding.
#include <cuda_runtime_api.h>

#include <cub/block/block_scan.cuh>

#include <cmath>

#include "cuda/common/counter_reset.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/group_barrier.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/paged_indexer_kernels.h"
#include "cuda/indexer/paged_scoring_sm90.cuh"
#include "cuda/indexer/paged_radix_select.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;
using radix::digit_mask;
using radix::digit_shift;
using radix::kBins;
using radix::kPasses;
using radix::RowSelect;
using radix::score_key;

// A shallow ring: the shared memory goes to the scores (small batches need little bandwidth).
constexpr int kFusedStages = 6;
constexpr int kMaxNextN = 4;
// A block with at most this many keys in a row's bin of digit 0 adds their digit 1 straight into
// the row's global histogram (no shared histogram to clear and add up).
constexpr uint32_t kDirectKeys = 1024;
constexpr int kSharedBytes = 232448;  // the most dynamic shared memory a block can have on sm_90

// The workspace of one row (zeroed by the reset before the kernel).
struct RowWorkspace {
  uint32_t histograms[kPasses][kBins];
  uint32_t above_count;  // slots reserved for entries above the pivot
  uint32_t tie_count;    // slots reserved for ties
};

// 1. The block's share: request b, the x-th of its `blocks` blocks, tiles [begin, end).
struct FusedSplit {
  int32_t b;  // -1: no share
  int32_t x;
  int32_t blocks;
  int32_t begin;
  int32_t end;
};

template <int kHeads, int kColumns>
struct FusedShared {
  static constexpr int kScoringBytes =
      static_cast<int>(sizeof(paged::PagedScoringStorage<kHeads, kColumns, kFusedStages>));
  static constexpr int kHistogramBytes = kMaxNextN * kBins * 4;
  static constexpr int kScoreFloats =
      (kSharedBytes - kScoringBytes - kHistogramBytes - 1024) / 4 / 64 * 64;
  static_assert(kScoreFloats < 65536, "the emit packs a block's counts in 16 bits");
};

using Scan = cub::BlockScan<uint32_t, paged::kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

template <int kHeads, int kColumns>
struct alignas(1024) FusedStorage {
  paged::PagedScoringStorage<kHeads, kColumns, kFusedStages> scoring;
  float scores[FusedShared<kHeads, kColumns>::kScoreFloats];  // [next_n][span]
  uint32_t first_digits[kMaxNextN][kBins];  // the block's histogram of digit 0, built while scoring
  RowSelect rows[kMaxNextN];
  typename Scan::TempStorage scan;
  uint32_t base_above;  // the block's first slot for entries above the pivot
  uint32_t base_ties;   // and for ties
  FusedSplit split;
};

// Adds each key of scores[0, count) (count a multiple of 64) that matches the row's digits so far
// to the bin of its digit `pass` of `histogram` (shared or global memory). Four scores a thread at
// a time, as in every sweep of a block's scores.
__device__ __forceinline__ void histogram_keys(const float* scores, int count, RowSelect row,
                                               int pass, uint32_t* histogram) {
  const int shift = digit_shift(pass);
  const uint32_t mask = digit_mask(pass);
  const auto* quads = reinterpret_cast<const float4*>(scores);
  for (int q = static_cast<int>(threadIdx.x); q < count / 4; q += paged::kThreads) {
    const float4 four = quads[q];
    const uint32_t keys[4] = {score_key(four.x), score_key(four.y), score_key(four.z),
                              score_key(four.w)};
#pragma unroll
    for (const uint32_t key : keys) {
      if (key != 0 && radix::matches(row, key)) atomicAdd(&histogram[(key >> shift) & mask], 1u);
    }
  }
}

// The bin holding a row's rank-th best key, searched by the whole block in the row's summed
// histogram of `bins` bins: the block copies the sums into `staged` (coalesced loads from L2:
// every block of the request reads the same lines at once), thread t takes bins
// [bins - 8 (t + 1), bins - 8 t) (the top ones first), a block scan counts the entries above each
// thread's, and the thread holding the rank-th one (thread 0 when the histogram holds at most
// rank entries) is the owner.
struct DigitSearch {
  bool owner;
  uint32_t digit;
  uint32_t above;   // entries in bins above the digit's
  uint32_t in_bin;  // entries in its bin
  uint32_t total;   // entries in the histogram
};

__device__ __forceinline__ DigitSearch find_digit_in_block(const uint32_t* histogram, int bins,
                                                           uint32_t rank, uint32_t* staged,
                                                           typename Scan::TempStorage& scan) {
  constexpr int kPerThread = 8;
  constexpr int kLoads = (kBins + paged::kThreads - 1) / paged::kThreads;
  const int tid = static_cast<int>(threadIdx.x);
  uint32_t loaded[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const int bin = tid + u * paged::kThreads;
    loaded[u] = bin < bins ? __ldcg(&histogram[bin]) : 0u;
  }
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const int bin = tid + u * paged::kThreads;
    if (bin < bins) staged[bin] = loaded[u];
  }
  __syncthreads();
  const int low = bins - kPerThread * (tid + 1);  // this thread's lowest bin
  uint32_t counts[kPerThread];
  uint32_t local = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) counts[i] = low >= 0 ? staged[low + i] : 0u;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) local += counts[i];
  DigitSearch found{false, 0u, 0u, 0u, 0u};
  uint32_t above = 0;
  Scan(scan).ExclusiveSum(local, above, found.total);
  if (found.total <= rank) {
    found.owner = tid == 0;
    return found;
  }
  if (above < rank && above + local >= rank) {
    found.owner = true;
    bool searching = true;
#pragma unroll
    for (int i = kPerThread - 1; i >= 0; --i) {
      if (searching && above + counts[i] >= rank) {
        found.digit = static_cast<uint32_t>(low + i);
        found.above = above;
        found.in_bin = counts[i];
        searching = false;
      } else if (searching) {
        above += counts[i];
      }
    }
  }
  return found;
}

// Warp-wide: the share of block blockIdx.x of a G-block grid. c is the smaller of
// ceil(T / (G - B)) (T the batch's needed tiles) and ceil(max t_b / floor(G / B)): either keeps
// the sum of max(1, ceil(t_b / c)) within G, and the second within the host's tiles_per_split.
__device__ __forceinline__ FusedSplit split_of_block(const PagedArgs& args, int batch, int lane) {
  uint32_t total = 0;
  int32_t most = 0;
  for (int r = lane; r < batch; r += 32) {
    const int32_t t = paged::needed_tiles(args, r);
    total += static_cast<uint32_t>(t);
    most = max(most, t);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    total += __shfl_xor_sync(0xffffffffu, total, offset);
    most = max(most, __shfl_xor_sync(0xffffffffu, most, offset));
  }
  const int grid = static_cast<int>(gridDim.x);
  const int per_request = grid / batch;
  int32_t c = (most + per_request - 1) / per_request;
  if (grid > batch) {
    const auto spare = static_cast<uint32_t>(grid - batch);
    c = min(c, static_cast<int32_t>((total + spare - 1) / spare));
  }
  c = max(c, 1);
  FusedSplit split{-1, 0, 0, 0, 0};
  const int block = static_cast<int>(blockIdx.x);
  int before = 0;  // blocks of the requests before this group of 32
  for (int base = 0; base < batch; base += 32) {
    const int r = base + lane;
    const int32_t t = r < batch ? paged::needed_tiles(args, r) : 0;
    const int g = r < batch ? max(1, (t + c - 1) / c) : 0;
    const int inclusive =
        static_cast<int>(cuda_common::warp_inclusive_sum(static_cast<uint32_t>(g), lane));
    const int first = before + inclusive - g;
    if (g > 0 && block >= first && block < first + g) {
      const int x = block - first;
      split = FusedSplit{r, x, g, x * c, min(x * c + c, t)};
    }
    before += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  const unsigned owner = __ballot_sync(0xffffffffu, split.b >= 0);
  if (owner == 0) return split;
  const int src = __ffs(owner) - 1;
  return FusedSplit{__shfl_sync(0xffffffffu, split.b, src), __shfl_sync(0xffffffffu, split.x, src),
                    __shfl_sync(0xffffffffu, split.blocks, src),
                    __shfl_sync(0xffffffffu, split.begin, src),
                    __shfl_sync(0xffffffffu, split.end, src)};
}

struct FusedEpilogue {
  const PagedArgs& args;
  float* scores;
  uint32_t (*first_digits)[kBins];
  int32_t span;
  int32_t first_token;
  int b;

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int tile, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries],
                                               bool in_cache, int quad_lane) {
    if (quad_lane > 1) return;
    const int32_t token = tile * paged::kTileKeys + row0 + 8 * quad_lane;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int j = first_query + bq;
      if (j >= args.next_n) return;
      const float score = quad_lane == 0 ? scores0[bq] : scores1[bq];
      const bool seen = in_cache && token < paged::visible_tokens(args, b, j);
      scores[j * span + (token - first_token)] = seen ? score : NAN;
      const uint32_t key = seen ? score_key(score) : 0u;
      if (key != 0) atomicAdd(&first_digits[j][key >> digit_shift(0)], 1u);
    }
  }
};

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(paged::kThreads, 1)
    paged_fused_kernel(const __grid_constant__ CUtensorMap q_map,
                       const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                       int32_t batch, int32_t k, int32_t* indices, float* values,
                       RowWorkspace* row_ws, uint32_t* request_counters) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<FusedStorage<kHeads, kColumns>*>(shared_raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int next_n = args.next_n;
  // 1.
  if (tid < 32) {
    const FusedSplit split = split_of_block(args, batch, tid);
    if (tid == 0) s.split = split;
  }
  if (tid == 32) paged::init_scoring(s.scoring);
  if (tid < kMaxNextN) s.rows[tid] = RowSelect{0u, 32, static_cast<uint32_t>(k), 0u, false};
  for (int i = tid; i < next_n * kBins; i += paged::kThreads) {
    s.first_digits[i / kBins][i % kBins] = 0;
  }
  __syncthreads();
  const FusedSplit split = s.split;
  if (split.b < 0) return;
  const int b = split.b;
  const auto blocks = static_cast<uint32_t>(split.blocks);

  // 2.
  const paged::TileRange range{split.begin, split.end};
  const int32_t span = args.tiles_per_split * paged::kTileKeys;
  const int32_t first_token = range.begin * paged::kTileKeys;
  const int32_t count = (range.end - range.begin) * paged::kTileKeys;  // scored tokens
  FusedEpilogue epilogue{args, s.scores, s.first_digits, span, first_token, b};
  paged::run_scoring<kHeads, kColumns, kFusedStages>(&q_map, &kv_map, args, s.scoring, b, range, epilogue);
  __syncthreads();

  sm90::wait_for_prerequisite_grids();  // the reset of the workspace before this grid

  // 4. Digit 0's histogram is the one built while scoring; the later digits' live where the
  // key-tile ring was, or a block with few keys in the row's bin adds them straight to the sums.
  auto* histograms = reinterpret_cast<uint32_t(*)[kBins]>(&s.scoring.kv[0][0]);
  uint32_t* staged = histograms[kMaxNextN];  // the sums of the digit being searched
  static_assert(sizeof(s.scoring.kv) >= (kMaxNextN + 1) * kBins * sizeof(uint32_t),
                "ring too small");
  RowWorkspace* rows_ws = row_ws + int64_t{b} * next_n;
  uint32_t* barrier = request_counters + b;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool all_done = true;
    for (int j = 0; j < next_n; ++j) all_done = all_done && s.rows[j].done;
    if (all_done) break;
    // Keys of the block's still matching the row's digits: a block with few adds them directly.
    const auto direct = [&](int j) {
      return pass == 1 && s.first_digits[j][s.rows[j].prefix] <= kDirectKeys;
    };
    if (pass > 0) {
      for (int j = 0; j < next_n; ++j) {
        if (s.rows[j].done || direct(j)) continue;
        for (int i = tid; i < kBins; i += paged::kThreads) histograms[j][i] = 0;
      }
      __syncthreads();
      for (int j = 0; j < next_n; ++j) {
        if (s.rows[j].done) continue;
        histogram_keys(s.scores + j * span, count, s.rows[j], pass,
                       direct(j) ? rows_ws[j].histograms[pass] : histograms[j]);
      }
      __syncthreads();
    }
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done || direct(j)) continue;
      const uint32_t* local = pass == 0 ? s.first_digits[j] : histograms[j];
      for (int bin = tid; bin < radix::digit_bins(pass); bin += paged::kThreads) {
        const uint32_t n = local[bin];
        if (n != 0) atomicAdd(&rows_ws[j].histograms[pass][bin], n);
      }
    }
    cuda_common::group_barrier(barrier, blocks, static_cast<uint32_t>(pass + 1));
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;  // the same for every thread: read after the last barrier
      const DigitSearch found = find_digit_in_block(
          rows_ws[j].histograms[pass], radix::digit_bins(pass), s.rows[j].rank, staged, s.scan);
      if (found.owner) {
        const RowSelect row = s.rows[j];
        s.rows[j] = pass == 0 && found.total <= row.rank
                        ? RowSelect{0u, 0, 0u, found.total, true}  // every selectable key
                        : radix::advance(row, pass, found.digit, found.above, found.in_bin);
      }
      __syncthreads();
    }
  }

  // 5. Emit: each thread counts its entries above the pivot and its ties, a block scan places
  // them, one thread reserves the block's slots, and each thread writes its own.
  for (int j = 0; j < next_n; ++j) {
    const RowSelect row = s.rows[j];
    const auto* quads = reinterpret_cast<const float4*>(s.scores + j * span);
    uint32_t mine = 0;  // above | ties << 16 (a block holds fewer than 2^16 entries)
    for (int q = tid; q < count / 4; q += paged::kThreads) {
      const float4 four = quads[q];
      for (const float score : {four.x, four.y, four.z, four.w}) {
        const uint32_t key = score_key(score);
        const uint32_t v = key >> row.shift;
        mine += key == 0 ? 0u : (v > row.prefix ? 1u : (v == row.prefix ? 1u << 16 : 0u));
      }
    }
    uint32_t before = 0;
    uint32_t block_total = 0;
    Scan(s.scan).ExclusiveSum(mine, before, block_total);
    if (tid == 0) {
      const uint32_t above = block_total & 0xffffu;
      const uint32_t ties = block_total >> 16;
      s.base_above = above != 0 ? atomicAdd(&rows_ws[j].above_count, above) : 0u;
      s.base_ties = ties != 0 ? atomicAdd(&rows_ws[j].tie_count, ties) : 0u;
    }
    __syncthreads();
    uint32_t above_slot = s.base_above + (before & 0xffffu);
    uint32_t tie = s.base_ties + (before >> 16);
    const int64_t out_row = (int64_t{b} * next_n + j) * k;
    for (int q = tid; q < count / 4 && mine != 0; q += paged::kThreads) {
      const float4 four = quads[q];
      const float scores[4] = {four.x, four.y, four.z, four.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t key = score_key(scores[e]);
        const uint32_t v = key >> row.shift;
        uint32_t slot;
        if (key == 0 || v < row.prefix) continue;
        if (v > row.prefix) {
          slot = above_slot++;
        } else {
          if (tie >= row.rank) continue;  // ties beyond the k still needed
          slot = row.above + tie++;
        }
        indices[out_row + slot] = first_token + 4 * q + e;
        if (values != nullptr) values[out_row + slot] = scores[e];
      }
    }
    // Padding: a row with fewer than k selectable tokens.
    if (split.x == 0) {
      for (int slot = static_cast<int>(row.above + row.rank) + tid; slot < k; slot += paged::kThreads) {
        indices[out_row + slot] = -1;
        if (values != nullptr) values[out_row + slot] = NAN;
      }
    }
    __syncthreads();  // s.base_* and s.scan are reused by the next row
  }
}

template <int kHeads, int kColumns>
const void* fused_kernel() {
  return reinterpret_cast<const void*>(paged_fused_kernel<kHeads, kColumns>);
}
template <int kHeads, int kColumns>
int fused_smem() {
  static_assert(sizeof(FusedStorage<kHeads, kColumns>) <= kSharedBytes, "shared memory");
  return static_cast<int>(sizeof(FusedStorage<kHeads, kColumns>));
}

const void* kernel_for(int heads, int columns, int* smem) {
  return dispatch_paged_shape(heads, columns, [&](auto h, auto c) {
    constexpr int kHeads = decltype(h)::value;
    constexpr int kColumns = decltype(c)::value;
    *smem = fused_smem<kHeads, kColumns>();
    return fused_kernel<kHeads, kColumns>();
  });
}

}  // namespace

int64_t paged_fused_score_capacity(int heads, int columns) {
  return dispatch_paged_shape(heads, columns, [](auto h, auto c) -> int64_t {
    return FusedShared<decltype(h)::value, decltype(c)::value>::kScoreFloats;
  });
}

std::size_t paged_fused_workspace_bytes(const PagedIndexerProblem& problem) {
  const auto rows = static_cast<std::size_t>(problem.batch * problem.next_n);
  return rows * sizeof(RowWorkspace) + static_cast<std::size_t>(problem.batch) * sizeof(uint32_t);
}

Status paged_fused_fits(const PagedIndexerProblem& problem, int64_t blocks, bool* fits) {
  int smem = 0;
  const void* kernel = kernel_for(static_cast<int>(problem.num_heads), paged_columns(problem), &smem);
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  int resident = 0;
  if (Status s = cuda_common::resident_blocks(kernel, paged::kThreads, smem, &resident); !s) return s;
  *fits = blocks <= resident;
  return Status::ok();
}

Status launch_paged_fused(const PagedLaunch& launch, const PagedIndexerProblem& problem, int sms,
                          void* workspace, cudaStream_t stream) {
  if (launch.batch == 0) return Status::ok();
  const std::size_t ws_bytes = paged_fused_workspace_bytes(problem);
  static_assert(sizeof(RowWorkspace) % sizeof(uint32_t) == 0, "the workspace is counters");
  if (Status s = cuda_common::launch_counter_reset(static_cast<uint32_t*>(workspace),
                                                   static_cast<int64_t>(ws_bytes / 4), stream);
      !s) {
    return s;
  }
  auto* row_ws = static_cast<RowWorkspace*>(workspace);
  auto* request_counters = reinterpret_cast<uint32_t*>(
      static_cast<unsigned char*>(workspace) +
      static_cast<std::size_t>(problem.batch * problem.next_n) * sizeof(RowWorkspace));
  int smem = 0;
  const void* kernel = kernel_for(launch.heads, launch.columns, &smem);
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  int32_t batch = static_cast<int32_t>(launch.batch);
  int32_t k = static_cast<int32_t>(problem.k);
  int32_t* indices = problem.indices;
  float* values = problem.values;
  void* kernel_args[] = {const_cast<CUtensorMap*>(&launch.q_map),
                         const_cast<CUtensorMap*>(&launch.kv_map),
                         const_cast<paged::PagedArgs*>(&launch.args),
                         &batch,
                         &k,
                         &indices,
                         &values,
                         &row_ws,
                         &request_counters};
  return cuda_common::launch_cooperative(kernel, dim3(static_cast<unsigned>(sms)), paged::kThreads,
                                        smem, stream, kernel_args, /*dependent=*/true);
}

}  // namespace litetopk::cuda_indexer
