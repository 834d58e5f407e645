// The order in which the fused indexer scores a query block's key tiles (its cold sample): with c
// sample tiles over a range of n tiles, first tiles 0, stride, 2 stride, ..., (c - 1) stride
// (stride = n / c), then every other tile in key order; without one, tiles 0 .. n-1. Shared by the
// CUDA scoring core (indexer_wgmma_sm90.cuh) and its CPU test.
#pragma once

#include <cstdint>

#include "litetopk/host_device.h"

namespace litetopk::tile_order {

struct TileOrder {
  int32_t cold_tiles = 0;  // c: 0 for no cold sample
  int32_t stride = 1;
  uint32_t magic = 0;  // min(2^32 / (stride - 1), 2^32 - 1): key_tile's division
};

// A cold sample of `requested` tiles when the range spans at least 4x as many, else none.
LITETOPK_HD TileOrder make_tile_order(int32_t tiles, int32_t requested) {
  TileOrder order;
  if (requested <= 0 || tiles < 4 * requested) return order;
  order.cold_tiles = requested;
  order.stride = tiles / requested;
  const auto gaps = static_cast<uint64_t>(order.stride - 1);
  const uint64_t magic = (uint64_t{1} << 32) / gaps;
  order.magic = static_cast<uint32_t>(magic < UINT32_MAX ? magic : UINT32_MAX);
  return order;
}

// The key tile (0 .. n-1, in key order) scored t-th. The division by the gap between sampled
// tiles is a multiply-high by the magic number, low by at most one, then corrected.
LITETOPK_HD int32_t key_tile(const TileOrder& order, int32_t t) {
  const int32_t c = order.cold_tiles;
  if (t < c) return t * order.stride;
  const auto u = static_cast<uint32_t>(t - c);
  const auto gaps = static_cast<uint32_t>(order.stride - 1);  // unsampled tiles between two
  const uint32_t unsampled_before_tail = static_cast<uint32_t>(c) * gaps;
  if (u >= unsampled_before_tail) {
    return c * order.stride + static_cast<int32_t>(u - unsampled_before_tail);
  }
  auto q = static_cast<uint32_t>((uint64_t{u} * order.magic) >> 32);
  uint32_t rest = u - q * gaps;
  if (rest >= gaps) {
    ++q;
    rest -= gaps;
  }
  return static_cast<int32_t>(q) * order.stride + 1 + static_cast<int32_t>(rest);
}

}  // namespace litetopk::tile_order
