// The gated decode path's bound: the previous step's top-k positions of each row, re-scored with
// this step's query. They are a subset of the row's visible keys, so once k distinct ones are
// selectable (visible, of a block inside the cache, not NaN) the smallest of their new scores is a
// lower bound of the row's k-th best; the gated kernel reads this kernel's per-block minima and
// counts and gates at that bound (or at -inf with fewer than k). Any state content is safe:
// duplicates, positions outside the visible context and stale positions only weaken the bound.
//
// Pipeline of decode_bound_kernel (grid: bound_splits x B; block (x, b) takes history slots
// [x * bound_tiles * 64, + bound_tiles * 64) of each of request b's next_n rows):
// 1. Block x = 0 zeroes the request's candidate counts (the gated kernel appends after this grid).
// 2. Per row, all threads insert the row's k history positions that lie in its visible context
//    into a shared-memory hash set (position -> smallest slot holding it); a slot of the block's
//    range counts when it holds the first occurrence of its position and the position's block is
//    inside the cache; its cache row (block * 66 + slot, 128-byte rows) and scale are noted.
// 3. paged_scoring_sm90.cuh scores the gathered tiles (64 history slots each, row j's tiles
//    after row j - 1's): the producer loads each counted slot's 128 key bytes by TMA (one-row
//    boxes land where a whole block's box puts them, the swizzle being a function of the shared
//    address) and copies the slot's scale into the stage, so the scores are bit-identical to the
//    paged core's for the same token.
// 4. Epilogue: each counted, non-NaN score of query j on row j's tiles updates the thread's
//    minimum key and count; warps, then the block reduce them; the block writes its partials.
#include <cuda_runtime_api.h>

#include <climits>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/decode_state_kernels.h"
#include "cuda/indexer/paged_radix_select.cuh"
#include "cuda/indexer/paged_scoring_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;

constexpr int kBoundStages = 6;
constexpr int kMaxNextN = 4;
constexpr int kMaxGatherTiles = 16;  // next_n * bound_tiles
constexpr int kSlots = kMaxGatherTiles * paged::kTileKeys;
constexpr int32_t kEmpty = -1;

template <int kHeads, int kColumns>
struct alignas(1024) BoundStorage {
  paged::PagedScoringStorage<kHeads, kColumns, kBoundStages> scoring;
  int32_t slot_rows[kSlots];  // the counted slot's cache row, or -1
  float slot_scales[kSlots];
  uint32_t row_min[kMaxNextN];
  uint32_t row_count[kMaxNextN];
  // Then the hash set: int32 positions [hash_size], int32 smallest slots [hash_size].
};

__device__ __forceinline__ uint32_t hash_of(int32_t position, uint32_t mask) {
  return (static_cast<uint32_t>(position) * 2654435761u) & mask;
}

