// The fused retrieval path's scoring kernel (fused_retrieval.h).
//
// Pipeline of fused_retrieval_kernel (sm_90a, one block per SM: a producer warpgroup and two math
// warpgroups; block (x, y) owns queries 64 y .. 64 y + 63 and the walk's tiles x, x + splits, ...;
// a walk is every corpus tile (gate mode) or every sample_stride-th one (sample mode)):
// 1. The producer's first thread loads the block's queries once (TMA, one 64 x 64-column slice per
//    128-byte box, 128-byte swizzle), then streams the 128-row x 64-column slices of the block's
//    tiles in walk order through one ring, each stage refilled once its reader has released it.
// 2. Math warpgroup w takes the block's tiles w, w + 2, ... (ping-pong: one's epilogue runs beside
//    the other's products, and the ring keeps loading meanwhile): per slice four wgmma
//    m64n128k16 into 64 fp32 accumulators per thread. A warpgroup waits for its tile's slices
//    only once every warp of the other has seen its previous tile's slices arrive, so no wait is
//    ever more than one phase ahead of its barrier (a handshake by one warp let a lagging warp's
//    wait fall two phases behind: a hang with one or two slices a tile).
// 3. Epilogue, the unfused path's arithmetic in fp32: l2's (2 s - ||c||^2) - ||q||^2; NaN for a
//    row past n, cleared in the bitmap or outside the query's range (clamped into [0, n]).
// 4. Sample mode: the scores go to the sample rows. Gate mode: a score's composite (key, ~row) is
//    kept when it is above the query's gate, appended to the warpgroup's list of the query: a
//    branch-free pass marks the survivors, one shared atomic per quad of lanes and query row
//    reserves their slots, and a second pass (only where some survive) stages them in shared
//    memory, from where whole runs go to the list.
// 5. A barrier with an OR reduction says whether a list passed capacity - 128; each such list
//    keeps its k best (ListTeam::keep_best) and its gate rises to their k-th: any later row at or
//    below it is beaten by k rows of the same list, so nothing that can be in the answer is lost.
// 6. Gate mode: each list moves to the end of its query's pool (one global atomic reserves its
//    slots); what does not fit stays at the start of the list, and how much that is goes to the
//    workspace.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/wgmma_sm90.cuh"
#include "cuda/indexer/candidate_list.cuh"
#include "cuda/retrieval/corpus_filters.cuh"
#include "cuda/retrieval/fused_retrieval.h"
#include "formats/score_keys.h"

