// fp64 scores of the DSA lightning indexer on the CPU: the arithmetic behind indexer_topk_cpu,
// indexer_logits_cpu and indexer_topk_paged_cpu, and through indexer_logits_cpu of the testkit's
// checker (testkit/indexer_verify.h).
//
//   score[t, s] = kv_scale[s] * sum_h weights[t, h] * relu(dot(q[t, h, :], kv[s, :]))
//
// Every fp8 e4m3 value is a multiple of 2^-9 below 2^9, so each product is a multiple of 2^-18
// below 2^18 and any partial sum of the D = 128 products is a multiple of 2^-18 below 2^25: it
// fits in 43 bits, so the dot products are exact in double in any order. The head sum and the
// kv_scale factor are then rounded in double (relative error ~H * 2^-53, far below anything an
// fp32 kernel can resolve).
//
// NaN: a NaN byte in q[t] or kv[s] makes the dot NaN, and relu keeps NaN (it is computed as
// "x < 0 ? 0 : x", not fmax), so that score is NaN and never selected.
//
// Layout of the work: per query, keys are taken in blocks of 16, decoded through a 256-entry
// table into a [D][16] transposed block, and every head's 16 dot products accumulate as a
// broadcast-multiply-add over the block (vectorizable without reassociation).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "litetopk/indexer.h"

namespace litetopk::cpu {

class IndexerScorer {
 public:
  // `problem` must pass validate_indexer_inputs; the range arrays are not read here. The problem's
  // pointers must stay valid while the scorer is used. Thread-safe after construction.
  // score_keys and score_keys_f32 read only q, weights, num_heads and head_dim of it (the paged
  // indexer passes its queries as a problem without kv).
  explicit IndexerScorer(const IndexerProblem& problem);

  // out[s - begin] = fp64 score of query t and key s, for s in [begin, end) with
  // 0 <= begin <= end <= S (not checked).
  void score_row(int64_t t, int64_t begin, int64_t end, double* out) const;

  // The same scores rounded to fp32.
  void score_row_f32(int64_t t, int64_t begin, int64_t end, float* out) const;

  // out[i] = fp64 score of query t and the key keys[i * D .. i * D + D - 1] with scale
  // key_scales[i], for i in [0, count): the scores of any contiguous run of keys (score_row is
  // score_keys over kv + begin * D and kv_scale + begin).
  void score_keys(int64_t t, const uint8_t* keys, const float* key_scales, int64_t count,
                  double* out) const;

  // The same scores rounded to fp32.
  void score_keys_f32(int64_t t, const uint8_t* keys, const float* key_scales, int64_t count,
                      float* out) const;

 private:
  IndexerProblem problem_;
  double decode_[256];
};

}  // namespace litetopk::cpu
