// Argument checks for the sparse KV cache, sparse and dense decode: every failure names the
// argument, what was expected and what was given. No pointer is dereferenced except the host
// arrays handed to validate_sparse_kv_lengths / validate_dense_kv_lengths.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/sparse_decode_validation.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {

using detail::invalid_argument;
using detail::kMaxInt32;
using detail::kMaxInt64;
using detail::product_fits;

namespace {

// Bulk arrays are read with 16-byte vector loads / TMA on the GPU.
constexpr std::uintptr_t kVectorAlignment = 16;

bool is_half_dtype(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

bool is_out_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

// "cache." -> "cache": the prefix naming a whole struct.
std::string owner(const char* prefix) {
  std::string name(prefix);
  if (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

Status check_pointer(const void* pointer, const char* prefix, const char* name,
                     std::uintptr_t alignment) {
  if (pointer == nullptr) return invalid_argument(prefix, name, " must not be null");
  const std::string full_name = std::string(prefix) + name;
  return detail::check_alignment({{full_name.c_str(), pointer}}, alignment);
}

// The shape checks shared by both caches and both problems.
Status check_heads_and_dim(int64_t batch, int64_t num_kv_heads, int64_t head_dim,
                           const char* prefix) {
  if (batch < 0) return invalid_argument(prefix, "batch must be >= 0, got ", batch);
  if (batch > kMaxInt32) {
    return invalid_argument(prefix, "batch must be <= ", kMaxInt32, ", got ", batch);
  }
  if (num_kv_heads < 1) {
    return invalid_argument(prefix, "num_kv_heads must be >= 1, got ", num_kv_heads);
  }
  if (num_kv_heads > kMaxInt32) {
    return invalid_argument(prefix, "num_kv_heads must be <= ", kMaxInt32, ", got ",
                            num_kv_heads);
  }
  if (head_dim != kSparseDecodeHeadDim) {
    return invalid_argument(prefix, "head_dim must be ", kSparseDecodeHeadDim, ", got ", head_dim);
  }
  return Status::ok();
}

Status check_sparse_cache_shape(const SparseKvCache& c, const char* prefix) {
  if (!is_half_dtype(c.dtype)) {
    return invalid_argument(prefix, "dtype must be float16 or bfloat16, got ",
                            dtype_name(c.dtype));
  }
  Status status = check_heads_and_dim(c.batch, c.num_kv_heads, c.head_dim, prefix);
  if (!status) return status;
  if (c.block_size != 128 && c.block_size != 256) {
    return invalid_argument(prefix, "block_size must be 128 or 256, got ", c.block_size);
  }
  if (c.max_blocks < 1) return invalid_argument(prefix, "max_blocks must be >= 1, got ", c.max_blocks);
  if (c.max_blocks > kMaxInt32 / c.block_size) {
    return invalid_argument(prefix, "max_blocks * block_size must be <= ", kMaxInt32,
                            " (int32 lengths), got max_blocks ", c.max_blocks);
  }
  const bool paged = c.block_table != nullptr;
  if (paged && c.num_pages < 1) {
    return invalid_argument(prefix, "num_pages must be >= 1 with a block_table, got ",
                            c.num_pages);
  }
  if (paged && c.num_pages > kMaxInt32) {
    return invalid_argument(prefix, "num_pages must be <= ", kMaxInt32, ", got ", c.num_pages);
  }
  // The largest arrays hold slots * BS * D * 2 bytes and (the tail keys, paged or not) batch *
  // num_kv_heads * BS * D * 2; the block table batch * max_blocks.
  const int64_t block_bytes = c.block_size * c.head_dim * 2;
  if (!product_fits(c.batch, c.max_blocks) ||
      !product_fits(paged ? c.num_pages : c.batch * c.max_blocks, c.num_kv_heads, block_bytes) ||
      !product_fits(c.batch, c.num_kv_heads, block_bytes)) {
    return invalid_argument(owner(prefix), ": the cache's size overflows int64: batch ", c.batch,
                            ", num_kv_heads ", c.num_kv_heads, ", max_blocks ", c.max_blocks,
                            ", num_pages ", c.num_pages);
  }
  return Status::ok();
}

Status check_sparse_cache_pointers(const SparseKvCache& c, const char* prefix) {
  if (c.batch == 0) return Status::ok();
  Status status;
  if (!(status = check_pointer(c.lengths, prefix, "lengths", alignof(int32_t)))) return status;
  const std::string table_name = std::string(prefix) + "block_table";
  status = detail::check_alignment({{table_name.c_str(), c.block_table}}, alignof(int32_t));
  if (!status) return status;
  if (!(status = check_pointer(c.key_codes, prefix, "key_codes", kVectorAlignment))) return status;
  if (!(status = check_pointer(c.key_scales, prefix, "key_scales", kVectorAlignment))) {
    return status;
  }
  if (!(status = check_pointer(c.key_residuals, prefix, "key_residuals", kVectorAlignment))) {
    return status;
  }
  if (!(status = check_pointer(c.values, prefix, "values", kVectorAlignment))) return status;
  return check_pointer(c.tail_keys, prefix, "tail_keys", kVectorAlignment);
}

Status check_sparse_cache(const SparseKvCache& c, const char* prefix) {
  if (Status status = check_sparse_cache_shape(c, prefix); !status) return status;
  return check_sparse_cache_pointers(c, prefix);
}

Status check_dense_cache_shape(const DenseKvCache& c, const char* prefix) {
  if (!is_out_dtype(c.dtype)) {
    return invalid_argument(prefix, "dtype must be float16, bfloat16 or float32, got ",
                            dtype_name(c.dtype));
  }
  Status status = check_heads_and_dim(c.batch, c.num_kv_heads, c.head_dim, prefix);
  if (!status) return status;
  if (c.capacity < 0) return invalid_argument(prefix, "capacity must be >= 0, got ", c.capacity);
  if (c.capacity > kMaxInt32) {
    return invalid_argument(prefix, "capacity must be <= ", kMaxInt32, " (int32 lengths), got ",
                            c.capacity);
  }
  if (c.batch_stride < 0 || c.head_stride < 0 || c.token_stride < 0) {
    return invalid_argument(prefix, "batch_stride, head_stride and token_stride must be >= 0 ",
                            "(0: contiguous), got ", c.batch_stride, ", ", c.head_stride, ", ",
                            c.token_stride);
  }
  if (!product_fits(c.batch, c.num_kv_heads, c.capacity) ||
      !product_fits(c.batch * c.num_kv_heads * c.capacity, c.head_dim, 4)) {
    return invalid_argument(owner(prefix), ": the cache's size overflows int64: batch ", c.batch,
                            ", num_kv_heads ", c.num_kv_heads, ", capacity ", c.capacity);
  }
  if (c.token_stride != 0 && c.token_stride < c.head_dim) {
    return invalid_argument(prefix, "token_stride must be >= head_dim (", c.head_dim, "), got ",
                            c.token_stride);
  }
  const detail::DenseStrides s = detail::dense_strides(c);
  const int64_t element = static_cast<int64_t>(dtype_size(c.dtype));
  for (const int64_t stride : {s.batch, s.head, s.token}) {
    if ((stride * element) % static_cast<int64_t>(kVectorAlignment) != 0) {
      return invalid_argument(prefix, "batch_stride, head_stride and token_stride must be ",
                              "multiples of ", static_cast<int64_t>(kVectorAlignment) / element,
                              " elements (16 bytes), got ", s.batch, ", ", s.head, ", ",
                              s.token);
    }
  }
  // The byte offset one past the last element must fit in int64.
  int64_t last = c.head_dim;
  bool overflow = false;
  const auto add_span = [&](int64_t count, int64_t stride) {
    int64_t span = 0;
    if (count <= 0) return;
    overflow = overflow || __builtin_mul_overflow(count - 1, stride, &span) ||
               __builtin_add_overflow(last, span, &last);
  };
  add_span(c.batch, s.batch);
  add_span(c.num_kv_heads, s.head);
  add_span(c.capacity, s.token);
  if (overflow || __builtin_mul_overflow(last, element, &last)) {
    return invalid_argument(owner(prefix), ": the strided layout overflows int64: batch_stride ",
                            s.batch, ", head_stride ", s.head, ", token_stride ", s.token);
  }
  return Status::ok();
}

Status check_dense_cache_pointers(const DenseKvCache& c, const char* prefix) {
  if (c.batch == 0) return Status::ok();
  Status status;
  if (!(status = check_pointer(c.lengths, prefix, "lengths", alignof(int32_t)))) return status;
  if (c.capacity == 0) return Status::ok();
  if (!(status = check_pointer(c.keys, prefix, "keys", kVectorAlignment))) return status;
  return check_pointer(c.values, prefix, "values", kVectorAlignment);
}

Status check_dense_cache(const DenseKvCache& c, const char* prefix) {
  if (Status status = check_dense_cache_shape(c, prefix); !status) return status;
  return check_dense_cache_pointers(c, prefix);
}

// The selection rule and its parameter (the other rule's parameter is not used).
Status check_selection(const SparseDecodeProblem& p) {
  switch (p.selection) {
    case SparseSelection::kDelta:
      if (std::isnan(p.delta) || p.delta < 0.0f) {
        return invalid_argument("delta must be >= 0 (natural-log units; +inf keeps every block), "
                                "got ",
                                p.delta);
      }
      return Status::ok();
    case SparseSelection::kMass:
      if (!(p.mass_target >= 0.0f && p.mass_target < 1.0f)) {
        return invalid_argument("mass_target must be in [0, 1) (0 keeps every block), got ",
                                p.mass_target);
      }
      return Status::ok();
  }
  return invalid_argument("selection must be SparseSelection::kDelta (0) or kMass (1), got ",
                          static_cast<int32_t>(p.selection));
}

Status check_query_pointers(int64_t batch, const void* q, const void* out, const float* lse) {
  if (batch == 0) return Status::ok();
  Status status = check_pointer(q, "", "q", kVectorAlignment);
  if (!status) return status;
  if (!(status = check_pointer(out, "", "out", kVectorAlignment))) return status;
  return detail::check_alignment({{"lse", lse}}, alignof(float));
}

Status check_query_shape(int64_t batch, int64_t num_kv_heads, int64_t num_q_heads,
                         float softmax_scale, DType out_dtype) {
  if (num_q_heads < 1 || num_q_heads % num_kv_heads != 0 ||
      num_q_heads / num_kv_heads > kSparseDecodeMaxGroupSize) {
    return invalid_argument("num_q_heads must be num_kv_heads (", num_kv_heads, ") times a group ",
                            "size in [1, ", kSparseDecodeMaxGroupSize, "], got ", num_q_heads);
  }
  if (!(std::isfinite(softmax_scale) && softmax_scale >= 0.0f)) {
    return invalid_argument("softmax_scale must be finite and > 0 (0: 1/sqrt(head_dim)), got ",
                            softmax_scale);
  }
  if (!is_out_dtype(out_dtype)) {
    return invalid_argument("out_dtype must be float32, float16 or bfloat16, got ",
                            dtype_name(out_dtype));
  }
  if (!product_fits(batch, num_q_heads, kSparseDecodeHeadDim * 4)) {
    return invalid_argument("batch * num_q_heads * head_dim overflows int64: batch ", batch,
                            ", num_q_heads ", num_q_heads);
  }
  return Status::ok();
}

Status check_query(int64_t batch, int64_t num_kv_heads, int64_t num_q_heads, float softmax_scale,
                   const void* q, const void* out, DType out_dtype, const float* lse) {
  if (Status status = check_query_shape(batch, num_kv_heads, num_q_heads, softmax_scale, out_dtype);
      !status) {
    return status;
  }
  return check_query_pointers(batch, q, out, lse);
}

}  // namespace

namespace detail {

Status validate_sparse_kv_shape(const SparseKvCache& cache) {
  return check_sparse_cache_shape(cache, "cache.");
}

Status validate_sparse_decode_shapes(const SparseDecodeProblem& p) {
  if (Status status = check_sparse_cache_shape(p.cache, "cache."); !status) return status;
  if (Status status = check_selection(p); !status) return status;
  return check_query_shape(p.cache.batch, p.cache.num_kv_heads, p.num_q_heads, p.softmax_scale,
                           p.out_dtype);
}

Status validate_dense_decode_shapes(const DenseDecodeProblem& p) {
  if (Status status = check_dense_cache_shape(p.cache, "cache."); !status) return status;
  return check_query_shape(p.cache.batch, p.cache.num_kv_heads, p.num_q_heads, p.softmax_scale,
                           p.out_dtype);
}

Status validate_sparse_decode_addresses(const SparseDecodeProblem& p) {
  if (Status status = check_sparse_cache_pointers(p.cache, "cache."); !status) return status;
  return check_query_pointers(p.cache.batch, p.q, p.out, p.lse);
}

Status validate_dense_decode_addresses(const DenseDecodeProblem& p) {
  if (Status status = check_dense_cache_pointers(p.cache, "cache."); !status) return status;
  return check_query_pointers(p.cache.batch, p.q, p.out, p.lse);
}

Status validate_dense_kv_cache_as(const DenseKvCache& cache, const char* prefix) {
  return check_dense_cache(cache, prefix);
}

DenseStrides dense_strides(const DenseKvCache& c) {
  DenseStrides s;
  s.token = c.token_stride != 0 ? c.token_stride : c.head_dim;
  s.head = c.head_stride != 0 ? c.head_stride : c.capacity * c.head_dim;
  s.batch = c.batch_stride != 0 ? c.batch_stride : c.num_kv_heads * c.capacity * c.head_dim;
  return s;
}

double resolved_softmax_scale(float softmax_scale, int64_t head_dim) {
  if (softmax_scale != 0.0f) return static_cast<double>(softmax_scale);
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

Status validate_dense_kv_lengths(const DenseKvCache& c, const int32_t* host_lengths) {
  if (c.batch == 0) return Status::ok();
  if (host_lengths == nullptr) return invalid_argument("lengths must not be null");
  for (int64_t b = 0; b < c.batch; ++b) {
    if (host_lengths[b] < 0 || host_lengths[b] > c.capacity) {
      return invalid_argument("lengths[", b, "] must be in [0, capacity=", c.capacity, "], got ",
                              host_lengths[b]);
    }
  }
  return Status::ok();
}

Status validate_dense_matches_sparse(const DenseKvCache& dense, const SparseKvCache& cache,
                                     const char* dense_name) {
  if (dense.dtype != cache.dtype) {
    return invalid_argument(dense_name, ".dtype must equal cache.dtype (", dtype_name(cache.dtype),
                            "), got ", dtype_name(dense.dtype));
  }
  if (dense.batch != cache.batch) {
    return invalid_argument(dense_name, ".batch must equal cache.batch (", cache.batch, "), got ",
                            dense.batch);
  }
  if (dense.num_kv_heads != cache.num_kv_heads) {
    return invalid_argument(dense_name, ".num_kv_heads must equal cache.num_kv_heads (",
                            cache.num_kv_heads, "), got ", dense.num_kv_heads);
  }
  return Status::ok();
}

Status validate_fidelity_problem(const DecodeFidelityProblem& p) {
  const DenseDecodeProblem& r = p.reference;
  Status status = check_dense_cache(r.cache, "reference.cache.");
  if (!status) return status;
  // The reference's own out is not used: check the query against the judged result instead.
  status = check_query(r.cache.batch, r.cache.num_kv_heads, r.num_q_heads, r.softmax_scale, r.q,
                       p.out, p.out_dtype, nullptr);
  if (!status) return status;
  if (p.block_size != 128 && p.block_size != 256) {
    return invalid_argument("block_size must be 128 or 256, got ", p.block_size);
  }
  if (p.kept_mask != nullptr) {
    const int64_t needed = (r.cache.capacity + p.block_size - 1) / p.block_size;
    if (p.mask_blocks < needed) {
      return invalid_argument("mask_blocks must be >= ceil(capacity / block_size) = ", needed,
                              ", got ", p.mask_blocks);
    }
  }
  return Status::ok();
}

}  // namespace detail

Status validate_sparse_kv_cache(const SparseKvCache& cache) {
  return check_sparse_cache(cache, "cache.");
}

Status validate_dense_kv_cache(const DenseKvCache& cache) {
  return check_dense_cache(cache, "cache.");
}

Status validate_sparse_decode_problem(const SparseDecodeProblem& p) {
  Status status = check_sparse_cache(p.cache, "cache.");
  if (!status) return status;
  if (Status selection = check_selection(p); !selection) return selection;
  status = check_query(p.cache.batch, p.cache.num_kv_heads, p.num_q_heads, p.softmax_scale, p.q,
                       p.out, p.out_dtype, p.lse);
  if (!status) return status;
  return Status::ok();
}

Status validate_dense_decode_problem(const DenseDecodeProblem& p) {
  Status status = check_dense_cache(p.cache, "cache.");
  if (!status) return status;
  return check_query(p.cache.batch, p.cache.num_kv_heads, p.num_q_heads, p.softmax_scale, p.q,
                     p.out, p.out_dtype, p.lse);
}

Status validate_sparse_kv_lengths(const SparseKvCache& c, const int32_t* host_lengths,
                                  const int32_t* host_block_table, int64_t extra_tokens) {
  if (c.batch == 0) return Status::ok();
  if (host_lengths == nullptr) return invalid_argument("lengths must not be null");
  if (c.block_table != nullptr && host_block_table == nullptr) {
    return invalid_argument("block_table must not be null for a paged cache");
  }
  const int64_t capacity = c.max_blocks * c.block_size;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = host_lengths[b];
    if (len < 0 || len > capacity) {
      return invalid_argument("lengths[", b, "] must be in [0, max_blocks * block_size = ",
                              capacity, "], got ", len);
    }
    if (len + extra_tokens > capacity) {
      return invalid_argument("lengths[", b, "] = ", len, ": sequence ", b,
                              " is full (capacity max_blocks * block_size = ", capacity,
                              "), cannot append");
    }
    if (c.block_table == nullptr) continue;
    const int64_t used = (len + extra_tokens + c.block_size - 1) / c.block_size;
    for (int64_t j = 0; j < used; ++j) {
      const int64_t page = host_block_table[b * c.max_blocks + j];
      if (page < 0 || page >= c.num_pages) {
        return invalid_argument("block_table[", b, ", ", j, "] must be in [0, num_pages = ",
                                c.num_pages, "), got ", page, " (block ", j, " is in use: length ",
                                len + extra_tokens, ")");
      }
    }
  }
  return Status::ok();
}

Status detail::validate_written_pages_unshared(const SparseKvCache& c, const int32_t* host_lengths,
                                               const int32_t* host_block_table, bool append) {
  if (c.block_table == nullptr || c.batch == 0) return Status::ok();
  struct Use {
    int32_t page;
    int64_t entry;  // b * max_blocks + j
    bool written;
  };
  std::vector<Use> uses;  // every block in use
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = host_lengths[b];
    const int64_t used = (len + (append ? 1 : 0) + c.block_size - 1) / c.block_size;
    for (int64_t j = 0; j < used; ++j) {
      const int64_t entry = b * c.max_blocks + j;
      uses.push_back({host_block_table[entry], entry, !append || j == len / c.block_size});
    }
  }
  std::sort(uses.begin(), uses.end(), [](const Use& x, const Use& y) {
    return x.page != y.page ? x.page < y.page : x.written > y.written;  // a page's writes first
  });
  std::size_t run = 0;  // the current page's first use: written when any of its uses is
  for (std::size_t i = 1; i < uses.size(); ++i) {
    if (uses[i].page != uses[run].page) {
      run = i;
      continue;
    }
    if (!uses[run].written) continue;
    const int64_t a = uses[run].entry, b = uses[i].entry;
    return invalid_argument("block_table[", a / c.max_blocks, ", ", a % c.max_blocks,
                            "] and block_table[", b / c.max_blocks, ", ", b % c.max_blocks,
                            "] are both page ", uses[i].page, ", which ",
                            append ? "the append" : "the conversion",
                            " writes: a written page must not be shared");
  }
  return Status::ok();
}

}  // namespace litetopk
