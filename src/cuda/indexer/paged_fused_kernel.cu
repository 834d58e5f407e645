// The fused paged decode indexer: scores and exact top-k in one launch, without a
// [rows, max_context] buffer. For decode's small batches: a request's context is split over
// `splits` blocks (all resident at once: a cooperative launch), each keeping its tiles' scores in
// shared memory; the blocks of a request find each row's k-th score together from a histogram
// summed in global memory, and the last of them to finish selects among the few candidates left.
//
// Pipeline of paged_fused_kernel (a grid of G blocks, one an SM):
// 0. A counter-reset kernel zeroes the workspace's counters first; this grid is its programmatic
//    dependent, so it starts at once and waits for the reset only before step 4.
// 1. The balanced split, from the device's context lengths (split_of_block): request b's t_b
//    needed tiles go to max(1, ceil(t_b / c)) consecutive blocks of c tiles, c as small as the
//    grid allows; blocks past the last request's exit.
// 2. paged_scoring_sm90.cuh scores the block's tiles; the epilogue stores every score of the
//    block's range in shared memory, NaN for tokens a query does not see or of blocks outside the
//    cache (the key 0 of formats/score_keys.h: never selected), and counts each selectable one in
//    the block's histogram of its half digit (the top 11 bits of the order-preserving key of the
//    score rounded to fp16: 32 bins an octave, monotone in the score).
// 4. The blocks add their histograms into the row's sums, meet at a barrier (an atomic counter
//    per request) and search the same sums, the whole block at once (copied from L2 with coalesced
//    loads, eight bins a thread, a block scan), for the bin holding the row's k-th key. Then:
//    a row with at most k selectable tokens takes them all; a bin holding exactly the entries still
//    needed is taken whole; a bin of at most kCandidates entries goes to the row's candidate list;
//    a larger one (ties, scores past fp16's range) falls back to a radix select across the blocks
//    on the fp32 keys (digits of 11, 11 and 10 bits, a barrier each).
// 5. Emit: each thread counts its entries above the bin (or pivot) and its candidates (or ties), a
//    block scan gives each thread its place in the block's share, one atomic add per row and class
//    reserves that share, and each thread writes its own: the entries above straight to the output,
//    candidates (key, token) to the row's list; ties beyond the k still needed are dropped. Block 0
//    writes the -1 padding.
// 6. A row with candidates: each block arrives on the request's counter; the last to arrive loads
//    the row's candidates into shared memory, radix-selects the rank still needed among them inside
//    the block and writes them after the entries above the bin.
#include <cuda_fp16.h>
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
// The most entries of a row's k-th half-digit bin that go to its candidate list (a normal row of
// 128K scores holds a few hundred there).
constexpr uint32_t kCandidates = 4096;
constexpr int kSharedBytes = 232448;  // the most dynamic shared memory a block can have on sm_90

// A row's counters (zeroed by the reset before the kernel).
struct RowCounters {
  uint32_t half_histogram[kBins];  // the sums of the half digits
  uint32_t above_count;            // slots reserved for entries above the bin (or the pivot)
  uint32_t second_count;           // slots reserved for candidates (or ties)
};

// A row's scratch (not reset): the radix fallback's sums (zeroed by the request's blocks before
// their first barrier) and the candidate list.
struct RowScratch {
  uint32_t histograms[kPasses][kBins];
  uint2 candidates[kCandidates];  // key, token
};

// How a row is selected once its half-digit bin is known.
enum class RowMode : uint32_t {
  kAll,         // at most k selectable tokens: all are taken
  kBinTaken,    // the bin holds exactly the entries still needed: every key from the bin up
  kCandidates,  // the bin's entries go to the candidate list; the request's last block selects
  kRadix,       // a radix select across the blocks on the fp32 keys
};

struct HalfRow {
  RowMode mode;
  uint32_t digit;   // the bin holding the row's k-th key
  uint32_t above;   // entries in bins above it
  uint32_t in_bin;  // entries in it
  uint32_t total;   // selectable entries
};

