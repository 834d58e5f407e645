// The sparse KV cache on the host: quantization of a block (the bit-exact reference of the GPU's
// append and conversion), conversion from a dense cache, append, and the rebuild into a dense fp32
// cache.
//
// 1. Validate the caches, the host lengths (and block table), and that every key to be quantized
//    or stored is finite; nothing is written before all checks pass.
// 2. Per (sequence, KV head), in parallel: full blocks -> quantize_key_block into their slot;
//    values -> their slot; the open block's keys -> tail_keys.
// 3. The lengths last.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "formats/sparse_kv_format.h"
#include "cpu/parallel_for.h"
#include "cpu/sparse_decode_cpu.h"
#include "litetopk/sparse_decode.h"

namespace litetopk::cpu {

uint16_t key_scale_bits(float amax, DType dtype, float* value) {
  auto bits = static_cast<uint16_t>(
      float_bits::encode_score(sparse_kv::unrounded_scale(amax), dtype));
  float s = float_bits::decode_score(bits, dtype);
  if (s == 0.0f && amax > 0.0f) {
    bits = 1;  // the smallest positive subnormal of fp16 and of bf16
    s = float_bits::decode_score(bits, dtype);
  }
  *value = s;
  return bits;
}

void quantize_key_block(const float* keys, int64_t block_size, int64_t head_dim, DType dtype,
                        uint8_t* codes, void* scales, uint8_t* residuals) {
  const int64_t row_bytes = head_dim / sparse_kv::kCodesPerByte;
  std::memset(codes, 0, static_cast<std::size_t>(block_size * row_bytes));
  for (int64_t c = 0; c < head_dim; ++c) {
    float amax = 0.0f;
    for (int64_t t = 0; t < block_size; ++t) amax = std::max(amax, std::fabs(keys[t * head_dim + c]));
    float s = 0.0f;
    float_bits::store_score(scales, dtype, c, key_scale_bits(amax, dtype, &s));
    for (int64_t t = 0; t < block_size; ++t) {
      const sparse_kv::QuantizedElement e = sparse_kv::quantize_element(keys[t * head_dim + c], s);
      sparse_kv::pack_code(codes + t * row_bytes, c, e.code);
      residuals[t * head_dim + c] = e.residual;
    }
  }
}

void rebuild_key_block(const uint8_t* codes, const void* scales, const uint8_t* residuals,
                       int64_t block_size, int64_t head_dim, DType dtype, float* keys,
                       float* estimates) {
  const int64_t row_bytes = head_dim / sparse_kv::kCodesPerByte;
  std::vector<float> s(static_cast<std::size_t>(head_dim));
  for (int64_t c = 0; c < head_dim; ++c) s[c] = load_float(scales, dtype, c);
  for (int64_t t = 0; t < block_size; ++t) {
    const uint8_t* row = codes + t * row_bytes;
    for (int64_t c = 0; c < head_dim; ++c) {
      const uint32_t code = sparse_kv::unpack_code(row, c);
      if (keys != nullptr) {
        keys[t * head_dim + c] =
            sparse_kv::rebuild_element(s[c], code, residuals[t * head_dim + c]);
      }
      if (estimates != nullptr) estimates[t * head_dim + c] = sparse_kv::estimate_element(s[c], code);
    }
  }
}

namespace {

using detail::invalid_argument;

// Tokens [0, lengths[b]) of every sequence and head have finite keys.
Status check_dense_keys_finite(const DenseKvCache& dense, const char* name) {
  const DenseCacheView view(dense);
  for (int64_t b = 0; b < dense.batch; ++b) {
    for (int64_t h = 0; h < dense.num_kv_heads; ++h) {
      for (int64_t t = 0; t < dense.lengths[b]; ++t) {
        const int64_t base = view.offset(b, h, t);
        for (int64_t c = 0; c < dense.head_dim; ++c) {
          const float k = load_float(dense.keys, dense.dtype, base + c);
          if (!std::isfinite(k)) {
            return invalid_argument(name, ".keys[", b, ", ", h, ", ", t, ", ", c,
                                    "] must be finite, got ", k);
          }
        }
      }
    }
  }
  return Status::ok();
}

// Quantizes the tail of (b, h) (a full block of BS tokens) into block j's slot.
void quantize_tail(const SparseCacheView& view, int64_t b, int64_t h, int64_t j,
                   std::vector<float>* buffer) {
  const SparseKvCache& c = view.cache();
  const int64_t bs = c.block_size, d = c.head_dim;
  buffer->resize(static_cast<std::size_t>(bs * d));
  const int64_t base = view.tail_offset(b, h, 0);
  for (int64_t i = 0; i < bs * d; ++i) (*buffer)[i] = load_float(c.tail_keys, c.dtype, base + i);
  const int64_t slot = view.slot(b, h, j);
  quantize_key_block(buffer->data(), bs, d, c.dtype, view.codes(slot),
                     static_cast<unsigned char*>(c.key_scales) +
                         view.scale_offset(slot) * static_cast<int64_t>(dtype_size(c.dtype)),
                     view.residuals(slot));
}

void copy_elements(const void* src, int64_t src_offset, DType src_dtype, void* dst,
                   int64_t dst_offset, DType dst_dtype, int64_t count) {
  if (src_dtype == dst_dtype) {
    const auto size = static_cast<int64_t>(dtype_size(src_dtype));
    std::memcpy(static_cast<unsigned char*>(dst) + dst_offset * size,
                static_cast<const unsigned char*>(src) + src_offset * size,
                static_cast<std::size_t>(count * size));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    store_float(dst, dst_dtype, dst_offset + i, load_float(src, src_dtype, src_offset + i));
  }
}

}  // namespace

}  // namespace litetopk::cpu