namespace litetopk::cuda_retrieval {
namespace {

constexpr int kThreads = 128 * (1 + kFusedMathGroups);
constexpr int kSliceBytes = 128;  // one TMA box row: 64 16-bit columns
constexpr int kQuerySliceBytes = kFusedQueryRows * kSliceBytes;
constexpr int kStageBytes = kFusedTileRows * kSliceBytes;
constexpr int kMaxStages = 8;
constexpr int kMathWarps = 4;
constexpr uint32_t kProducerRegisters = 40;
constexpr uint32_t kMathRegisters = 232;

// Survivors wait in shared memory, kStaged a query, and leave in runs of consecutive slots:
// fewer, wider stores than one scattered 8-byte store per survivor. The staging area is the
// team's histogram, free outside keep_best.
constexpr uint32_t kStaged = 16;

struct MathState {
  uint64_t gate[kFusedQueryRows];
  uint32_t count[kFusedQueryRows];
  uint32_t flushed[kFusedQueryRows];  // list entries in global memory; the next kStaged are staged
  cuda_indexer::ListScratch<kMathWarps> scratch;
};
static_assert(sizeof(MathState::scratch.histogram) >= kFusedQueryRows * kStaged * sizeof(uint64_t),
              "the staging area is the histogram");

struct Control {
  uint64_t full[kMaxStages];
  uint64_t empty[kMaxStages];
  // Every warp of warpgroup w saw all slices of one of its tiles arrive.
  uint64_t slices_seen[kFusedMathGroups];
  uint64_t queries_full;
  MathState math[kFusedMathGroups];
};

struct ScanArgs {
  int32_t batch;
  int32_t n;
  int32_t slices;      // ceil(dim / 64)
  int32_t stages;
  int32_t splits;      // gridDim.x
  int32_t walk_step;   // 1 (gate mode) or the sample stride, in tiles
  int32_t walk_tiles;  // tiles in the walk
  int32_t lanes;       // lists per query: splits x kFusedMathGroups
  int32_t capacity;
  int32_t k;
  const float* corpus_norms;
  const float* query_norms;
  const uint8_t* bitmap;
  const int32_t* starts;
  const int32_t* ends;
  float* sample_scores;
  const uint64_t* gates;
  uint64_t* lists;
  uint32_t* counts;
  uint64_t* pool;
  uint32_t* pool_counts;
  int32_t pool_capacity;
};

int shared_bytes(int slices, int stages) {
  return 1024 + slices * kQuerySliceBytes + stages * kStageBytes +
         static_cast<int>(sizeof(Control));
}

// The queries, once (the producer's first thread).
__device__ void load_queries(const CUtensorMap* query_map, const ScanArgs& a,
                             unsigned char* queries, Control& control) {
  sm90::prefetch_tensor_map(query_map);
  sm90::mbarrier_arrive_expect_bytes(&control.queries_full,
                                     static_cast<uint32_t>(a.slices * kQuerySliceBytes));
  const int32_t query_row = static_cast<int32_t>(blockIdx.y) * kFusedQueryRows;
  for (int s = 0; s < a.slices; ++s) {
    sm90::tma_load_2d(queries + s * kQuerySliceBytes, query_map, s * kSliceBytes, query_row,
                      &control.queries_full);
  }
}

// The block's tiles through the ring, slice after slice (the producer's first thread).
__device__ void produce(const CUtensorMap* corpus_map, const ScanArgs& a, unsigned char* ring,
                        Control& control) {
  sm90::prefetch_tensor_map(corpus_map);
  uint32_t position = 0;
  for (int32_t walk = static_cast<int32_t>(blockIdx.x); walk < a.walk_tiles; walk += a.splits) {
    const int32_t first_row = walk * a.walk_step * kFusedTileRows;
    for (int s = 0; s < a.slices; ++s, ++position) {
      const uint32_t stage = position % static_cast<uint32_t>(a.stages);
      const uint32_t round = position / static_cast<uint32_t>(a.stages);
      if (round > 0) sm90::mbarrier_wait(&control.empty[stage], (round - 1) & 1u);
      sm90::mbarrier_arrive_expect_bytes(&control.full[stage], kStageBytes);
      sm90::tma_load_2d(ring + stage * kStageBytes, corpus_map, s * kSliceBytes, first_row,
                        &control.full[stage]);
    }
  }
}

template <bool kBf16, bool kSample>
__device__ void consume(const ScanArgs& a, int group, unsigned char* queries, unsigned char* ring,
                        Control& control) {
  MathState& state = control.math[group];
  const int thread = static_cast<int>(threadIdx.x) - 128 * (1 + group);
  const int warp = thread / 32;
  const int lane = thread % 32;
  const uint32_t barrier_id = 1 + static_cast<uint32_t>(group);
  const int32_t query0 = static_cast<int32_t>(blockIdx.y) * kFusedQueryRows;
  const int32_t list_lane = static_cast<int32_t>(blockIdx.x) * kFusedMathGroups + group;
  if (thread < kFusedQueryRows) {
    const int32_t q = query0 + thread;
    state.count[thread] = 0;
    state.flushed[thread] = 0;
    // A padding query row keeps nothing (no composite is above ~0).
    if (!kSample) state.gate[thread] = q < a.batch ? a.gates[q] : ~uint64_t{0};
  }
  // This thread's two query rows of the result (wgmma_sm90.cuh's layout) and their ranges.
  const int rows[2] = {16 * warp + lane / 4, 16 * warp + lane / 4 + 8};
  int32_t begin[2];
  int32_t end[2];
  float query_norm[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int32_t q = query0 + rows[h];
    const bool real = q < a.batch;
    const QueryRows range = real ? query_rows(a.starts, a.ends, q, a.n) : QueryRows{0, 0};
    begin[h] = static_cast<int32_t>(range.start);
    end[h] = static_cast<int32_t>(range.end);
    query_norm[h] = real && a.query_norms != nullptr ? a.query_norms[q] : 0.0f;
  }
  const uint32_t limit = static_cast<uint32_t>(a.capacity - kFusedTileRows);
  cuda_indexer::ListTeam<kMathWarps> team{state.scratch, barrier_id, thread};
  uint64_t* staging = reinterpret_cast<uint64_t*>(state.scratch.histogram);
  // Warp w writes out the staged survivors of rows 16 w .. 16 w + 15: those whose staging is full
  // (all = false) or every one (all = true; then the lists hold entries [0, count)).
  auto flush_staged = [&](bool all) {
    const int own = 16 * warp + lane % 16;
    const uint32_t count = state.count[own];
    const uint32_t flushed = state.flushed[own];
    uint32_t pending = __ballot_sync(0xffffffffu, lane < 16 && (all ? count > flushed
                                                                   : count - flushed >= kStaged));
    while (pending != 0u) {
      const int i = __ffs(pending) - 1;
      pending &= pending - 1u;
      const uint32_t end = __shfl_sync(0xffffffffu, count, i);
      const uint32_t first = __shfl_sync(0xffffffffu, flushed, i);
      const int r = 16 * warp + i;
      if (static_cast<uint32_t>(lane) < min(end - first, kStaged)) {
        a.lists[(int64_t{query0 + r} * a.lanes + list_lane) * a.capacity + first + lane] =
            staging[r * kStaged + lane];
      }
      if (lane == i) state.flushed[r] = end;
    }
  };
  sm90::named_barrier(barrier_id, 128);
  sm90::mbarrier_wait(&control.queries_full, 0);
  const uint32_t query_low = sm90::swizzled_descriptor_low(queries);
  const uint32_t ring_low = sm90::swizzled_descriptor_low(ring);
  for (int32_t tile = group;; tile += kFusedMathGroups) {
    const int32_t walk = static_cast<int32_t>(blockIdx.x) + tile * a.splits;
    if (walk >= a.walk_tiles) break;
    // 2. Tile `tile` of the walk fills ring positions tile * slices onwards.
    if (tile > 0) {
      sm90::mbarrier_wait(&control.slices_seen[1 - group],
                          static_cast<uint32_t>((tile - 1) / kFusedMathGroups) & 1u);
    }
    float d[64];
    uint32_t previous = 0;
    uint32_t position = static_cast<uint32_t>(tile * a.slices);
    for (int s = 0; s < a.slices; ++s, ++position) {
      const uint32_t stage = position % static_cast<uint32_t>(a.stages);
      sm90::mbarrier_wait(&control.full[stage], (position / static_cast<uint32_t>(a.stages)) & 1u);
      if (s + 1 == a.slices && lane == 0) sm90::mbarrier_arrive(&control.slices_seen[group]);
      sm90::wgmma_fence();
#pragma unroll
      for (int step = 0; step < 4; ++step) {
        const uint64_t a_desc = sm90::swizzled_descriptor(
            query_low + static_cast<uint32_t>(s * (kQuerySliceBytes / 16) + 2 * step));
        const uint64_t b_desc = sm90::swizzled_descriptor(
            ring_low + stage * (kStageBytes / 16) + static_cast<uint32_t>(2 * step));
        sm90::wgmma_m64n128k16_16bit<kBf16>(d, a_desc, b_desc, s > 0 || step > 0);
      }
      sm90::wgmma_commit();
      if (s > 0) {
        sm90::wgmma_wait<1>();
        if (lane == 0) sm90::mbarrier_arrive(&control.empty[previous]);
      }
      previous = stage;
    }
    sm90::wgmma_wait<0>();
    if (lane == 0) sm90::mbarrier_arrive(&control.empty[previous]);
    sm90::fence_accumulators(d);
    // 3.
    const int32_t tile_row = walk * a.walk_step * kFusedTileRows;
    // This thread's corpus row of column 8 j + 2 (lane % 4) + c, its score for query row h
    // (static indices into d) and that score's composite.
    auto row_of = [&](int j, int c) { return tile_row + 8 * j + 2 * (lane % 4) + c; };
    auto score_of = [&](int j, int c, int h, float norm) {
      const float score = d[4 * j + 2 * h + c];
      return a.query_norms != nullptr ? (2.0f * score - norm) - query_norm[h] : score;
    };
    auto composite_of = [&](int j, int c, int h, float norm) {
      return keys::make_composite(
          keys::key_from_f32_bits(__float_as_uint(score_of(j, c, h, norm)), true),
          static_cast<uint32_t>(row_of(j, c)));
    };
    // Whether the row is in the corpus and the bitmap, and its squared norm (l2).
    auto allowed_of = [&](int32_t row) { return row < a.n && bitmap_allows(a.bitmap, row); };
    auto norm_of = [&](int32_t row, bool allowed) {
      return a.corpus_norms != nullptr && allowed ? a.corpus_norms[row] : 0.0f;
    };
    // Sample mode: the scores into the sample rows. 4. Gate mode: which scores pass (bit 2 j + c
    // of passed[h]), branch-free.
    const uint64_t gate[2] = {kSample ? 0 : state.gate[rows[0]], kSample ? 0 : state.gate[rows[1]]};
    uint32_t passed[2] = {0u, 0u};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int32_t row = row_of(j, c);
        const bool allowed = allowed_of(row);
        const float norm = norm_of(row, allowed);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool inside = allowed && row >= begin[h] && row < end[h];
          if constexpr (kSample) {
            const int32_t q = query0 + rows[h];
            const int64_t columns = int64_t{a.walk_tiles} * kFusedTileRows;
            if (q < a.batch) {
              a.sample_scores[int64_t{q} * columns + int64_t{walk} * kFusedTileRows +
                              (row - tile_row)] = inside ? score_of(j, c, h, norm) : NAN;
            }
          } else {
            const uint64_t composite = composite_of(j, c, h, norm);
            if (inside && composite > gate[h]) passed[h] |= 1u << (2 * j + c);
          }
        }
      }
    }
    if constexpr (kSample) continue;
    // The survivors' slots: the four lanes of a quad share their query rows, so one shared atomic
    // per quad and row reserves them all; then every survivor is stored, with no round trip.
    uint32_t slot[2];
    bool crossed = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t mine = static_cast<uint32_t>(__popc(passed[h]));
      const uint32_t inclusive = cuda_common::warp_inclusive_sum<4>(mine, lane);
      const uint32_t total = __shfl_sync(0xffffffffu, inclusive, 3, 4);
      uint32_t base = 0;
      if (lane % 4 == 3 && total > 0) base = atomicAdd(&state.count[rows[h]], total);
      base = __shfl_sync(0xffffffffu, base, 3, 4);
      slot[h] = base + inclusive - mine;
      crossed = crossed || (total > 0 && base + total > limit);
    }
    // Slots within kStaged of what is in global memory wait in shared memory, the rest go out.
    const uint32_t window[2] = {state.flushed[rows[0]], state.flushed[rows[1]]};
    if ((passed[0] | passed[1]) != 0u) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (((passed[h] >> (2 * j + c)) & 1u) == 0u) continue;
            // A survivor's row is allowed: its norm is loaded again only here.
            const uint64_t composite = composite_of(j, c, h, norm_of(row_of(j, c), true));
            const uint32_t at = slot[h]++;
            if (at - window[h] < kStaged) {
              staging[rows[h] * kStaged + (at - window[h])] = composite;
            } else {
              a.lists[(int64_t{query0 + rows[h]} * a.lanes + list_lane) * a.capacity + at] =
                  composite;
            }
          }
        }
      }
    }
    sm90::named_barrier(barrier_id, 128);
    flush_staged(false);
    // 5. (The barrier also orders this tile's flushes before the next tile's staging.)
    if (!sm90::named_barrier_or(barrier_id, 128, crossed)) continue;
    flush_staged(true);  // keep_best reads the lists and overwrites the staging area
    team.sync();
    for (int r = 0; r < kFusedQueryRows; ++r) {
      const uint32_t count = state.count[r];
      if (count <= limit) continue;
      uint64_t* list = a.lists + (int64_t{query0 + r} * a.lanes + list_lane) * a.capacity;
      const uint64_t raised = team.keep_best(list, count, static_cast<uint32_t>(a.k));
      if (thread == 0) {
        state.count[r] = static_cast<uint32_t>(a.k);
        state.flushed[r] = static_cast<uint32_t>(a.k);
        state.gate[r] = raised > state.gate[r] ? raised : state.gate[r];
      }
      team.sync();
    }
  }
  // 6. Lanes 0-15 of warp w reserve the pool slots of rows 16 w .. 16 w + 15, then the warp moves
  // them one after the other.
  if (kSample) return;
  flush_staged(true);
  sm90::named_barrier(barrier_id, 128);
  const int own = 16 * warp + lane % 16;
  const int32_t own_query = query0 + own;
  const bool reserves = lane < 16 && own_query < a.batch;
  const auto pool_capacity = static_cast<uint32_t>(a.pool_capacity);
  const uint32_t count = reserves ? state.count[own] : 0u;
  uint32_t base = 0;
  uint32_t fit = 0;  // how many of the list's first entries the reservation holds
  if (count > 0) {
    base = atomicAdd(&a.pool_counts[own_query], count);
    fit = base >= pool_capacity ? 0u : min(count, pool_capacity - base);
  }
  for (int j = 0; j < 16; ++j) {
    const uint32_t c = __shfl_sync(0xffffffffu, count, j);
    const uint32_t moved = __shfl_sync(0xffffffffu, fit, j);
    const uint32_t at = __shfl_sync(0xffffffffu, base, j);
    if (c == 0) continue;
    const int64_t q = query0 + 16 * warp + j;
    uint64_t* list = a.lists + (q * a.lanes + list_lane) * a.capacity;
    uint64_t* to = a.pool + q * a.pool_capacity + at;
    for (uint32_t i = static_cast<uint32_t>(lane); i < moved; i += 32) to[i] = list[i];
    // What did not fit moves to the list's start, 32 entries at a time (read, then written).
    for (uint32_t first = moved; moved > 0 && first < c; first += 32) {
      const uint32_t i = first + static_cast<uint32_t>(lane);
      const uint64_t entry = i < c ? list[i] : 0;
      __syncwarp();
      if (i < c) list[i - moved] = entry;
    }
  }
  if (reserves) a.counts[int64_t{own_query} * a.lanes + list_lane] = count - fit;
}

