// The gated decode path's bound: the previous step's top-k positions of each row, re-scored with
// this step's query. They are a subset of the row's visible keys, so once k distinct ones are
// selectable (visible, of a block inside the cache, not NaN) the smallest of their new scores is a
// lower bound of the row's k-th best; the gated kernel reads this kernel's per-block minima and
// counts and gates at that bound (or at -inf with fewer than k). Any state content is safe:
// duplicates, positions outside the visible context and stale positions only weaken the bound.
//
// Pipeline of decode_bound_kernel (grid: bound_splits x B; block (x, b) takes history slots
// [x * bound_tiles * 64, + bound_tiles * 64) of each of request b's next_n rows):
// 1. Per row, the row's k history positions are staged in shared memory and those in its visible
//    context inserted into a shared-memory hash set (position -> smallest slot holding it); a
//    slot of the block's range counts when it holds the first occurrence of its position and the
//    position's block is inside the cache; its cache row (block * 66 + slot, 128-byte rows) and
//    scale are noted (each kind of global load issued for all of a thread's slots at once).
// 2. Every thread gathers: each counted slot's 128 key bytes in 16-byte pieces, eight loads in
//    flight per thread at a time, stored where the core's TMA would put them (the 128-byte
//    swizzle: piece c of tile row r at r * 128 + (c ^ r % 8) * 16), one ring stage per gathered
//    tile (64 history slots, row j's tiles after row j - 1's); the slot's scale goes into the
//    stage. A proxy fence, a block barrier, and the producer announces each stage full.
// 3. paged_scoring_sm90.cuh scores the gathered tiles, so the scores are bit-identical to the
//    paged core's for the same token.
// 4. Epilogue: each counted, non-NaN score of query j on row j's tiles updates the thread's
//    minimum key and count; warps, then the block reduce them; the block writes its partials.
#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>

#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/decode_state_kernels.h"
#include "cuda/indexer/paged_radix_select.cuh"
#include "cuda/indexer/paged_scoring_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;

constexpr int kBoundStages = 8;  // every gathered tile has its own stage
constexpr int kMaxNextN = 4;
constexpr int kMaxGatherTiles = kBoundStages;  // next_n * bound_tiles
constexpr int kPieces = paged::kHeadDim / 16;  // 16-byte pieces of a key row
constexpr int kSlots = kMaxGatherTiles * paged::kTileKeys;
constexpr int32_t kEmpty = -1;
constexpr int kSlotsPerThread = (kSlots + paged::kThreads - 1) / paged::kThreads;

template <int kHeads, int kColumns>
struct alignas(1024) BoundStorage {
  paged::PagedScoringStorage<kHeads, kColumns, kBoundStages> scoring;
  int32_t slot_rows[kSlots];  // the counted slot's cache row, or -1
  uint32_t row_min[kMaxNextN];
  uint32_t row_count[kMaxNextN];
  // Then the row's history [k]; the hash set (int32 positions [hash_size], then int32 smallest
  // slots [hash_size]) lies in the key-tile ring when it fits there (step 1 ends before the
  // gather), else after the history.
};

