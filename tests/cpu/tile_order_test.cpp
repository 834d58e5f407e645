// The fused indexer's key-tile order (formats/tile_order.h): every tile exactly once, the cold
// sample first and evenly strided, the rest in key order, and the multiply-high division exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "formats/tile_order.h"

namespace litetopk::tile_order {
namespace {

TEST(TileOrder, PermutationWithTheSampleFirst) {
  for (int32_t tiles = 0; tiles <= 2100; tiles += (tiles < 300 ? 1 : 37)) {
    for (int32_t requested : {0, 1, 2, 8, 13, 36, 73, 512}) {
      const TileOrder order = make_tile_order(tiles, requested);
      const int32_t c = order.cold_tiles;
      ASSERT_EQ(c, requested > 0 && tiles >= 4 * requested ? requested : 0) << tiles;
      std::vector<int> seen(static_cast<std::size_t>(tiles), 0);
      int32_t previous = -1;
      for (int32_t t = 0; t < tiles; ++t) {
        const int32_t tile = key_tile(order, t);
        ASSERT_GE(tile, 0) << "tiles " << tiles << " requested " << requested << " t " << t;
        ASSERT_LT(tile, tiles) << "tiles " << tiles << " requested " << requested << " t " << t;
        ++seen[static_cast<std::size_t>(tile)];
        if (t < c) {
          EXPECT_EQ(tile, t * (tiles / c));
        } else {
          EXPECT_GT(tile, previous) << "tiles " << tiles << " requested " << requested;
          previous = tile;
        }
      }
      for (int32_t tile = 0; tile < tiles; ++tile) {
        ASSERT_EQ(seen[static_cast<std::size_t>(tile)], 1)
            << "tiles " << tiles << " requested " << requested << " tile " << tile;
      }
    }
  }
}

// The largest ranges (S near 2^31 keys, 2^25 tiles): the unsampled tiles right before and after
// each sampled one, where the division's correction step matters.
TEST(TileOrder, HugeRanges) {
  for (int32_t tiles : {int32_t{1} << 25, (int32_t{1} << 25) - 3, 1000003}) {
    for (int32_t requested : {8, 511, 512}) {
      const TileOrder order = make_tile_order(tiles, requested);
      const int32_t c = order.cold_tiles;
      const int32_t stride = order.stride;
      const int32_t gaps = stride - 1;
      for (int32_t j = 0; j < c; ++j) {
        for (int32_t offset : {0, 1, gaps - 2, gaps - 1}) {
          if (offset < 0 || offset >= gaps) continue;
          const int32_t t = c + j * gaps + offset;
          EXPECT_EQ(key_tile(order, t), j * stride + 1 + offset)
              << "tiles " << tiles << " requested " << requested << " t " << t;
        }
      }
      EXPECT_EQ(key_tile(order, tiles - 1), tiles - 1);
    }
  }
}

}  // namespace
}  // namespace litetopk::tile_order