namespace litetopk {

using detail::invalid_argument;

Status sparse_decode_quantize_cpu(const DenseKvCache& dense, const SparseKvCache& cache) {
  Status status = detail::validate_dense_kv_cache_as(dense, "dense.");
  if (!status) return status;
  if (!(status = validate_sparse_kv_cache(cache))) return status;
  if (!(status = detail::validate_dense_matches_sparse(dense, cache, "dense"))) return status;
  if (cache.batch == 0) return Status::ok();
  if (!(status = detail::validate_dense_kv_lengths(dense, dense.lengths))) {
    return Status(status.code(), "dense." + status.message());
  }
  if (!(status = validate_sparse_kv_lengths(cache, dense.lengths, cache.block_table))) {
    return Status(status.code(), "dense." + status.message() + " (the sparse cache's capacity)");
  }
  if (!(status = detail::validate_written_pages_unshared(cache, dense.lengths, cache.block_table,
                                                         /*append=*/false))) {
    return status;
  }
  if (!(status = cpu::check_dense_keys_finite(dense, "dense"))) return status;

  return cpu::run_guarded("sparse_decode_quantize_cpu", [&] {
    const cpu::SparseCacheView view(cache);
    const cpu::DenseCacheView src(dense);
    const int64_t bs = cache.block_size, d = cache.head_dim;
    const DType dtype = cache.dtype;
    const auto element = static_cast<int64_t>(dtype_size(dtype));
    cpu::parallel_for(cache.batch * cache.num_kv_heads, cpu::hardware_threads(), [&](int64_t task) {
      const int64_t b = task / cache.num_kv_heads, h = task % cache.num_kv_heads;
      const int64_t len = dense.lengths[b];
      const int64_t full = len / bs;
      std::vector<float> keys(static_cast<std::size_t>(bs * d));
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t slot = view.slot(b, h, j);
        const int64_t count = std::min(bs, len - j * bs);
        for (int64_t i = 0; i < count; ++i) {
          const int64_t at = src.offset(b, h, j * bs + i);
          cpu::copy_elements(dense.values, at, dtype, cache.values, view.value_offset(slot, i),
                             dtype, d);
          if (j < full) {
            for (int64_t c = 0; c < d; ++c) keys[i * d + c] = cpu::load_float(dense.keys, dtype, at + c);
          } else {
            cpu::copy_elements(dense.keys, at, dtype, cache.tail_keys, view.tail_offset(b, h, i),
                               dtype, d);
          }
        }
        if (j < full) {
          cpu::quantize_key_block(keys.data(), bs, d, dtype, view.codes(slot),
                                  static_cast<unsigned char*>(cache.key_scales) +
                                      view.scale_offset(slot) * element,
                                  view.residuals(slot));
        }
      }
    });
    // Last, so that dense.lengths may be cache.lengths.
    for (int64_t b = 0; b < cache.batch; ++b) cache.lengths[b] = dense.lengths[b];
    return Status::ok();
  });
}