// Whether the hash set of `hash_size` entries fits in the ring.
template <int kHeads, int kColumns>
__host__ __device__ constexpr bool hash_in_ring(uint32_t hash_size) {
  return 2 * sizeof(int32_t) * hash_size <=
         sizeof(paged::PagedScoringStorage<kHeads, kColumns, kBoundStages>::kv);
}

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
                        const PagedArgs args,
                        const int32_t* previous, int32_t k, int32_t bound_tiles,
                        int32_t bound_splits, uint32_t hash_mask, uint32_t* partial_keys,
                        uint32_t* partial_counts) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<BoundStorage<kHeads, kColumns>*>(shared_raw);
  auto* staged = reinterpret_cast<int32_t*>(shared_raw + sizeof(BoundStorage<kHeads, kColumns>));
  int32_t* hash_positions = hash_in_ring<kHeads, kColumns>(hash_mask + 1)
                                ? reinterpret_cast<int32_t*>(&s.scoring.kv[0][0])
                                : staged + k;
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
  const int32_t first_slot = x * bound_tiles * paged::kTileKeys;
  const int block_slots = next_n * bound_tiles * paged::kTileKeys;
  const int32_t* table = args.block_table + int64_t{b} * args.max_blocks;
  for (int j = 0; j < next_n; ++j) {
    const int32_t visible = paged::visible_tokens(args, b, j);
    const int32_t* history = previous + (int64_t{b} * next_n + j) * k;
    // The row's history into shared memory (all loads in flight at once), the set cleared.
#pragma unroll 4
    for (int32_t i = tid; i < k; i += paged::kThreads) staged[i] = __ldg(history + i);
    for (uint32_t i = tid; i <= hash_mask; i += paged::kThreads) {
      hash_positions[i] = kEmpty;
      hash_slots[i] = INT_MAX;
    }
    __syncthreads();
    for (int32_t i = tid; i < k; i += paged::kThreads) {
      const int32_t position = staged[i];
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
    // The block's slots: first occurrences of visible positions, then their table entries and
    // scales, each kind of load issued for all of the thread's slots at once.
    const int row_slots = bound_tiles * paged::kTileKeys;
    int32_t position[kSlotsPerThread];
    int32_t entry[kSlotsPerThread];
#pragma unroll
    for (int u = 0; u < kSlotsPerThread; ++u) {
      const int i = tid + u * paged::kThreads;
      const int32_t slot = first_slot + i;
      position[u] = -1;
      if (i < row_slots && slot < k) {
        const int32_t p = staged[slot];
        if (p >= 0 && p < visible) {
          uint32_t h = hash_of(p, hash_mask);
          while (hash_positions[h] != p) h = (h + 1) & hash_mask;
          if (hash_slots[h] == slot) position[u] = p;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kSlotsPerThread; ++u) {
      entry[u] = position[u] >= 0 ? __ldg(table + position[u] / paged::kTileKeys) : -1;
    }
#pragma unroll
    for (int u = 0; u < kSlotsPerThread; ++u) {
      const int i = tid + u * paged::kThreads;
      if (i >= row_slots) continue;
      int32_t row = -1;
      float scale = 0.0f;
      if (position[u] >= 0 && paged::block_in_cache(args, entry[u])) {
        const int32_t within = position[u] % paged::kTileKeys;
        row = entry[u] * static_cast<int32_t>(paged::kBlockBytes / paged::kHeadDim) + within;
        scale = __ldg(reinterpret_cast<const float*>(args.kv_cache + int64_t{entry[u]} * paged::kBlockBytes +
                                                     paged::kScalesOffset) + within);
      }
      s.slot_rows[j * row_slots + i] = row;
      s.scoring.scales[(j * row_slots + i) / paged::kTileKeys][i % paged::kTileKeys] = scale;
    }
    __syncthreads();
  }
  // 2. The gather: kLoads pieces per thread per round, loaded, then stored swizzled.
  const int gathered = block_slots / paged::kTileKeys;
  {
    constexpr int kLoads = 8;
    const int pieces = block_slots * kPieces;
    for (int first = tid; first < pieces; first += kLoads * paged::kThreads) {
      uint4 held[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int piece = first + u * paged::kThreads;
        const int32_t row = piece < pieces ? s.slot_rows[piece / kPieces] : -1;
        if (row >= 0) {
          held[u] = __ldg(reinterpret_cast<const uint4*>(args.kv_cache + int64_t{row} * paged::kHeadDim) +
                          piece % kPieces);
        }
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int piece = first + u * paged::kThreads;
        const int32_t row = piece < pieces ? s.slot_rows[piece / kPieces] : -1;
        if (row >= 0) {
          const int slot = piece / kPieces;
          const int tile_row = slot % paged::kTileKeys;
          const int swizzled = (piece % kPieces) ^ (tile_row % 8);
          *reinterpret_cast<uint4*>(&s.scoring.kv[slot / paged::kTileKeys]
                                                 [tile_row * paged::kHeadDim + swizzled * 16]) = held[u];
        }
      }
    }
  }
  sm90::fence_proxy_async_shared();
  __syncthreads();
  // 2.-3.
  BoundEpilogue epilogue{s.slot_rows, bound_tiles, {}, {}};
#pragma unroll
  for (int j = 0; j < kMaxNextN; ++j) {
    epilogue.min_key[j] = UINT_MAX;
    epilogue.count[j] = 0;
  }
  auto produce_gathered = [&](int lane) {
    paged::stage_query(&q_map, &q_map, args, s.scoring, b, lane);
    if (lane == 0) {
      for (int t = 0; t < gathered; ++t) {
        s.scoring.entries[t] = 0;
        sm90::mbarrier_arrive(&s.scoring.kv_full[t]);
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
int bound_smem(uint32_t hash_size, int64_t k) {
  const std::size_t hash = hash_in_ring<kHeads, kColumns>(hash_size) ? 0 : 2 * hash_size;
  return static_cast<int>(sizeof(BoundStorage<kHeads, kColumns>) +
                          sizeof(int32_t) * (hash + static_cast<std::size_t>(k)));
}

}  // namespace

Status launch_decode_bound(const PagedLaunch& launch, const PagedIndexerProblem& problem, const DecodeBuffers& buffers,
                           cudaStream_t stream) {
  if (launch.batch == 0) return Status::ok();
  uint32_t hash_size = 64;
  while (hash_size < 2 * static_cast<uint32_t>(problem.k)) hash_size *= 2;
  return dispatch_paged_shape(launch.heads, launch.columns, [&](auto heads, auto columns) {
    constexpr int kHeads = decltype(heads)::value;
    constexpr int kColumns = decltype(columns)::value;
    const void* kernel = reinterpret_cast<const void*>(decode_bound_kernel<kHeads, kColumns>);
    const int smem = bound_smem<kHeads, kColumns>(hash_size, problem.k);
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
    auto* q_map = const_cast<CUtensorMap*>(&launch.q_map);
    auto* args = const_cast<paged::PagedArgs*>(&launch.args);
    const int32_t* previous = buffers.previous;
    int32_t k = static_cast<int32_t>(problem.k);
    int32_t bound_tiles = buffers.bound_tiles;
    int32_t bound_splits = buffers.bound_splits;
    uint32_t hash_mask = hash_size - 1;
    uint32_t* partial_keys = buffers.partial_keys;
    uint32_t* partial_counts = buffers.partial_counts;
    void* kernel_args[] = {q_map,        args,          &previous,
                           &k,           &bound_tiles,  &bound_splits,  &hash_mask,
                           &partial_keys, &partial_counts};
    return cuda_common::launch_dependent(
        kernel, dim3(static_cast<unsigned>(buffers.bound_splits), launch.batch), paged::kThreads,
        smem, /*dependent=*/false, stream, kernel_args);
  });
}

}  // namespace litetopk::cuda_indexer
