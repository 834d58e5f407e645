// make_paged_indexer_workload and its context-length helpers (see paged_indexer_workload.h).
#include "testkit/paged_indexer_workload.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "litetopk/paged_kv_layout.h"
#include "testkit/counter_random.h"
#include "testkit/indexer_generators.h"

namespace litetopk::testkit {

namespace {

// Independent streams of one seed, one per array.
enum Stream : uint64_t { kQ = 1, kKeys, kKeyScales, kWeights, kBlockOrder, kStaleEntries, kLens };

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

int64_t blocks_for(int64_t tokens, int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

int64_t longest_context(const PagedIndexerSpec& spec) {
  int64_t longest = 0;
  for (int32_t length : spec.context_lens) longest = std::max<int64_t>(longest, length);
  return longest;
}

int64_t resolved_max_context(const PagedIndexerSpec& spec) {
  return spec.max_context > 0 ? spec.max_context : longest_context(spec);
}

int64_t resolved_max_blocks(const PagedIndexerSpec& spec) {
  return spec.max_blocks > 0 ? spec.max_blocks
                             : blocks_for(resolved_max_context(spec), spec.block_size);
}

// Uniform in [0, n) for n >= 1.
int64_t uniform_below(uint64_t h, int64_t n) {
  return static_cast<int64_t>(h % static_cast<uint64_t>(n));
}

// The cache's blocks in a random order (Fisher-Yates).
std::vector<int32_t> shuffled_blocks(int64_t num_blocks, uint64_t base) {
  std::vector<int32_t> order(static_cast<std::size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = num_blocks - 1; i > 0; --i) {
    const int64_t j = uniform_below(hash64(base + static_cast<uint64_t>(i)), i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace

std::vector<int32_t> fixed_context_lens(int64_t batch, int64_t context) {
  return std::vector<int32_t>(static_cast<std::size_t>(std::max<int64_t>(batch, 0)),
                              static_cast<int32_t>(context));
}

std::vector<int32_t> ragged_context_lens(int64_t batch, int64_t longest, int64_t k,
                                         uint64_t seed) {
  std::vector<int32_t> lens(static_cast<std::size_t>(std::max<int64_t>(batch, 0)));
  const uint64_t base = stream_base(seed, kLens);
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t h = hash64(base + static_cast<uint64_t>(b));
    int64_t length = 1 + uniform_below(h, std::max<int64_t>(longest, 1));
    if (b == 0) length = longest;
    if (b % 8 == 3 && k >= 1) length = uniform_below(h, std::min(k - 1, longest) + 1);
    if (b % 8 == 7) length = 0;
    lens[b] = static_cast<int32_t>(std::min(length, longest));
  }
  return lens;
}

std::string paged_indexer_spec_error(const PagedIndexerSpec& spec) {
  if (spec.context_lens.empty()) return "context_lens must hold one length per request";
  if (spec.next_n < 1) return "next_n must be >= 1, got " + std::to_string(spec.next_n);
  if (spec.H < 1 || spec.D < 1) {
    return "H and D must be >= 1, got H " + std::to_string(spec.H) + ", D " +
           std::to_string(spec.D);
  }
  if (spec.block_size < 1) return "block_size must be >= 1, got " + std::to_string(spec.block_size);
  if (spec.max_context < 0 || spec.max_context > kMaxInt32) {
    return "max_context must be in [0, 2^31 - 1], got " + std::to_string(spec.max_context);
  }
  if (spec.max_blocks < 0 || spec.max_blocks > kMaxInt32) {
    return "max_blocks must be in [0, 2^31 - 1], got " + std::to_string(spec.max_blocks);
  }
  if (spec.spare_blocks < 0) {
    return "spare_blocks must be >= 0, got " + std::to_string(spec.spare_blocks);
  }
  const int64_t max_context = resolved_max_context(spec);
  for (std::size_t b = 0; b < spec.context_lens.size(); ++b) {
    if (spec.context_lens[b] < 0 || spec.context_lens[b] > max_context) {
      return "context_lens[" + std::to_string(b) + "] must be in [0, max_context = " +
             std::to_string(max_context) + "], got " + std::to_string(spec.context_lens[b]);
    }
  }
  const int64_t max_blocks = resolved_max_blocks(spec);
  if (max_context > max_blocks * spec.block_size) {
    return "max_context must be <= max_blocks * block_size = " +
           std::to_string(max_blocks * spec.block_size) + ", got " + std::to_string(max_context);
  }
  int64_t used = 0;
  for (int32_t length : spec.context_lens) used += blocks_for(length, spec.block_size);
  if (used + spec.spare_blocks > kMaxInt32) {
    return "the cache's blocks (" + std::to_string(used) + " used + " +
           std::to_string(spec.spare_blocks) + " spare) must fit the int32 block table";
  }
  return "";
}

std::string paged_indexer_shape_label(const PagedIndexerSpec& spec) {
  return "B=" + std::to_string(spec.context_lens.size()) +
         " next_n=" + std::to_string(spec.next_n) +
         " context<=" + std::to_string(longest_context(spec)) + " H=" + std::to_string(spec.H) +
         " k=" + std::to_string(spec.k);
}

int64_t PagedIndexerWorkload::valid_pairs() const {
  int64_t pairs = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < spec.next_n; ++j) {
      pairs += paged_kv::visible_tokens(context_lens[b], spec.next_n, j, max_context);
    }
  }
  return pairs;
}

double PagedIndexerWorkload::flops() const {
  return 2.0 * static_cast<double>(valid_pairs()) * static_cast<double>(spec.H * spec.D);
}

PagedIndexerProblem PagedIndexerWorkload::host_problem() const {
  PagedIndexerProblem p;
  p.q = q.data();
  p.kv_cache = kv_cache.data();
  p.weights = weights.data();
  p.context_lens = context_lens.data();
  p.block_table = block_table.data();
  p.batch = batch;
  p.next_n = spec.next_n;
  p.num_heads = spec.H;
  p.head_dim = spec.D;
  p.num_blocks = num_blocks;
  p.block_size = spec.block_size;
  p.max_blocks = max_blocks;
  p.max_context = max_context;
  p.k = spec.k;
  return p;
}

PagedIndexerWorkload make_paged_indexer_workload(const PagedIndexerSpec& spec) {
  PagedIndexerWorkload w;
  w.spec = spec;
  const int64_t B = static_cast<int64_t>(spec.context_lens.size());
  const int64_t H = spec.H, D = spec.D, block_size = spec.block_size;
  w.batch = B;
  w.max_context = resolved_max_context(spec);
  w.max_blocks = resolved_max_blocks(spec);
  w.context_lens = spec.context_lens;

  int64_t used_blocks = 0;
  for (int32_t length : spec.context_lens) used_blocks += blocks_for(length, block_size);
  w.num_blocks = used_blocks + spec.spare_blocks;

  fill_fp8_normal(&w.q, B * spec.next_n * H * D, stream_base(spec.seed, kQ));
  fill_weights(&w.weights, B * spec.next_n, H, stream_base(spec.seed, kWeights));

  // Keys and scales of every cache block, each written straight to its place in the layout: key
  // element (block, slot, d) is element (block * block_size + slot) * D + d of the key stream.
  w.kv_cache.resize(static_cast<std::size_t>(w.num_blocks *
                                             paged_kv::block_bytes(block_size, D)));
  const uint64_t key_base = stream_base(spec.seed, kKeys);
  const uint64_t scale_base = stream_base(spec.seed, kKeyScales);
  parallel_fill(w.num_blocks * block_size, [&](int64_t begin, int64_t end) {
    for (int64_t token = begin; token < end; ++token) {
      const int64_t block = token / block_size, slot = token % block_size;
      uint8_t* key = w.kv_cache.data() + paged_kv::key_offset(block, slot, block_size, D);
      for (int64_t d = 0; d < D; ++d) key[d] = fp8_normal_at(key_base, token * D + d);
      const float scale = kv_scale_at(scale_base, token);
      std::copy_n(reinterpret_cast<const uint8_t*>(&scale), sizeof(scale),
                  w.kv_cache.data() + paged_kv::scale_offset(block, slot, block_size, D));
    }
  });

  // Request b takes the next blocks_for(length) blocks of a random order of the cache.
  const std::vector<int32_t> order =
      shuffled_blocks(w.num_blocks, stream_base(spec.seed, kBlockOrder));
  const uint64_t stale_base = stream_base(spec.seed, kStaleEntries);
  w.block_table.assign(static_cast<std::size_t>(B * w.max_blocks), -1);
  int64_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t used = blocks_for(spec.context_lens[b], block_size);
    int32_t* row = w.block_table.data() + b * w.max_blocks;
    for (int64_t i = 0; i < used; ++i) row[i] = order[next++];
    if (spec.unused_entries != UnusedTableEntries::kStale || w.num_blocks == 0) continue;
    for (int64_t i = used; i < w.max_blocks; ++i) {
      const uint64_t h = hash64(stale_base + static_cast<uint64_t>(b * w.max_blocks + i));
      row[i] = static_cast<int32_t>(uniform_below(h, w.num_blocks));
    }
  }
  return w;
}

IndexerWorkload gather_paged_request(const PagedIndexerWorkload& w, int64_t b) {
  const int64_t next_n = w.spec.next_n, H = w.spec.H, D = w.spec.D, bs = w.spec.block_size;
  IndexerWorkload g;
  g.spec.T = next_n;
  g.spec.S = paged_kv::visible_tokens(w.context_lens[b], next_n, next_n - 1, w.max_context);
  g.spec.H = H;
  g.spec.D = D;
  g.spec.k = w.spec.k;
  g.spec.ranges = IndexerRanges::kCausal;
  g.spec.seed = w.spec.seed;
  const int64_t S = g.spec.S;
  g.q.assign(w.q.begin() + b * next_n * H * D, w.q.begin() + (b + 1) * next_n * H * D);
  g.weights.assign(w.weights.begin() + b * next_n * H, w.weights.begin() + (b + 1) * next_n * H);
  g.kv.assign(static_cast<std::size_t>(S * D), 0);
  g.kv_scale.assign(static_cast<std::size_t>(S), std::numeric_limits<float>::quiet_NaN());
  for (int64_t pos = 0; pos < S; ++pos) {
    const int32_t block = w.block_table[b * w.max_blocks + pos / bs];
    if (!paged_kv::block_in_cache(block, w.num_blocks)) continue;
    const int64_t slot = pos % bs;
    std::copy_n(w.kv_cache.data() + paged_kv::key_offset(block, slot, bs, D), D,
                g.kv.begin() + pos * D);
    std::memcpy(&g.kv_scale[static_cast<std::size_t>(pos)],
                w.kv_cache.data() + paged_kv::scale_offset(block, slot, bs, D), sizeof(float));
  }
  for (int64_t j = 0; j < next_n; ++j) {
    g.ks.push_back(0);
    g.ke.push_back(static_cast<int32_t>(
        paged_kv::visible_tokens(w.context_lens[b], next_n, j, w.max_context)));
  }
  return g;
}

}  // namespace litetopk::testkit