// The half digit of a selectable score's key: the top 11 bits of the order-preserving key of the
// score rounded to fp16 (monotone in the fp32 key, so every key of a higher bin is higher).
__device__ __forceinline__ uint32_t half_digit(float score) {
  const uint32_t bits = __half_as_ushort(__float2half_rn(score));
  return keys::key_from_16bit(bits, /*is_nan=*/false, /*largest=*/true) >> 5;
}

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
  static_assert(kScoreFloats >= 2 * static_cast<int>(kCandidates), "the last block's candidates");
};

using Scan = cub::BlockScan<uint32_t, paged::kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

template <int kHeads, int kColumns>
struct alignas(1024) FusedStorage {
  paged::PagedScoringStorage<kHeads, kColumns, kFusedStages> scoring;
  float scores[FusedShared<kHeads, kColumns>::kScoreFloats];  // [next_n][span]
  uint32_t half_digits[kMaxNextN][kBins];  // the block's histogram of half digits, while scoring
  HalfRow half_rows[kMaxNextN];
  RowSelect rows[kMaxNextN];  // the radix select's state (the fallback's, the last block's)
  typename Scan::TempStorage scan;
  uint32_t base_above;   // the block's first slot for entries above the bin or the pivot
  uint32_t base_second;  // and for its candidates or ties
  uint32_t candidate_counts[2];  // the last block's slots: above its pivot, ties
  bool last;             // the request's last block to arrive
  FusedSplit split;
};

// Adds each key of `keys(i)`, i in [0, count), that matches the row's digits so far to the bin
// of its digit `pass` of `histogram` (shared or global memory).
template <class Keys>
__device__ __forceinline__ void histogram_keys(Keys keys, int count, RowSelect row, int pass,
                                               uint32_t* histogram) {
  const int shift = digit_shift(pass);
  const uint32_t mask = digit_mask(pass);
  for (int i = static_cast<int>(threadIdx.x); i < count; i += paged::kThreads) {
    const uint32_t key = keys(i);
    if (key != 0 && radix::matches(row, key)) atomicAdd(&histogram[(key >> shift) & mask], 1u);
  }
}

// Copies the summed histograms of `rows` rows (bins bins each, `stride` words apart) from L2
// into staged[row * kBins + bin] with coalesced loads (every block of the request reads the same
// lines at once), every row's loads in flight together.
template <int kMaxRows>
__device__ __forceinline__ void stage_sums(const uint32_t* histograms, std::size_t stride, int rows,
                                           int bins, uint32_t* staged) {
  constexpr int kLoads = (kBins + paged::kThreads - 1) / paged::kThreads;
  const int tid = static_cast<int>(threadIdx.x);
  uint32_t loaded[kMaxRows][kLoads];
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int bin = tid + u * paged::kThreads;
      loaded[r][u] = r < rows && bin < bins ? __ldcg(&histograms[r * stride + bin]) : 0u;
    }
  }
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int bin = tid + u * paged::kThreads;
      if (r < rows && bin < bins) staged[r * kBins + bin] = loaded[r][u];
    }
  }
  __syncthreads();
}

// The bin holding a row's rank-th best key in a histogram of `bins` bins in shared memory,
// searched by the whole block: thread t takes bins [bins - 8 (t + 1), bins - 8 t) (the top ones
// first), a block scan counts the entries above each thread's, and the thread holding the rank-th
// one (thread 0 when the histogram holds at most rank entries) is the owner.
struct DigitSearch {
  bool owner;
  uint32_t digit;
  uint32_t above;   // entries in bins above the digit's
  uint32_t in_bin;  // entries in its bin
  uint32_t total;   // entries in the histogram
};

