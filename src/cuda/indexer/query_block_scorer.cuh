// Scoring a block of queries against 128-key tiles with fp8 tensor cores (mma.sync m16n8k32 e4m3,
// sm_89+), shared by the logits kernel and the fused indexer kernel, so both compute bit-identical
// scores.
//
// The block holds kQueries queries: their q [kQueries, H, 128] (rows padded to 144 bytes, which
// makes the B-fragment loads bank-conflict free), head weights and clamped ranges live in shared
// memory. Each of the 8 warps owns 16 keys of a tile; keys sit on the M side of the mma and heads
// on the N side, so a thread holds 2 keys x 16 heads and the head reduction is 16 in-thread
// products plus two quad shuffles. After score(), lane 0 of each quad holds the scores of keys
// key0 and key1 = key0 + 8.
#pragma once

#include <cstdint>

namespace litetopk::cuda_indexer {

constexpr int kHeadDim = 128;
constexpr int kScorerWarps = 8;
constexpr int kScorerThreads = kScorerWarps * 32;
constexpr int kTileKeys = kScorerWarps * 16;  // 128
constexpr int kQueryRowPitch = kHeadDim + 16;

struct ScoreInputs {
  const uint8_t* q;
  const uint8_t* kv;
  const float* kv_scale;
  const float* weights;
  const int32_t* ks;
  const int32_t* ke;
  int32_t num_queries;
  int32_t num_keys;
};

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// max(0, x) that keeps NaN (a NaN input must give a NaN score, which is never selected).
__device__ __forceinline__ float relu_keep_nan(float x) { return x < 0.0f ? 0.0f : x; }

template <int kHeads, int kQueries>
struct QueryBlockScorer {
  static constexpr int kHeadTiles = kHeads / 8;

  struct Storage {
    alignas(16) uint8_t q_rows[kQueries * kHeads * kQueryRowPitch];
    float weights[kQueries][kHeads];
    int32_t range_begin[kQueries];
    int32_t range_end[kQueries];
  };

  Storage& s;
  const ScoreInputs& in;
  int t0;
  int lane;
  int group;      // the fragment row this thread holds (key0 - tile - 16 * warp)
  int quad_lane;  // position inside the quad
  int warp;
  int32_t union_begin;  // union of the block's ranges (empty: begin >= end)
  int32_t union_end;
  // The current tile's A fragments and key scales.
  uint32_t a[kHeadDim / 32][4];
  float scale0;
  float scale1;
  int key0;
  int key1;

  __device__ QueryBlockScorer(Storage& storage, const ScoreInputs& inputs, int first_query)
      : s(storage), in(inputs), t0(first_query) {
    lane = static_cast<int>(threadIdx.x) % 32;
    warp = static_cast<int>(threadIdx.x) / 32;
    group = lane / 4;
    quad_lane = lane % 4;
  }