struct BoundEpilogue {
  const int32_t* slot_rows;
  int32_t bound_tiles;
  uint32_t min_key[kMaxNextN];
  uint32_t count[kMaxNextN];

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int tile, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], bool,
                                               int quad_lane) {
    if (quad_lane > 1) return;
    const int j = tile / bound_tiles;
    const int slot = tile * paged::kTileKeys + row0 + 8 * quad_lane;
    if (slot_rows[slot] < 0) return;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      if (first_query + bq != j) continue;
      const uint32_t key = radix::score_key(quad_lane == 0 ? scores0[bq] : scores1[bq]);
      if (key == 0) continue;  // NaN: not selectable
#pragma unroll
      for (int jj = 0; jj < kMaxNextN; ++jj) {
        if (jj == j) {
          min_key[jj] = min(min_key[jj], key);
          ++count[jj];
        }
      }
    }
  }
};

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(paged::kThreads, 1)
    decode_bound_kernel(const __grid_constant__ CUtensorMap q_map,
                        const __grid_constant__ CUtensorMap row_map, const PagedArgs args,
                        const int32_t* previous, int32_t k, int32_t bound_tiles,
                        int32_t bound_splits, uint32_t hash_mask, uint32_t* partial_keys,
                        uint32_t* partial_counts, uint32_t* counts) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<BoundStorage<kHeads, kColumns>*>(shared_raw);
  auto* hash_positions = reinterpret_cast<int32_t*>(shared_raw + sizeof(BoundStorage<kHeads, kColumns>));
  int32_t* hash_slots = hash_positions + hash_mask + 1;
  sm90::allow_dependent_grids();
  const int b = static_cast<int>(blockIdx.y);
  const int x = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int next_n = args.next_n;
  if (tid == 0) paged::init_scoring(s.scoring);
  if (tid < kMaxNextN) {
    s.row_min[tid] = UINT_MAX;
    s.row_count[tid] = 0;
  }
  // 1.
  if (x == 0 && tid < next_n) counts[b * next_n + tid] = 0;
  // 2.
  const int32_t first_slot = x * bound_tiles * paged::kTileKeys;
  const int block_slots = next_n * bound_tiles * paged::kTileKeys;
  const int32_t* table = args.block_table + int64_t{b} * args.max_blocks;
  for (int j = 0; j < next_n; ++j) {
    const int32_t visible = paged::visible_tokens(args, b, j);
    const int32_t* history = previous + (int64_t{b} * next_n + j) * k;
    for (uint32_t i = tid; i <= hash_mask; i += paged::kThreads) {
      hash_positions[i] = kEmpty;
      hash_slots[i] = INT_MAX;
    }
    __syncthreads();
    for (int32_t i = tid; i < k; i += paged::kThreads) {
      const int32_t position = history[i];
      if (position < 0 || position >= visible) continue;
      for (uint32_t h = hash_of(position, hash_mask);; h = (h + 1) & hash_mask) {
        const int32_t held = atomicCAS(&hash_positions[h], kEmpty, position);
        if (held == kEmpty || held == position) {
          atomicMin(&hash_slots[h], i);
          break;
        }
      }
    }
    __syncthreads();
    for (int i = tid; i < bound_tiles * paged::kTileKeys; i += paged::kThreads) {
      const int32_t slot = first_slot + i;
      int32_t row = -1;
      float scale = 0.0f;
      const int32_t position = slot < k ? history[slot] : -1;
      if (position >= 0 && position < visible) {
        uint32_t h = hash_of(position, hash_mask);
        while (hash_positions[h] != position) h = (h + 1) & hash_mask;
        const int32_t entry = table[position / paged::kTileKeys];
        if (hash_slots[h] == slot && paged::block_in_cache(args, entry)) {
          const int32_t within = position % paged::kTileKeys;
          row = entry * static_cast<int32_t>(paged::kBlockBytes / paged::kHeadDim) + within;
          scale = *reinterpret_cast<const float*>(args.kv_cache + int64_t{entry} * paged::kBlockBytes +
                                                  paged::kScalesOffset + within * 4);
        }
      }
      s.slot_rows[j * bound_tiles * paged::kTileKeys + i] = row;
      s.slot_scales[j * bound_tiles * paged::kTileKeys + i] = scale;
    }
    __syncthreads();
  }
  // 3.-4.
  BoundEpilogue epilogue{s.slot_rows, bound_tiles, {}, {}};