template <bool kBf16, bool kSample>
__global__ void __launch_bounds__(kThreads, 1)
    fused_retrieval_kernel(const __grid_constant__ CUtensorMap query_map,
                           const __grid_constant__ CUtensorMap corpus_map, const ScanArgs a) {
  extern __shared__ unsigned char shared_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(shared_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* queries = base;
  unsigned char* ring = queries + a.slices * kQuerySliceBytes;
  Control& control = *reinterpret_cast<Control*>(ring + a.stages * kStageBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      sm90::mbarrier_init(&control.full[s], 1);
      sm90::mbarrier_init(&control.empty[s], kMathWarps);  // lane 0 of each math warp
    }
    // Lane 0 of each math warp: a warp that lags its warpgroup still holds the other's phase back.
    for (int g = 0; g < kFusedMathGroups; ++g) {
      sm90::mbarrier_init(&control.slices_seen[g], kMathWarps);
    }
    sm90::mbarrier_init(&control.queries_full, 1);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  const int group = static_cast<int>(threadIdx.x) / 128;
  if (group == 0) {
    sm90::warpgroup_registers_decrease<kProducerRegisters>();
    if (threadIdx.x == 0) {
      load_queries(&query_map, a, queries, control);
      produce(&corpus_map, a, ring, control);
    }
    return;
  }
  sm90::warpgroup_registers_increase<kMathRegisters>();
  consume<kBf16, kSample>(a, group - 1, queries, ring, control);
}

}  // namespace