__device__ __forceinline__ DigitSearch find_digit_in_block(const uint32_t* histogram, int bins,
                                                           uint32_t rank,
                                                           typename Scan::TempStorage& scan) {
  constexpr int kPerThread = 8;
  const int tid = static_cast<int>(threadIdx.x);
  const int low = bins - kPerThread * (tid + 1);  // this thread's lowest bin
  uint32_t counts[kPerThread];
  uint32_t local = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) counts[i] = low >= 0 ? histogram[low + i] : 0u;
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

// The radix select's pass `pass` on a row: the owner of the found digit advances s_row (every
// thread reads it after the block barrier that ends this call).
__device__ __forceinline__ void advance_row(const uint32_t* histogram, int pass, RowSelect* s_row,
                                            typename Scan::TempStorage& scan) {
  const RowSelect row = *s_row;
  const DigitSearch found = find_digit_in_block(histogram, radix::digit_bins(pass), row.rank, scan);
  if (found.owner) {
    *s_row = found.total <= row.rank
                 ? RowSelect{row.prefix, row.shift, found.total, row.above, true}  // all, as ties
                 : radix::advance(row, pass, found.digit, found.above, found.in_bin);
  }
  __syncthreads();
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
    const int spare = grid - batch;
    c = min(c, static_cast<int32_t>((total + static_cast<uint32_t>(spare) - 1) / static_cast<uint32_t>(spare)));
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
  uint32_t (*half_digits)[kBins];
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
      if (seen && score_key(score) != 0) atomicAdd(&half_digits[j][half_digit(score)], 1u);
    }
  }
};

// Which class a selectable key of a row falls in: 0 none, 1 above (taken), 2 candidate or tie.
__device__ __forceinline__ uint32_t key_class(const HalfRow& half, const RowSelect& row,
                                              float score, uint32_t key) {
  if (key == 0) return 0;
  switch (half.mode) {
    case RowMode::kAll:
      return 1;
    case RowMode::kBinTaken:
      return half_digit(score) >= half.digit ? 1 : 0;
    case RowMode::kCandidates: {
      const uint32_t d = half_digit(score);
      return d > half.digit ? 1 : (d == half.digit ? 2 : 0);
    }
    default: {
      const uint32_t v = row.shift >= 32 ? 0u : key >> row.shift;
      return v > row.prefix ? 1 : (v == row.prefix ? 2 : 0);
    }
  }
}