#pragma unroll
  for (int j = 0; j < kMaxNextN; ++j) {
    epilogue.min_key[j] = UINT_MAX;
    epilogue.count[j] = 0;
  }
  const int gathered = block_slots / paged::kTileKeys;
  auto produce_gathered = [&](int lane) {
    paged::stage_query(&q_map, &row_map, args, s.scoring, b, lane);
    for (int t = 0; t < gathered; ++t) {
      const uint32_t stage = static_cast<uint32_t>(t) % kBoundStages;
      sm90::mbarrier_wait(&s.scoring.kv_empty[stage], ((static_cast<uint32_t>(t) / kBoundStages) & 1) ^ 1);
      const int32_t row_a = s.slot_rows[t * paged::kTileKeys + lane];
      const int32_t row_b = s.slot_rows[t * paged::kTileKeys + 32 + lane];
      s.scoring.scales[stage][lane] = s.slot_scales[t * paged::kTileKeys + lane];
      s.scoring.scales[stage][32 + lane] = s.slot_scales[t * paged::kTileKeys + 32 + lane];
      const int loads = __popc(__ballot_sync(0xffffffffu, row_a >= 0)) +
                        __popc(__ballot_sync(0xffffffffu, row_b >= 0));
      __syncwarp();
      if (lane == 0) {
        s.scoring.entries[stage] = 0;
        if (loads > 0) {
          sm90::mbarrier_arrive_expect_bytes(&s.scoring.kv_full[stage], loads * paged::kHeadDim);
        } else {
          sm90::mbarrier_arrive(&s.scoring.kv_full[stage]);
        }
      }
      __syncwarp();
      if (row_a >= 0) {
        sm90::tma_load_2d(s.scoring.kv[stage] + lane * paged::kHeadDim, &row_map, 0, row_a,
                          &s.scoring.kv_full[stage]);
      }
      if (row_b >= 0) {
        sm90::tma_load_2d(s.scoring.kv[stage] + (32 + lane) * paged::kHeadDim, &row_map, 0, row_b,
                          &s.scoring.kv_full[stage]);
      }
    }
  };
  paged::run_scoring_with<kHeads, kColumns, kBoundStages>(args, s.scoring, b,
                                                          paged::TileRange{0, gathered},
                                                          produce_gathered, epilogue);
  if (tid < paged::kMathThreads) {
#pragma unroll
    for (int j = 0; j < kMaxNextN; ++j) {
      uint32_t m = epilogue.min_key[j];
      uint32_t c = epilogue.count[j];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        m = min(m, __shfl_xor_sync(0xffffffffu, m, offset));
        c += __shfl_xor_sync(0xffffffffu, c, offset);
      }
      if (tid % 32 == 0 && c > 0) {
        atomicMin(&s.row_min[j], m);
        atomicAdd(&s.row_count[j], c);
      }
    }
  }
  __syncthreads();
  if (tid < next_n) {
    const int64_t at = (int64_t{b} * next_n + tid) * bound_splits + x;
    partial_keys[at] = s.row_min[tid];
    partial_counts[at] = s.row_count[tid];
  }
}

template <int kHeads, int kColumns>
int bound_smem(uint32_t hash_size) {
  return static_cast<int>(sizeof(BoundStorage<kHeads, kColumns>) + 2 * sizeof(int32_t) * hash_size);
}

}  // namespace

Status launch_decode_bound(const PagedLaunch& launch, const CUtensorMap& row_map,
                           const PagedIndexerProblem& problem, const DecodeBuffers& buffers,
                           cudaStream_t stream) {
  if (launch.batch == 0) return Status::ok();
  uint32_t hash_size = 64;
  while (hash_size < 2 * static_cast<uint32_t>(problem.k)) hash_size *= 2;
  return dispatch_paged_shape(launch.heads, launch.columns, [&](auto heads, auto columns) {
    constexpr int kHeads = decltype(heads)::value;
    constexpr int kColumns = decltype(columns)::value;
    const void* kernel = reinterpret_cast<const void*>(decode_bound_kernel<kHeads, kColumns>);
    const int smem = bound_smem<kHeads, kColumns>(hash_size);
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
    auto* q_map = const_cast<CUtensorMap*>(&launch.q_map);
    auto* rows = const_cast<CUtensorMap*>(&row_map);
    auto* args = const_cast<paged::PagedArgs*>(&launch.args);
    const int32_t* previous = buffers.previous;
    int32_t k = static_cast<int32_t>(problem.k);
    int32_t bound_tiles = buffers.bound_tiles;
    int32_t bound_splits = buffers.bound_splits;
    uint32_t hash_mask = hash_size - 1;
    uint32_t* partial_keys = buffers.partial_keys;
    uint32_t* partial_counts = buffers.partial_counts;
    uint32_t* counts = buffers.counts;
    void* kernel_args[] = {q_map,        rows,          args,           &previous,
                           &k,           &bound_tiles,  &bound_splits,  &hash_mask,
                           &partial_keys, &partial_counts, &counts};
    return launch_decode_kernel(kernel, dim3(static_cast<unsigned>(buffers.bound_splits), launch.batch),
                                paged::kThreads, smem, /*dependent=*/false, stream, kernel_args);
  });
}

}  // namespace litetopk::cuda_indexer