int fused_stage_count(int64_t dim) {
  const int slices = static_cast<int>((dim + 63) / 64);
  int stages = kMaxStages;
  while (stages > 2 && shared_bytes(slices, stages) > 227 * 1024) --stages;
  return stages;
}

Status launch_fused_scan(const RetrievalPlan& plan, const FusedScan& scan, bool sample,
                         cudaStream_t stream) {
  const RetrievalProblem& p = plan.problem;
  ScanArgs a{};
  a.batch = static_cast<int32_t>(p.batch);
  a.n = static_cast<int32_t>(p.n);
  a.slices = static_cast<int32_t>((p.dim + 63) / 64);
  a.stages = static_cast<int32_t>(plan.fused_stages);
  a.splits = static_cast<int32_t>(plan.fused_splits);
  a.walk_step = sample ? static_cast<int32_t>(plan.fused_sample_stride) : 1;
  a.walk_tiles = static_cast<int32_t>(sample ? plan.fused_sample_tiles
                                             : (p.n + kFusedTileRows - 1) / kFusedTileRows);
  a.lanes = a.splits * kFusedMathGroups;
  a.capacity = static_cast<int32_t>(plan.fused_list_capacity);
  a.k = static_cast<int32_t>(p.k);
  a.corpus_norms = scan.corpus_norms;
  a.query_norms = scan.query_norms;
  a.bitmap = scan.bitmap;
  a.starts = scan.starts;
  a.ends = scan.ends;
  a.sample_scores = scan.sample_scores;
  a.gates = scan.gates;
  a.lists = scan.lists;
  a.counts = scan.counts;
  a.pool = scan.pool;
  a.pool_counts = scan.pool_counts;
  a.pool_capacity = static_cast<int32_t>(plan.fused_pool_capacity);
  const int smem = shared_bytes(a.slices, a.stages);
  const dim3 grid(static_cast<unsigned>(a.splits),
                  static_cast<unsigned>((p.batch + kFusedQueryRows - 1) / kFusedQueryRows));
  auto run = [&](auto kernel) -> Status {
    if (Status s = cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel),
                                                            smem);
        !s) {
      return s;
    }
    kernel<<<grid, kThreads, smem, stream>>>(scan.query_map, scan.corpus_map, a);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  };
  const bool bf16 = p.dtype == DType::kBFloat16;
  if (sample) return bf16 ? run(fused_retrieval_kernel<true, true>) : run(fused_retrieval_kernel<false, true>);
  return bf16 ? run(fused_retrieval_kernel<true, false>) : run(fused_retrieval_kernel<false, false>);
}

}  // namespace litetopk::cuda_retrieval
