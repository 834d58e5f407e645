// DeepGEMM's paged fp8 indexer cache (the kv_cache of fp8_paged_mqa_logits and of
// PagedIndexerProblem in litetopk/indexer.h), for callers that write such a cache and for the CPU
// reference and the CUDA kernels that read it: where a token's key and scale live, which
// block-table entries may be read, and how many tokens each query sees.
//
// kv_cache is declared [num_blocks, block_size, 1, D + 4] bytes, but a block is not block_size
// rows of D + 4 bytes: it holds its block_size x D fp8 e4m3 keys first (slot s at bytes
// s * D .. s * D + D - 1), then its block_size fp32 scales (slot s at byte block_size * D + 4 s).
// Consecutive blocks are block_size * (D + 4) bytes apart (8448 at block_size 64, D 128: a
// multiple of 16, so every block's keys start 16-byte aligned when kv_cache does).
#pragma once

#include <cstdint>

#include "litetopk/host_device.h"

namespace litetopk::paged_kv {

constexpr int64_t kScaleBytes = 4;  // one fp32 scale per token

// Bytes of one block.
LITETOPK_HD int64_t block_bytes(int64_t block_size, int64_t head_dim) {
  return block_size * (head_dim + kScaleBytes);
}

// Byte offset in kv_cache of the D key bytes of slot `slot` of block `block`.
LITETOPK_HD int64_t key_offset(int64_t block, int64_t slot, int64_t block_size, int64_t head_dim) {
  return block * block_bytes(block_size, head_dim) + slot * head_dim;
}

// Byte offset in kv_cache of the fp32 scale of slot `slot` of block `block`.
LITETOPK_HD int64_t scale_offset(int64_t block, int64_t slot, int64_t block_size,
                                 int64_t head_dim) {
  return block * block_bytes(block_size, head_dim) + block_size * head_dim + slot * kScaleBytes;
}

// Whether a block-table entry names a block of the cache. Tokens of a block whose entry does not
// are unselectable (their keys are never read).
LITETOPK_HD bool block_in_cache(int32_t entry, int64_t num_blocks) {
  return entry >= 0 && static_cast<int64_t>(entry) < num_blocks;
}

// Tokens query j (0 .. next_n - 1) of a request sees: its first context_len - next_n + j + 1
// positions, clamped into [0, context_len] (a negative context_len counts as 0), and never past
// max_context (positions >= max_context are never visible).
LITETOPK_HD int64_t visible_tokens(int32_t context_len, int64_t next_n, int64_t j,
                                   int64_t max_context) {
  const int64_t length = context_len > 0 ? context_len : 0;
  const int64_t seen = length - (next_n - 1 - j);
  const int64_t clamped = seen > 0 ? seen : 0;
  return clamped < max_context ? clamped : max_context;
}

}  // namespace litetopk::paged_kv
