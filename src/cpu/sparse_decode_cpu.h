// The CPU sparse-decode backend as seen from its entry points and the tests: host views of the two
// caches, one block's quantization and rebuild, and the guard that turns exceptions into Status.
#pragma once

#include "cpu/run_guarded.h"

#include <cstdint>
#include <exception>
#include <new>

#include "litetopk/float_bits.h"
#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "formats/sparse_kv_format.h"
#include "litetopk/sparse_decode.h"

namespace litetopk::cpu {

// Element i of a host array of dtype (fp32, fp16 or bf16), exactly as a float.
inline float load_float(const void* base, DType dtype, int64_t i) {
  return float_bits::decode_score(float_bits::load_score(base, dtype, i), dtype);
}

// `value` rounded to dtype (nearest even) and stored as element i.
inline void store_float(void* base, DType dtype, int64_t i, float value) {
  float_bits::store_score(base, dtype, i, float_bits::encode_score(value, dtype));
}

// sum_c q[c] * k[c] in fp64 over d channels (d a multiple of 4), four partial sums.
inline double dot(const double* q, const float* k, int64_t d) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t c = 0; c < d; c += 4) {
    s0 += q[c] * static_cast<double>(k[c]);
    s1 += q[c + 1] * static_cast<double>(k[c + 1]);
    s2 += q[c + 2] * static_cast<double>(k[c + 2]);
    s3 += q[c + 3] * static_cast<double>(k[c + 3]);
  }
  return (s0 + s1) + (s2 + s3);
}

// Host view of a SparseKvCache (validated; block table entries checked by the caller).
class SparseCacheView {
 public:
  explicit SparseCacheView(const SparseKvCache& cache) : c_(cache) {}

  const SparseKvCache& cache() const { return c_; }
  int64_t block_size() const { return c_.block_size; }
  int64_t head_dim() const { return c_.head_dim; }
  int64_t slot(int64_t b, int64_t h, int64_t j) const {
    return sparse_kv::slot_index(c_.block_table, c_.num_kv_heads, c_.max_blocks, b, h, j);
  }
  uint8_t* codes(int64_t slot) const {
    return c_.key_codes + slot * c_.block_size * (c_.head_dim / sparse_kv::kCodesPerByte);
  }
  uint8_t* residuals(int64_t slot) const {
    return c_.key_residuals + slot * c_.block_size * c_.head_dim;
  }
  // Element offsets into key_scales / values (arrays of dtype).
  int64_t scale_offset(int64_t slot) const { return slot * c_.head_dim; }
  int64_t value_offset(int64_t slot, int64_t t) const {
    return (slot * c_.block_size + t) * c_.head_dim;
  }
  int64_t tail_offset(int64_t b, int64_t h, int64_t i) const {
    return ((b * c_.num_kv_heads + h) * c_.block_size + i) * c_.head_dim;
  }

 private:
  SparseKvCache c_;
};

// Host view of a DenseKvCache (validated).
class DenseCacheView {
 public:
  explicit DenseCacheView(const DenseKvCache& cache)
      : c_(cache), strides_(detail::dense_strides(cache)) {}

  const DenseKvCache& cache() const { return c_; }
  // Element offset of (b, h, t, channel 0) in keys and values.
  int64_t offset(int64_t b, int64_t h, int64_t t) const {
    return b * strides_.batch + h * strides_.head + t * strides_.token;
  }

 private:
  DenseKvCache c_;
  detail::DenseStrides strides_;
};

// The channel scale of a block as the cache stores it: amax / 1.5f rounded to dtype (fp16 or
// bf16), raised to the dtype's smallest subnormal when that rounds to 0 and amax > 0. Returns the
// dtype's raw bits; *value gets the scale as a float (exact).
uint16_t key_scale_bits(float amax, DType dtype, float* value);

// Quantizes one full block: keys [BS, D] (exact values of the dtype, finite) -> codes [BS, D/4],
// scales [D] (dtype), residuals [BS, D] int8.
void quantize_key_block(const float* keys, int64_t block_size, int64_t head_dim, DType dtype,
                        uint8_t* codes, void* scales, uint8_t* residuals);

// One stored block back: keys [BS, D] = s * (L + R) (exact) and, when non-null, the 2-bit
// estimates [BS, D] = s * L.
void rebuild_key_block(const uint8_t* codes, const void* scales, const uint8_t* residuals,
                       int64_t block_size, int64_t head_dim, DType dtype, float* keys,
                       float* estimates);

}  // namespace litetopk::cpu
