// The fused paged decode indexer: scores and exact top-k in one launch, without a
// [rows, max_context] buffer. For decode's small batches: a request's context is split over
// `splits` blocks (all resident at once: a cooperative launch), each keeping its tiles' scores in
// shared memory, and the blocks of a request find each row's k-th score together with a
// three-digit radix select over histograms summed in global memory.
//
// Pipeline of paged_fused_kernel (grid: splits x B; block (x, b) takes tiles
// [x * tiles_per_split, + tiles_per_split) of request b):
// 1.-3. paged_scoring_sm90.cuh scores the block's tiles; the epilogue stores every score of the
//    block's range in shared memory, NaN for tokens a query does not see or of blocks outside the
//    cache (the key 0 of formats/score_keys.h: never selected).
// 4. Select, per row, digits of 11, 11 and 10 bits of the order-preserving keys, most
//    significant first: each block histograms its keys that match the digits found so far (the
//    histograms live where the key-tile ring was) and adds them into the row's global histogram;
//    the request's blocks meet at a barrier (an atomic counter); then every block copies the same
//    sums into shared memory and finds the same digit: the bin holding the row's k-th key. A row is done when its
//    bin holds exactly the entries still needed, after the third digit, or after the first when
//    the row has at most k selectable tokens (all are taken).
// 5. Emit: each block counts its entries above the pivot and its ties, reserves slots for them
//    with one atomic add per row and counter, and writes positions (and values) there; ties
//    beyond the k - above still needed are dropped. Block 0 writes the -1 padding.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/cuda_check.h"
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
constexpr int kSharedBytes = 232448;  // the most dynamic shared memory a block can have on sm_90

// The workspace of one row (zeroed before the launch).
struct RowWorkspace {
  uint32_t histograms[kPasses][kBins];
  uint32_t above_count;  // slots reserved for entries above the pivot
  uint32_t tie_count;    // slots reserved for ties
};

template <int kHeads, int kColumns>
struct FusedShared {
  static constexpr int kScoringBytes =
      static_cast<int>(sizeof(paged::PagedScoringStorage<kHeads, kColumns, kFusedStages>));
  static constexpr int kScoreFloats = (kSharedBytes - kScoringBytes - 1024) / 4 / 64 * 64;
};

template <int kHeads, int kColumns>
struct alignas(1024) FusedStorage {
  paged::PagedScoringStorage<kHeads, kColumns, kFusedStages> scoring;
  float scores[FusedShared<kHeads, kColumns>::kScoreFloats];  // [next_n][span]
  RowSelect rows[kMaxNextN];
  uint32_t local_above[kMaxNextN];
  uint32_t local_ties[kMaxNextN];
  uint32_t base_above[kMaxNextN];
  uint32_t base_ties[kMaxNextN];
};

