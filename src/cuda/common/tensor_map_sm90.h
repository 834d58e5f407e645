// Host-side TMA descriptors (CUtensorMap) for the sm90 kernels. The driver's encoder is reached
// through the runtime's entry-point query, so the library needs no link-time libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "litetopk/status.h"

namespace litetopk::detail {

// A 2-D map over `rows` rows of exactly 128 bytes (fp8 e4m3 head-dim rows) at `base` (16-byte
// aligned), loaded in boxes of `box_rows` rows (<= 256) with the 128-byte swizzle. Rows past the
// end read as zeros.
Status make_row_tile_map(const void* base, uint64_t rows, uint32_t box_rows, CUtensorMap* map);

// A 2-D map over a row-major matrix of `rows` rows of `row_bytes` bytes (a multiple of 16) at
// `base` (16-byte aligned), loaded in boxes of 128 bytes (64 fp16 / bf16 columns) by `box_rows`
// rows (<= 256) with the 128-byte swizzle; x coordinates are in bytes. Bytes past a row's end and
// rows past the last read as zeros.
Status make_matrix_tile_map(const void* base, uint64_t rows, uint64_t row_bytes, uint32_t box_rows,
                            CUtensorMap* map);

// A 3-D map over the keys of a paged cache (litetopk/paged_kv_layout.h): `blocks` blocks
// `block_bytes` apart (a multiple of 16), each starting with 64 rows of 128 key bytes; loaded one
// block's 64 x 128 keys at a time with the 128-byte swizzle (the scales after them are not
// read).
Status make_paged_block_map(const void* base, uint64_t blocks, uint64_t block_bytes,
                            CUtensorMap* map);

}  // namespace litetopk::detail