// The last block's selection of a row's candidates: the rank = k - half.above best of the
// row's in_bin candidates, written to slots half.above + [0, rank).
__device__ __forceinline__ void select_candidates(const HalfRow& half, const RowScratch& scratch,
                                                  int32_t k, int64_t out_row, int32_t* indices,
                                                  float* values, uint32_t* keys, int32_t* tokens,
                                                  uint32_t* histogram, RowSelect* s_row,
                                                  typename Scan::TempStorage& scan,
                                                  uint32_t* s_counts) {
  const int tid = static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(half.in_bin);
  for (int i = tid; i < n; i += paged::kThreads) {
    const uint2 entry = __ldcg(&scratch.candidates[i]);
    keys[i] = entry.x;
    tokens[i] = static_cast<int32_t>(entry.y);
  }
  if (tid == 0) {
    *s_row = RowSelect{0u, 32, static_cast<uint32_t>(k) - half.above, 0u, false};
    s_counts[0] = 0;
    s_counts[1] = 0;
  }
  __syncthreads();
  for (int pass = 0; pass < kPasses && !s_row->done; ++pass) {
    for (int i = tid; i < kBins; i += paged::kThreads) histogram[i] = 0;
    __syncthreads();
    histogram_keys([&](int i) { return keys[i]; }, n, *s_row, pass, histogram);
    __syncthreads();
    advance_row(histogram, pass, s_row, scan);
  }
  const RowSelect row = *s_row;
  for (int i = tid; i < n; i += paged::kThreads) {
    const uint32_t v = row.shift >= 32 ? 0u : keys[i] >> row.shift;
    uint32_t slot;
    if (v > row.prefix) {
      slot = atomicAdd(&s_counts[0], 1u);
    } else if (v == row.prefix) {
      const uint32_t tie = atomicAdd(&s_counts[1], 1u);
      if (tie >= row.rank) continue;
      slot = row.above + tie;
    } else {
      continue;
    }
    indices[out_row + half.above + slot] = tokens[i];
    if (values != nullptr) values[out_row + half.above + slot] = radix::key_score(keys[i]);
  }
}

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(paged::kThreads, 1)
    paged_fused_kernel(const __grid_constant__ CUtensorMap q_map,
                       const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                       int32_t batch, int32_t k, int32_t* indices, float* values,
                       RowCounters* row_counters, uint32_t* request_counters,
                       RowScratch* row_scratch) {
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
  for (int i = tid; i < next_n * kBins; i += paged::kThreads) {
    s.half_digits[i / kBins][i % kBins] = 0;
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
  FusedEpilogue epilogue{args, s.scores, s.half_digits, span, first_token, b};
  paged::run_scoring<kHeads, kColumns, kFusedStages>(&q_map, &kv_map, args, s.scoring, b, range, epilogue);
  __syncthreads();

  // 4. The half digits' sums; the radix fallback's sums are zeroed here, a slice a block.
  RowCounters* counters = row_counters + int64_t{b} * next_n;
  RowScratch* scratch = row_scratch + int64_t{b} * next_n;
  uint32_t* barrier = request_counters + b;
  {
    constexpr int kWords = kPasses * kBins;
    const int per_block = (kWords + split.blocks - 1) / split.blocks;
    const int first = split.x * per_block;
    for (int j = 0; j < next_n; ++j) {
      uint32_t* words = &scratch[j].histograms[0][0];
      for (int i = first + tid; i < min(first + per_block, kWords); i += paged::kThreads) words[i] = 0;
    }
  }
  sm90::wait_for_prerequisite_grids();  // the reset of the counters before this grid
  for (int j = 0; j < next_n; ++j) {
    for (int bin = tid; bin < kBins; bin += paged::kThreads) {
      const uint32_t n = s.half_digits[j][bin];
      if (n != 0) atomicAdd(&counters[j].half_histogram[bin], n);
    }
  }
  uint32_t phase = 1;
  cuda_common::group_barrier(barrier, blocks, phase);
  // Where the key-tile ring was: `staged` (the fallback's sums), then a histogram per row (the
  // half digits' sums, then the fallback's block histograms).
  uint32_t* staged = reinterpret_cast<uint32_t*>(&s.scoring.kv[0][0]);
  auto* histograms = reinterpret_cast<uint32_t(*)[kBins]>(staged + kBins);
  static_assert(sizeof(s.scoring.kv) >= (kMaxNextN + 1) * kBins * sizeof(uint32_t),
                "ring too small");
  bool any_radix = false;
  bool any_candidates = false;
  stage_sums<kMaxNextN>(counters[0].half_histogram, sizeof(RowCounters) / sizeof(uint32_t), next_n,
                        kBins, histograms[0]);
  for (int j = 0; j < next_n; ++j) {
    const DigitSearch found =
        find_digit_in_block(histograms[j], kBins, static_cast<uint32_t>(k), s.scan);
    if (found.owner) {
      const uint32_t rank = static_cast<uint32_t>(k) - found.above;
      HalfRow half{RowMode::kRadix, found.digit, found.above, found.in_bin, found.total};
      if (found.total <= static_cast<uint32_t>(k)) {
        half.mode = RowMode::kAll;
      } else if (found.in_bin == rank) {
        half.mode = RowMode::kBinTaken;
      } else if (found.in_bin <= kCandidates) {
        half.mode = RowMode::kCandidates;
      }
      s.half_rows[j] = half;
      s.rows[j] = RowSelect{0u, 32, static_cast<uint32_t>(k), 0u, half.mode != RowMode::kRadix};
    }
    __syncthreads();
    any_radix = any_radix || s.half_rows[j].mode == RowMode::kRadix;
    any_candidates = any_candidates || s.half_rows[j].mode == RowMode::kCandidates;
  }

  // The fallback: digits of the fp32 keys, each histogram summed across the request's blocks.
  for (int pass = 0; pass < kPasses && any_radix; ++pass) {
    bool all_done = true;
    for (int j = 0; j < next_n; ++j) all_done = all_done && s.rows[j].done;
    if (all_done) break;
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;
      for (int i = tid; i < kBins; i += paged::kThreads) histograms[j][i] = 0;
    }
    __syncthreads();
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;
      const float* row_scores = s.scores + j * span;
      histogram_keys([&](int i) { return score_key(row_scores[i]); }, count, s.rows[j], pass,
                     histograms[j]);
    }
    __syncthreads();
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;
      for (int bin = tid; bin < radix::digit_bins(pass); bin += paged::kThreads) {
        const uint32_t n = histograms[j][bin];
        if (n != 0) atomicAdd(&scratch[j].histograms[pass][bin], n);
      }
    }
    cuda_common::group_barrier(barrier, blocks, ++phase);
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;  // the same for every thread: read after the last barrier
      stage_sums<1>(scratch[j].histograms[pass], 0, 1, radix::digit_bins(pass), staged);
      advance_row(staged, pass, &s.rows[j], s.scan);
    }
  }

  // 5. Emit: each thread counts its entries above and its second class, a block scan places
  // them, one thread reserves the block's slots, and each thread writes its own.
  for (int j = 0; j < next_n; ++j) {
    const HalfRow half = s.half_rows[j];
    const RowSelect row = s.rows[j];
    const auto* quads = reinterpret_cast<const float4*>(s.scores + j * span);
    uint32_t mine = 0;  // above | second << 16 (a block holds fewer than 2^16 entries)
    for (int q = tid; q < count / 4; q += paged::kThreads) {
      const float4 four = quads[q];
      for (const float score : {four.x, four.y, four.z, four.w}) {
        const uint32_t c = key_class(half, row, score, score_key(score));
        mine += c == 1 ? 1u : (c == 2 ? 1u << 16 : 0u);
      }
    }
    uint32_t before = 0;
    uint32_t block_total = 0;
    Scan(s.scan).ExclusiveSum(mine, before, block_total);
    if (tid == 0) {
      const uint32_t above = block_total & 0xffffu;
      const uint32_t second = block_total >> 16;
      s.base_above = above != 0 ? atomicAdd(&counters[j].above_count, above) : 0u;
      s.base_second = second != 0 ? atomicAdd(&counters[j].second_count, second) : 0u;
    }
    __syncthreads();
    uint32_t above_slot = s.base_above + (before & 0xffffu);
    uint32_t second = s.base_second + (before >> 16);
    const int64_t out_row = (int64_t{b} * next_n + j) * k;
    for (int q = tid; q < count / 4 && mine != 0; q += paged::kThreads) {
      const float4 four = quads[q];
      const float scores[4] = {four.x, four.y, four.z, four.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t key = score_key(scores[e]);
        const uint32_t c = key_class(half, row, scores[e], key);
        const int32_t token = first_token + 4 * q + e;
        uint32_t slot;
        if (c == 0) continue;
        if (c == 1) {
          slot = above_slot++;
        } else if (half.mode == RowMode::kCandidates) {
          scratch[j].candidates[second++] = make_uint2(key, static_cast<uint32_t>(token));
          continue;
        } else {
          if (second >= row.rank) continue;  // ties beyond the k still needed
          slot = row.above + second++;
        }
        indices[out_row + slot] = token;
        if (values != nullptr) values[out_row + slot] = scores[e];
      }
    }
    // Padding: a row with fewer than k selectable tokens.
    if (split.x == 0 && half.mode == RowMode::kAll) {
      for (int slot = static_cast<int>(half.total) + tid; slot < k; slot += paged::kThreads) {
        indices[out_row + slot] = -1;
        if (values != nullptr) values[out_row + slot] = NAN;
      }
    }
    __syncthreads();  // s.base_* and s.scan are reused by the next row
  }

  // 6. The last block to arrive selects among each row's candidates.
  if (!any_candidates) return;
  if (tid == 0) {
    __threadfence();
    const uint32_t arrived = atomicAdd(barrier, 1u);
    s.last = arrived == (phase + 1) * blocks - 1;
    if (s.last) __threadfence();
  }
  __syncthreads();
  if (!s.last) return;
  auto* keys = reinterpret_cast<uint32_t*>(s.scores);
  auto* tokens = reinterpret_cast<int32_t*>(s.scores + kCandidates);
  for (int j = 0; j < next_n; ++j) {
    if (s.half_rows[j].mode != RowMode::kCandidates) continue;
    select_candidates(s.half_rows[j], scratch[j], k, (int64_t{b} * next_n + j) * k, indices,
                      values, keys, tokens, staged, &s.rows[j], s.scan, s.candidate_counts);
    __syncthreads();
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


// The workspace: the rows' counters and the requests' barrier counters (reset before each launch),
// then the rows' scratch.
struct FusedLayout {
  std::size_t counter_bytes;
  std::size_t scratch_offset;
  std::size_t bytes;
};
FusedLayout fused_layout(const PagedIndexerProblem& problem) {
  const auto rows = static_cast<std::size_t>(problem.batch * problem.next_n);
  static_assert(sizeof(RowCounters) % sizeof(uint32_t) == 0, "the counters are words");
  const std::size_t counter_bytes =
      rows * sizeof(RowCounters) + static_cast<std::size_t>(problem.batch) * sizeof(uint32_t);
  const std::size_t scratch_offset = (counter_bytes + 255) / 256 * 256;
  return {counter_bytes, scratch_offset, scratch_offset + rows * sizeof(RowScratch)};
}

}  // namespace

