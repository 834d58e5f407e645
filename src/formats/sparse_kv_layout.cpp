// Sizes of the sparse KV cache's arrays (litetopk/sparse_decode.h): slots, bytes per array, bytes
// per token.
#include <cstddef>
#include <cstdint>

#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {

int64_t sparse_kv_num_slots(const SparseKvCache& c) {
  if (c.block_table != nullptr) return c.num_pages * c.num_kv_heads;
  return c.batch * c.num_kv_heads * c.max_blocks;
}

Status sparse_kv_cache_bytes(const SparseKvCache& shape, SparseKvCacheBytes* bytes) {
  if (bytes == nullptr) return detail::invalid_argument("bytes must not be null");
  Status status = detail::validate_sparse_kv_shape(shape);
  if (!status) return status;
  const auto slots = static_cast<std::size_t>(sparse_kv_num_slots(shape));
  const auto bs = static_cast<std::size_t>(shape.block_size);
  const auto d = static_cast<std::size_t>(shape.head_dim);
  const std::size_t element = dtype_size(shape.dtype);
  SparseKvCacheBytes out;
  out.key_codes = slots * bs * d / 4;
  out.key_scales = slots * d * element;
  out.key_residuals = slots * bs * d;
  out.values = slots * bs * d * element;
  out.tail_keys = static_cast<std::size_t>(shape.batch * shape.num_kv_heads) * bs * d * element;
  out.lengths = static_cast<std::size_t>(shape.batch) * sizeof(int32_t);
  out.block_table = shape.block_table != nullptr
                        ? static_cast<std::size_t>(shape.batch * shape.max_blocks) * sizeof(int32_t)
                        : 0;
  *bytes = out;
  return Status::ok();
}

double sparse_kv_bytes_per_token(int64_t block_size, int64_t head_dim) {
  if ((block_size != 128 && block_size != 256) || head_dim != kSparseDecodeHeadDim) return 0.0;
  const double d = static_cast<double>(head_dim);
  // codes (2 bits) + residual (1 byte) + value (2 bytes) per element, scales (2 bytes per channel)
  // per block.
  return d / 4.0 + d + 2.0 * d + 2.0 * d / static_cast<double>(block_size);
}

}  // namespace litetopk