  // Stages q, weights and ranges (queries past T get empty ranges and zero q). Ends with a barrier.
  __device__ void stage() {
    constexpr int kVectorsPerRow = kHeadDim / 16;
    for (int i = threadIdx.x; i < kQueries * kHeads * kVectorsPerRow; i += kScorerThreads) {
      const int row = i / kVectorsPerRow;  // query * kHeads + head
      const int part = i % kVectorsPerRow;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t0 + row / kHeads < in.num_queries) {
        v = *reinterpret_cast<const uint4*>(in.q + (int64_t{t0} * kHeads + row) * kHeadDim +
                                            part * 16);
      }
      *reinterpret_cast<uint4*>(s.q_rows + row * kQueryRowPitch + part * 16) = v;
    }
    for (int i = threadIdx.x; i < kQueries * kHeads; i += kScorerThreads) {
      const int t = t0 + i / kHeads;
      s.weights[i / kHeads][i % kHeads] =
          t < in.num_queries ? in.weights[int64_t{t} * kHeads + i % kHeads] : 0.0f;
    }
    if (threadIdx.x < kQueries) {
      const int t = t0 + static_cast<int>(threadIdx.x);
      int32_t begin = 0;
      int32_t end = 0;
      if (t < in.num_queries) {
        begin = min(max(in.ks[t], 0), in.num_keys);
        end = max(begin, min(max(in.ke[t], 0), in.num_keys));
      }
      s.range_begin[threadIdx.x] = begin;
      s.range_end[threadIdx.x] = end;
    }
    __syncthreads();
    union_begin = in.num_keys;
    union_end = 0;
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      if (s.range_begin[qi] < s.range_end[qi]) {
        union_begin = min(union_begin, s.range_begin[qi]);
        union_end = max(union_end, s.range_end[qi]);
      }
    }
  }

  // Does some query of the block see a key of the tile starting at `tile`?
  __device__ __forceinline__ bool tile_needed(int tile) const {
    return tile + kTileKeys > union_begin && tile < union_end;
  }

  // Loads the A fragments of this thread's keys of the tile: bytes [quad_lane * 4, +4) and
  // [16 + quad_lane * 4, +4) of each 32-byte slice of a key.
  __device__ __forceinline__ void load_tile(int tile) {
    key0 = tile + warp * 16 + group;
    key1 = key0 + 8;
    const bool valid0 = key0 < in.num_keys;
    const bool valid1 = key1 < in.num_keys;
    const uint8_t* row0 = in.kv + int64_t{key0} * kHeadDim;
    const uint8_t* row1 = in.kv + int64_t{key1} * kHeadDim;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 32; ++kk) {
      const int offset = kk * 32 + quad_lane * 4;
      a[kk][0] = valid0 ? *reinterpret_cast<const uint32_t*>(row0 + offset) : 0u;
      a[kk][1] = valid1 ? *reinterpret_cast<const uint32_t*>(row1 + offset) : 0u;
      a[kk][2] = valid0 ? *reinterpret_cast<const uint32_t*>(row0 + offset + 16) : 0u;
      a[kk][3] = valid1 ? *reinterpret_cast<const uint32_t*>(row1 + offset + 16) : 0u;
    }
    scale0 = valid0 ? in.kv_scale[key0] : 0.0f;
    scale1 = valid1 ? in.kv_scale[key1] : 0.0f;
  }

  // Scores of keys key0 and key1 for query qi of the block (every lane computes; lane 0 of each
  // quad holds the full sums). Whether the keys are in the query's range is the caller's test.
  __device__ __forceinline__ void score(int qi, float* score0, float* score1) const {
    float acc[kHeadTiles][4];
#pragma unroll
    for (int nt = 0; nt < kHeadTiles; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    const uint8_t* q_query = s.q_rows + qi * kHeads * kQueryRowPitch;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 32; ++kk) {
#pragma unroll
      for (int nt = 0; nt < kHeadTiles; ++nt) {
        const uint8_t* b = q_query + (nt * 8 + group) * kQueryRowPitch + kk * 32 + quad_lane * 4;
        mma_e4m3(acc[nt], a[kk], *reinterpret_cast<const uint32_t*>(b),
                 *reinterpret_cast<const uint32_t*>(b + 16));
      }
    }
    float sum0 = 0.0f;
    float sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kHeadTiles; ++nt) {
      const float w0 = s.weights[qi][nt * 8 + quad_lane * 2];
      const float w1 = s.weights[qi][nt * 8 + quad_lane * 2 + 1];
      sum0 += relu_keep_nan(acc[nt][0]) * w0 + relu_keep_nan(acc[nt][1]) * w1;
      sum1 += relu_keep_nan(acc[nt][2]) * w0 + relu_keep_nan(acc[nt][3]) * w1;
    }
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
    *score0 = sum0 * scale0;
    *score1 = sum1 * scale1;
  }

  __device__ __forceinline__ bool in_range(int qi, int key) const {
    return key >= s.range_begin[qi] && key < s.range_end[qi];
  }
};

}  // namespace litetopk::cuda_indexer