Status sparse_kv_append_cpu(const SparseKvCache& cache, const void* new_keys,
                            const void* new_values) {
  Status status = validate_sparse_kv_cache(cache);
  if (!status) return status;
  if (cache.batch == 0) return Status::ok();
  if (new_keys == nullptr) return invalid_argument("new_keys must not be null");
  if (new_values == nullptr) return invalid_argument("new_values must not be null");
  if (!(status = validate_sparse_kv_lengths(cache, cache.lengths, cache.block_table, 1))) {
    return status;
  }
  if (!(status = detail::validate_written_pages_unshared(cache, cache.lengths, cache.block_table,
                                                         /*append=*/true))) {
    return status;
  }
  const int64_t d = cache.head_dim;
  for (int64_t i = 0; i < cache.batch * cache.num_kv_heads * d; ++i) {
    const float k = cpu::load_float(new_keys, cache.dtype, i);
    if (!std::isfinite(k)) {
      return invalid_argument("new_keys[", i / (cache.num_kv_heads * d), ", ",
                              (i / d) % cache.num_kv_heads, ", ", i % d, "] must be finite, got ",
                              k);
    }
  }
  return cpu::run_guarded("sparse_kv_append_cpu", [&] {
    const cpu::SparseCacheView view(cache);
    const int64_t bs = cache.block_size;
    std::vector<float> buffer;
    for (int64_t b = 0; b < cache.batch; ++b) {
      const int64_t len = cache.lengths[b];
      const int64_t j = len / bs, i = len - j * bs;
      for (int64_t h = 0; h < cache.num_kv_heads; ++h) {
        const int64_t from = (b * cache.num_kv_heads + h) * d;
        cpu::copy_elements(new_keys, from, cache.dtype, cache.tail_keys,
                           view.tail_offset(b, h, i), cache.dtype, d);
        cpu::copy_elements(new_values, from, cache.dtype, cache.values,
                           view.value_offset(view.slot(b, h, j), i), cache.dtype, d);
        if (i + 1 == bs) cpu::quantize_tail(view, b, h, j, &buffer);
      }
      cache.lengths[b] = static_cast<int32_t>(len + 1);
    }
    return Status::ok();
  });
}

Status sparse_kv_rebuild_cpu(const SparseKvCache& cache, const DenseKvCache& out) {
  Status status = validate_sparse_kv_cache(cache);
  if (!status) return status;
  if (!(status = detail::validate_dense_kv_cache_as(out, "out."))) return status;
  if (out.dtype != DType::kFloat32) {
    return invalid_argument("out.dtype must be float32, got ", dtype_name(out.dtype));
  }
  if (out.batch != cache.batch || out.num_kv_heads != cache.num_kv_heads) {
    return invalid_argument("out.batch and out.num_kv_heads must equal the cache's (", cache.batch,
                            ", ", cache.num_kv_heads, "), got ", out.batch, ", ",
                            out.num_kv_heads);
  }
  if (out.capacity < cache.max_blocks * cache.block_size) {
    return invalid_argument("out.capacity must be >= max_blocks * block_size = ",
                            cache.max_blocks * cache.block_size, ", got ", out.capacity);
  }
  if (cache.batch == 0) return Status::ok();
  if (!(status = validate_sparse_kv_lengths(cache, cache.lengths, cache.block_table))) {
    return status;
  }
  return cpu::run_guarded("sparse_kv_rebuild_cpu", [&] {
    const cpu::SparseCacheView view(cache);
    const cpu::DenseCacheView dst(out);
    const int64_t bs = cache.block_size, d = cache.head_dim;
    const DType dtype = cache.dtype;
    const auto element = static_cast<int64_t>(dtype_size(dtype));
    auto* out_keys = static_cast<float*>(out.keys);
    cpu::parallel_for(cache.batch * cache.num_kv_heads, cpu::hardware_threads(), [&](int64_t task) {
      const int64_t b = task / cache.num_kv_heads, h = task % cache.num_kv_heads;
      const int64_t len = cache.lengths[b];
      const int64_t full = len / bs;
      std::vector<float> keys(static_cast<std::size_t>(bs * d));
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t slot = view.slot(b, h, j);
        const int64_t count = std::min(bs, len - j * bs);
        if (j < full) {
          cpu::rebuild_key_block(view.codes(slot),
                                 static_cast<const unsigned char*>(cache.key_scales) +
                                     view.scale_offset(slot) * element,
                                 view.residuals(slot), bs, d, dtype, keys.data(), nullptr);
        }
        for (int64_t i = 0; i < count; ++i) {
          const int64_t at = dst.offset(b, h, j * bs + i);
          cpu::copy_elements(cache.values, view.value_offset(slot, i), dtype, out.values, at,
                             DType::kFloat32, d);
          if (j < full) {
            std::copy(keys.begin() + i * d, keys.begin() + (i + 1) * d, out_keys + at);
          } else {
            cpu::copy_elements(cache.tail_keys, view.tail_offset(b, h, i), dtype, out.keys, at,
                               DType::kFloat32, d);
          }
        }
      }
    });
    for (int64_t b = 0; b < cache.batch; ++b) out.lengths[b] = cache.lengths[b];
    return Status::ok();
  });
}

}  // namespace litetopk