struct FusedEpilogue {
  const PagedArgs& args;
  float* scores;
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
    }
  }
};

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(paged::kThreads, 1)
    paged_fused_kernel(const __grid_constant__ CUtensorMap q_map,
                       const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                       int32_t k, int32_t* indices, float* values, RowWorkspace* row_ws,
                       uint32_t* request_counters) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<FusedStorage<kHeads, kColumns>*>(shared_raw);
  const int b = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int next_n = args.next_n;
  if (tid == 0) paged::init_scoring(s.scoring);
  if (tid < kMaxNextN) s.rows[tid] = RowSelect{0u, 32, static_cast<uint32_t>(k), 0u, false};
  __syncthreads();

  // 1.-3.
  const paged::TileRange range = paged::tile_range(args, b);
  const int32_t span = args.tiles_per_split * paged::kTileKeys;
  const int32_t first_token = range.begin * paged::kTileKeys;
  const int32_t count = (range.end - range.begin) * paged::kTileKeys;  // scored tokens
  FusedEpilogue epilogue{args, s.scores, span, first_token, b};
  paged::run_scoring<kHeads, kColumns, kFusedStages>(&q_map, &kv_map, args, s.scoring, b, range, epilogue);
  __syncthreads();

  // 4. The key-tile ring is free now: its bytes hold the block's histograms.
  auto* histograms = reinterpret_cast<uint32_t(*)[kBins]>(&s.scoring.kv[0][0]);
  static_assert(sizeof(s.scoring.kv) >= kMaxNextN * kBins * sizeof(uint32_t), "ring too small");
  RowWorkspace* rows_ws = row_ws + int64_t{b} * next_n;
  uint32_t* barrier = request_counters + b;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool all_done = true;
    for (int j = 0; j < next_n; ++j) all_done = all_done && s.rows[j].done;
    if (all_done) break;
    for (int i = tid; i < next_n * kBins; i += paged::kThreads) histograms[i / kBins][i % kBins] = 0;
    __syncthreads();
    const int shift = digit_shift(pass);
    const uint32_t mask = digit_mask(pass);
    for (int j = 0; j < next_n; ++j) {
      const RowSelect row = s.rows[j];
      if (row.done) continue;
      const float* row_scores = s.scores + j * span;
      for (int i = tid; i < count; i += paged::kThreads) {
        const uint32_t key = score_key(row_scores[i]);
        if (key != 0 && radix::matches(row, key)) atomicAdd(&histograms[j][(key >> shift) & mask], 1u);
      }
    }
    __syncthreads();
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;
      for (int bin = tid; bin < kBins; bin += paged::kThreads) {
        const uint32_t n = histograms[j][bin];
        if (n != 0) atomicAdd(&rows_ws[j].histograms[pass][bin], n);
      }
    }
    cuda_common::group_barrier(barrier, gridDim.x, static_cast<uint32_t>(pass + 1));
    // The sums replace the block's own counts (one coalesced read instead of dependent ones).
    for (int j = 0; j < next_n; ++j) {
      if (s.rows[j].done) continue;
      for (int bin = tid; bin < kBins; bin += paged::kThreads) {
        histograms[j][bin] = __ldcg(&rows_ws[j].histograms[pass][bin]);
      }
    }
    __syncthreads();
    if (warp < next_n) {
      RowSelect row = s.rows[warp];
      if (!row.done) {
        uint32_t digit, above, in_bin, total;
        radix::find_digit(histograms[warp], radix::digit_bins(pass), row.rank, lane, &digit,
                          &above, &in_bin, &total);
        if (pass == 0 && total <= row.rank) {
          // At most k selectable tokens: every key >= 1 is "above" prefix 0 at shift 0.
          row = RowSelect{0u, 0, 0u, total, true};
        } else {
          row = radix::advance(row, pass, digit, above, in_bin);
        }
        if (lane == 0) s.rows[warp] = row;
      }
    }
    __syncthreads();
  }

  // 5. Emit: count, reserve, write.
  if (tid < next_n) {
    s.local_above[tid] = 0;
    s.local_ties[tid] = 0;
  }
  __syncthreads();
  for (int j = 0; j < next_n; ++j) {
    const RowSelect row = s.rows[j];
    const float* row_scores = s.scores + j * span;
    uint32_t above = 0;
    uint32_t ties = 0;
    for (int i = tid; i < count; i += paged::kThreads) {
      const uint32_t key = score_key(row_scores[i]);
      if (key == 0) continue;
      const uint32_t v = key >> row.shift;
      above += v > row.prefix;
      ties += v == row.prefix;
    }
    if (above) atomicAdd(&s.local_above[j], above);
    if (ties) atomicAdd(&s.local_ties[j], ties);
  }
  __syncthreads();
  if (tid < next_n) {
    s.base_above[tid] = s.local_above[tid] ? atomicAdd(&rows_ws[tid].above_count, s.local_above[tid]) : 0;
    s.base_ties[tid] = s.local_ties[tid] ? atomicAdd(&rows_ws[tid].tie_count, s.local_ties[tid]) : 0;
    s.local_above[tid] = 0;
    s.local_ties[tid] = 0;
  }
  __syncthreads();
  for (int j = 0; j < next_n; ++j) {
    const RowSelect row = s.rows[j];
    const float* row_scores = s.scores + j * span;
    const int64_t out_row = (int64_t{b} * next_n + j) * k;
    for (int i = tid; i < count; i += paged::kThreads) {
      const float score = row_scores[i];
      const uint32_t key = score_key(score);
      if (key == 0) continue;
      const uint32_t v = key >> row.shift;
      uint32_t slot;
      if (v > row.prefix) {
        slot = s.base_above[j] + atomicAdd(&s.local_above[j], 1u);
      } else if (v == row.prefix) {
        const uint32_t t = s.base_ties[j] + atomicAdd(&s.local_ties[j], 1u);
        if (t >= row.rank) continue;
        slot = row.above + t;
      } else {
        continue;
      }
      indices[out_row + slot] = first_token + i;
      if (values != nullptr) values[out_row + slot] = score;
    }
    // Padding: a row with fewer than k selectable tokens.
    if (blockIdx.x == 0) {
      for (int slot = static_cast<int>(row.above + row.rank) + tid; slot < k; slot += paged::kThreads) {
        indices[out_row + slot] = -1;
        if (values != nullptr) values[out_row + slot] = NAN;
      }
    }
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

Status launch_paged_fused(const PagedLaunch& launch, const PagedIndexerProblem& problem,
                          void* workspace, cudaStream_t stream) {
  if (launch.batch == 0) return Status::ok();
  const std::size_t ws_bytes = paged_fused_workspace_bytes(problem);
  LITETOPK_CUDA_TRY(cudaMemsetAsync(workspace, 0, ws_bytes, stream));
  auto* row_ws = static_cast<RowWorkspace*>(workspace);
  auto* request_counters = reinterpret_cast<uint32_t*>(
      static_cast<unsigned char*>(workspace) +
      static_cast<std::size_t>(problem.batch * problem.next_n) * sizeof(RowWorkspace));
  int smem = 0;
  const void* kernel = kernel_for(launch.heads, launch.columns, &smem);
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
  int32_t k = static_cast<int32_t>(problem.k);
  int32_t* indices = problem.indices;
  float* values = problem.values;
  void* kernel_args[] = {const_cast<CUtensorMap*>(&launch.q_map),
                         const_cast<CUtensorMap*>(&launch.kv_map),
                         const_cast<paged::PagedArgs*>(&launch.args),
                         &k,
                         &indices,
                         &values,
                         &row_ws,
                         &request_counters};
  return cuda_common::launch_cooperative(kernel, dim3(launch.splits, launch.batch), paged::kThreads,
                                        smem, stream, kernel_args);
}

}  // namespace litetopk::cuda_indexer
