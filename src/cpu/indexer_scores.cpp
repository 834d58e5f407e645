// fp64 indexer scores on the CPU (see indexer_scores.h).
#include "cpu/indexer_scores.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "litetopk/fp8_e4m3.h"

namespace litetopk::cpu {

namespace {

constexpr int kHeadDim = 128;
constexpr int kBlock = 16;  // keys per block

// Four doubles as one value (GCC/Clang vector extension): plain +, * per lane, no reassociation.
typedef double Double4 __attribute__((vector_size(32)));
constexpr int kLanes = 4;
constexpr int kVectors = kBlock / kLanes;

// dots[h][j] = sum_d q[h][d] * block[d][j] for two heads (q rows h0, h0 + 1) and the kBlock keys
// of the block. Exact (see the header), so the order of the additions does not matter. Two heads
// at a time give eight independent accumulators and share each load of the block. Compiled for
// AVX-512, AVX2 and baseline x86-64, picked at load time.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void two_head_dots(const double* q0, const double* q1, const Double4* block, double* dots0,
                   double* dots1) {
  Double4 a0[kVectors] = {}, a1[kVectors] = {};
  for (int d = 0; d < kHeadDim; ++d) {
    const double x0 = q0[d], x1 = q1[d];
    const Double4* row = block + d * kVectors;
    for (int v = 0; v < kVectors; ++v) {
      a0[v] += x0 * row[v];
      a1[v] += x1 * row[v];
    }
  }
  for (int v = 0; v < kVectors; ++v) {
    for (int l = 0; l < kLanes; ++l) {
      dots0[v * kLanes + l] = a0[v][l];
      dots1[v * kLanes + l] = a1[v][l];
    }
  }
}

}  // namespace

IndexerScorer::IndexerScorer(const IndexerProblem& problem) : problem_(problem) {
  for (int b = 0; b < 256; ++b) {
    decode_[b] = static_cast<double>(fp8::e4m3_to_float(static_cast<uint8_t>(b)));
  }
}

void IndexerScorer::score_row(int64_t t, int64_t begin, int64_t end, double* out) const {
  if (end <= begin) return;
  score_keys(t, static_cast<const uint8_t*>(problem_.kv) + begin * kHeadDim,
             problem_.kv_scale + begin, end - begin, out);
}

void IndexerScorer::score_row_f32(int64_t t, int64_t begin, int64_t end, float* out) const {
  if (end <= begin) return;
  score_keys_f32(t, static_cast<const uint8_t*>(problem_.kv) + begin * kHeadDim,
                 problem_.kv_scale + begin, end - begin, out);
}

void IndexerScorer::score_keys(int64_t t, const uint8_t* keys, const float* key_scales,
                               int64_t count, double* out) const {
  if (count <= 0) return;
  const int64_t heads = problem_.num_heads;
  const auto* q_bytes = static_cast<const uint8_t*>(problem_.q) + t * heads * kHeadDim;
  const float* weights = problem_.weights + t * heads;

  std::vector<double> q(static_cast<std::size_t>(heads * kHeadDim));
  for (int64_t i = 0; i < heads * kHeadDim; ++i) q[i] = decode_[q_bytes[i]];

  Double4 block[kHeadDim * kVectors];  // [d][key], keys of the block in kVectors vectors
  for (int64_t i0 = 0; i0 < count; i0 += kBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kBlock, count - i0));
    for (int j = 0; j < kBlock; ++j) {
      Double4* column = block + j / kLanes;
      const int lane = j % kLanes;
      if (j < n) {
        const uint8_t* row = keys + (i0 + j) * kHeadDim;
        for (int d = 0; d < kHeadDim; ++d) column[d * kVectors][lane] = decode_[row[d]];
      } else {
        for (int d = 0; d < kHeadDim; ++d) column[d * kVectors][lane] = 0.0;
      }
    }
    double total[kBlock] = {};
    for (int64_t h = 0; h < heads; h += 2) {  // heads is 32 or 64: even
      double dots[2][kBlock];
      two_head_dots(q.data() + h * kHeadDim, q.data() + (h + 1) * kHeadDim, block, dots[0],
                    dots[1]);
      for (int i = 0; i < 2; ++i) {
        const double w = weights[h + i];
        for (int j = 0; j < kBlock; ++j) {
          const double relu = dots[i][j] < 0.0 ? 0.0 : dots[i][j];  // keeps NaN
          total[j] += w * relu;
        }
      }
    }
    for (int j = 0; j < n; ++j) {
      out[i0 + j] = static_cast<double>(key_scales[i0 + j]) * total[j];
    }
  }
}

void IndexerScorer::score_keys_f32(int64_t t, const uint8_t* keys, const float* key_scales,
                                   int64_t count, float* out) const {
  constexpr int64_t kPiece = 4096;
  double scratch[kPiece];
  for (int64_t i0 = 0; i0 < count; i0 += kPiece) {
    const int64_t n = std::min(count - i0, kPiece);
    score_keys(t, keys + i0 * kHeadDim, key_scales + i0, n, scratch);
    for (int64_t i = 0; i < n; ++i) out[i0 + i] = static_cast<float>(scratch[i]);
  }
}

}  // namespace litetopk::cpu
