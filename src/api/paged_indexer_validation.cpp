// Argument checks for the paged decode indexer (validate_paged_indexer_problem): shapes, sizes,
// pointers and alignment. Every failure names the argument, what was expected and what was given.
// context_lens and block_table are never read (device values; their contents are the caller's
// contract, see litetopk/indexer.h).
#include <cstdint>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/paged_indexer_validation.h"
#include "litetopk/indexer.h"

namespace litetopk {

using detail::check_alignment;
using detail::invalid_argument;
using detail::kMaxInt32;
using detail::product_fits;

namespace {

constexpr int64_t kMaxNextN = 4;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kBlockSize = 64;
constexpr int64_t kMaxK = 8192;
// q and the cache blocks are read by TMA: the global address must be 16-byte aligned.
constexpr std::uintptr_t kTmaAlignment = 16;

Status check_shapes(const PagedIndexerProblem& p) {
  if (p.batch < 0) return invalid_argument("batch must be >= 0, got ", p.batch);
  if (p.next_n < 1 || p.next_n > kMaxNextN) {
    return invalid_argument("next_n must be in [1, ", kMaxNextN, "], got ", p.next_n);
  }
  if (p.num_heads != 32 && p.num_heads != 64) {
    return invalid_argument("num_heads must be 32 or 64, got ", p.num_heads);
  }
  if (p.head_dim != kHeadDim) {
    return invalid_argument("head_dim must be ", kHeadDim, ", got ", p.head_dim);
  }
  if (p.block_size != kBlockSize) {
    return invalid_argument("block_size must be ", kBlockSize, ", got ", p.block_size);
  }
  if (p.num_blocks < 0) return invalid_argument("num_blocks must be >= 0, got ", p.num_blocks);
  if (p.num_blocks > kMaxInt32) {
    return invalid_argument("num_blocks must be <= ", kMaxInt32, " (int32 block table), got ",
                            p.num_blocks);
  }
  if (p.max_blocks < 0) return invalid_argument("max_blocks must be >= 0, got ", p.max_blocks);
  if (p.max_blocks > kMaxInt32) {
    return invalid_argument("max_blocks must be <= ", kMaxInt32, ", got ", p.max_blocks);
  }
  if (p.max_context < 0) return invalid_argument("max_context must be >= 0, got ", p.max_context);
  if (p.max_context > kMaxInt32) {
    return invalid_argument("max_context must be <= ", kMaxInt32, " (int32 context_lens), got ",
                            p.max_context);
  }
  // max_blocks, block_size <= INT32_MAX: the product fits in int64.
  if (p.max_context > p.max_blocks * p.block_size) {
    return invalid_argument("max_context must be <= max_blocks * block_size (", p.max_blocks,
                            " * ", p.block_size, " = ", p.max_blocks * p.block_size, "), got ",
                            p.max_context);
  }
  // q holds B * next_n * H * D bytes, the block table B * max_blocks entries.
  if (!product_fits(p.batch, p.next_n, p.num_heads * p.head_dim)) {
    return invalid_argument("batch * next_n * num_heads * head_dim overflows int64: batch ",
                            p.batch, ", next_n ", p.next_n, ", num_heads ", p.num_heads,
                            ", head_dim ", p.head_dim);
  }
  if (!product_fits(p.batch, p.max_blocks)) {
    return invalid_argument("batch * max_blocks overflows int64: batch ", p.batch,
                            ", max_blocks ", p.max_blocks);
  }
  return Status::ok();
}

Status check_pointers(const PagedIndexerProblem& p) {
  if (p.q == nullptr) return invalid_argument("q must not be null");
  if (p.weights == nullptr) return invalid_argument("weights must not be null");
  if (p.context_lens == nullptr) return invalid_argument("context_lens must not be null");
  // With max_context = 0 no token is visible: nothing is read from the table or the cache.
  if (p.max_context > 0) {
    if (p.block_table == nullptr) return invalid_argument("block_table must not be null");
    if (p.num_blocks > 0 && p.kv_cache == nullptr) {
      return invalid_argument("kv_cache must not be null");
    }
  }
  if (Status s = check_alignment({{"q", p.q}, {"kv_cache", p.kv_cache}}, kTmaAlignment, " (TMA)");
      !s) {
    return s;
  }
  return check_alignment(
      {{"weights", p.weights}, {"context_lens", p.context_lens}, {"block_table", p.block_table}},
      4);
}

}  // namespace

Status validate_paged_indexer_inputs(const PagedIndexerProblem& p) {
  if (Status s = check_shapes(p); !s) return s;
  if (p.batch == 0) return Status::ok();
  return check_pointers(p);
}

Status validate_paged_indexer_sizes(const PagedIndexerProblem& p) {
  if (Status s = check_shapes(p); !s) return s;
  if (p.k < 1 || p.k > kMaxK) {
    return invalid_argument("k must be in [1, ", kMaxK, "], got ", p.k);
  }
  if (!product_fits(p.batch, p.next_n, p.k)) {
    return invalid_argument("batch * next_n * k overflows int64: batch ", p.batch, ", next_n ",
                            p.next_n, ", k ", p.k);
  }
  return Status::ok();
}

Status validate_paged_indexer_addresses(const PagedIndexerProblem& p) {
  if (p.batch == 0) return Status::ok();
  if (Status s = check_pointers(p); !s) return s;
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  return check_alignment({{"indices", p.indices}, {"values", p.values}}, 4);
}

Status validate_paged_indexer_problem(const PagedIndexerProblem& p) {
  if (Status s = validate_paged_indexer_sizes(p); !s) return s;
  return validate_paged_indexer_addresses(p);
}

Status validate_paged_indexer_logits_output(const PagedIndexerProblem& p, const float* logits,
                                            int64_t logits_stride) {
  if (logits_stride < p.max_context) {
    return invalid_argument("logits_stride must be >= max_context (", p.max_context, "), got ",
                            logits_stride);
  }
  const int64_t rows = p.batch * p.next_n;
  if (!detail::row_extent_fits(rows, logits_stride, p.max_context, sizeof(float))) {
    return invalid_argument("the logits' extent in bytes overflows int64: rows (batch * next_n) ",
                            rows, ", logits_stride ", logits_stride, ", max_context ",
                            p.max_context);
  }
  if (rows == 0 || p.max_context == 0) return Status::ok();
  if (logits == nullptr) return invalid_argument("logits must not be null");
  return check_alignment({{"logits", logits}}, alignof(float));
}

}  // namespace litetopk