int64_t paged_fused_score_capacity(int heads, int columns) {
  return dispatch_paged_shape(heads, columns, [](auto h, auto c) -> int64_t {
    return FusedShared<decltype(h)::value, decltype(c)::value>::kScoreFloats;
  });
}

std::size_t paged_fused_workspace_bytes(const PagedIndexerProblem& problem) {
  return fused_layout(problem).bytes;
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

Status launch_paged_fused(const PagedLaunch& launch, const PagedIndexerProblem& problem,
                          void* workspace, cudaStream_t stream) {
  if (launch.batch == 0) return Status::ok();
  const FusedLayout layout = fused_layout(problem);
  auto* base = static_cast<unsigned char*>(workspace);
  if (Status s = cuda_common::launch_counter_reset(
          reinterpret_cast<uint32_t*>(base), static_cast<int64_t>(layout.counter_bytes / 4), stream);
      !s) {
    return s;
  }
  auto* row_counters = reinterpret_cast<RowCounters*>(base);
  auto* request_counters = reinterpret_cast<uint32_t*>(
      base + static_cast<std::size_t>(problem.batch * problem.next_n) * sizeof(RowCounters));
  auto* row_scratch = reinterpret_cast<RowScratch*>(base + layout.scratch_offset);
  int smem = 0;
  const void* kernel = kernel_for(launch.heads, launch.columns, &smem);
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  int sms = 0;
  if (Status s = paged_sm_count(&sms); !s) return s;
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
                         &row_counters,
                         &request_counters,
                         &row_scratch};
  return cuda_common::launch_cooperative(kernel, dim3(static_cast<unsigned>(sms)), paged::kThreads,
                                        smem, stream, kernel_args, /*dependent=*/true);
}

}  // namespace litetopk::cuda_indexer
