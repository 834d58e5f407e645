#include "common/paged_indexer_testing.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace litetopk::testing {

using testkit::PagedIndexerWorkload;

namespace {
std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }
int64_t scale_byte(const PagedIndexerWorkload& w, int64_t block, int64_t slot) {
  return block_base(w, block) + w.spec.block_size * w.spec.D + slot * 4;
}
}  // namespace

int64_t block_base(const PagedIndexerWorkload& w, int64_t block) {
  return block * w.spec.block_size * (w.spec.D + 4);
}
uint8_t* key_bytes(PagedIndexerWorkload* w, int64_t block, int64_t slot) {
  return w->kv_cache.data() + block_base(*w, block) + slot * w->spec.D;
}
float read_scale(const PagedIndexerWorkload& w, int64_t block, int64_t slot) {
  float scale;
  std::memcpy(&scale, w.kv_cache.data() + scale_byte(w, block, slot), sizeof(scale));
  return scale;
}
void write_scale(PagedIndexerWorkload* w, int64_t block, int64_t slot, float scale) {
  std::memcpy(w->kv_cache.data() + scale_byte(*w, block, slot), &scale, sizeof(scale));
}

testkit::PagedIndexerSpec paged_spec(std::vector<int32_t> lens, int64_t next_n, int64_t H,
                                     int64_t k, uint64_t seed) {
  testkit::PagedIndexerSpec spec;
  spec.context_lens = std::move(lens);
  spec.next_n = next_n;
  spec.H = H;
  spec.k = k;
  spec.spare_blocks = 3;
  spec.seed = seed;
  return spec;
}

void make_keys_identical(PagedIndexerWorkload* w) {
  const std::vector<uint8_t> key(key_bytes(w, 0, 0), key_bytes(w, 0, 0) + w->spec.D);
  for (int64_t block = 0; block < w->num_blocks; ++block) {
    for (int64_t slot = 0; slot < w->spec.block_size; ++slot) {
      std::copy(key.begin(), key.end(), key_bytes(w, block, slot));
      write_scale(w, block, slot, 1.0f);
    }
  }
}

void write_special_scales(PagedIndexerWorkload* w) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, 0.0f, -0.0f};
  for (int64_t block = 0; block < w->num_blocks; ++block) {
    for (int64_t slot = block % 7; slot < w->spec.block_size; slot += 7) {
      write_scale(w, block, slot, specials[(block + slot) % 5]);
    }
  }
}

void break_block_entries(PagedIndexerWorkload* w) {
  const int32_t bad[] = {-1, static_cast<int32_t>(w->num_blocks),
                         std::numeric_limits<int32_t>::max(),
                         std::numeric_limits<int32_t>::min()};
  for (int64_t i = 1; i < 8; i += 2) w->block_table[size(i)] = bad[(i / 2) % 4];
  w->block_table[size(2 * w->max_blocks)] = -1;
  w->block_table[size(3 * w->max_blocks)] = static_cast<int32_t>(w->num_blocks);
}

int64_t visible(const PagedIndexerProblem& p, int64_t b, int64_t j) {
  const int64_t length = std::max<int64_t>(0, p.context_lens[b]);
  const int64_t n = std::clamp<int64_t>(length - p.next_n + j + 1, 0, length);
  return std::min(n, p.max_context);
}

GatheredRequest gather_request(const PagedIndexerWorkload& w, const PagedIndexerProblem& p,
                               int64_t b) {
  const int64_t H = p.num_heads, D = p.head_dim, bs = p.block_size, rows = p.next_n;
  const int64_t S = visible(p, b, p.next_n - 1);  // the last query sees the most
  GatheredRequest g;
  g.c.name = "Request" + std::to_string(b);
  g.c.T = rows;
  g.c.H = H;
  g.c.D = D;
  g.c.S = S;
  g.c.k = p.k;
  const auto* q = static_cast<const uint8_t*>(p.q);
  g.in.q.assign(q + b * rows * H * D, q + (b + 1) * rows * H * D);
  g.in.weights.assign(p.weights + b * rows * H, p.weights + (b + 1) * rows * H);
  g.in.kv.assign(size(S * D), 0);
  g.in.kv_scale.assign(size(S), std::numeric_limits<float>::quiet_NaN());
  for (int64_t pos = 0; pos < S; ++pos) {
    const int32_t block = p.block_table[b * p.max_blocks + pos / bs];
    if (block < 0 || block >= p.num_blocks) continue;
    const int64_t slot = pos % bs;
    const uint8_t* key = w.kv_cache.data() + block_base(w, block) + slot * D;
    std::copy(key, key + D, g.in.kv.begin() + pos * D);
    g.in.kv_scale[size(pos)] = read_scale(w, block, slot);
  }
  for (int64_t j = 0; j < rows; ++j) {
    g.in.ks.push_back(0);
    g.in.ke.push_back(static_cast<int32_t>(visible(p, b, j)));
  }
  return g;
}

}  // namespace litetopk::testing
