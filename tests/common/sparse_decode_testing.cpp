// Case list, rebuilt caches, the naive fp64 attention oracle and comparisons for sparse_decode
// tests.
#include "common/sparse_decode_testing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "litetopk/float_bits.h"

namespace litetopk::testing {

void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

float element(const void* base, DType dtype, int64_t i) {
  return float_bits::decode_score(float_bits::load_score(base, dtype, i), dtype);
}

std::vector<DecodeCase> decode_cases() {
  std::vector<DecodeCase> cases;
  const auto add = [&](const std::string& name, DecodePattern pattern, DType dtype, int64_t bs,
                       bool paged, int64_t kv_heads, int64_t group, std::vector<int32_t> lengths,
                       bool identical = false) {
    DecodeCase c;
    c.name = name + "_BS" + std::to_string(bs) + (paged ? "_Paged" : "");
    c.spec.pattern = pattern;
    c.spec.dtype = dtype;
    c.spec.num_kv_heads = kv_heads;
    c.spec.group_size = group;
    c.spec.lengths = std::move(lengths);
    c.spec.identical_heads = identical;
    c.spec.seed = 1000 + cases.size();
    c.block_size = bs;
    c.paged = paged;
    cases.push_back(c);
  };
  for (const int32_t bs : {128, 256}) {
    const std::vector<int32_t> edges = {1, bs - 1, bs, bs + 1, 2 * bs, 3 * bs + 17};
    add("NeedlesEdgeLengths", DecodePattern::kNeedles, DType::kFloat16, bs, false, 2, 4, edges);
    add("NeedlesEdgeLengths", DecodePattern::kNeedles, DType::kFloat16, bs, true, 2, 4, edges);
    add("NeedlesBf16Group1", DecodePattern::kNeedles, DType::kBFloat16, bs, false, 3, 1,
        {1000, 2 * bs, 7});
    add("NeedlesGroup16Long", DecodePattern::kNeedles, DType::kFloat16, bs, true, 1, 16,
        {4173});
    // GQA 8 (64 query heads over 8 KV heads in Llama-3-70B-like models), fp16 and a paged bf16.
    add("NeedlesGroup8", DecodePattern::kNeedles, DType::kFloat16, bs, false, 2, 8,
        {3 * bs + 5, bs});
    add("NeedlesGroup8Bf16", DecodePattern::kNeedles, DType::kBFloat16, bs, true, 2, 8,
        {2 * bs - 1, 5 * bs});
    add("FlatWithEmpty", DecodePattern::kFlat, DType::kFloat16, bs, false, 1, 16,
        {0, 5, bs + 1, 4 * bs - 3});
    add("IdenticalHeads", DecodePattern::kNeedles, DType::kFloat16, bs, false, 2, 4,
        {bs + 1, 3 * bs}, true);
    add("ExtremesFp16", DecodePattern::kExtremes, DType::kFloat16, bs, false, 2, 2,
        {bs - 1, 2 * bs + 3});
    add("ExtremesBf16", DecodePattern::kExtremes, DType::kBFloat16, bs, true, 2, 2,
        {bs - 1, 2 * bs + 3});
  }
  return cases;
}

void rebuild_cache(const SparseKvCache& cache, const DecodeWorkload& workload, RebuiltCache* out) {
  const int64_t capacity = cache.max_blocks * cache.block_size;
  const auto elements =
      static_cast<std::size_t>(cache.batch * cache.num_kv_heads * capacity * cache.head_dim);
  out->keys.assign(elements, std::numeric_limits<float>::quiet_NaN());
  out->values.assign(elements, std::numeric_limits<float>::quiet_NaN());
  out->lengths.assign(static_cast<std::size_t>(cache.batch), 0);
  out->q.resize(workload.q.size());
  for (std::size_t i = 0; i < out->q.size(); ++i) {
    out->q[i] = element(workload.q.data(), workload.dtype, static_cast<int64_t>(i));
  }
  DenseKvCache& d = out->cache;
  d = DenseKvCache{};
  d.dtype = DType::kFloat32;
  d.batch = cache.batch;
  d.num_kv_heads = cache.num_kv_heads;
  d.head_dim = cache.head_dim;
  d.capacity = capacity;
  d.keys = out->keys.data();
  d.values = out->values.data();
  d.lengths = out->lengths.data();
  const Status status = sparse_kv_rebuild_cpu(cache, d);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
}

std::vector<double> naive_logits(const DenseKvCache& c, const void* q, int64_t num_q_heads,
                                 double scale, int64_t b, int64_t hq) {
  const int64_t d = c.head_dim;
  const int64_t h = hq / (num_q_heads / c.num_kv_heads);
  const int64_t token_stride = c.token_stride ? c.token_stride : d;
  const int64_t head_stride = c.head_stride ? c.head_stride : c.capacity * d;
  const int64_t batch_stride = c.batch_stride ? c.batch_stride : c.num_kv_heads * c.capacity * d;
  std::vector<double> logits(static_cast<std::size_t>(c.lengths[b]));
  for (int64_t t = 0; t < c.lengths[b]; ++t) {
    double s = 0;
    for (int64_t ch = 0; ch < d; ++ch) {
      s += static_cast<double>(element(q, c.dtype, (b * num_q_heads + hq) * d + ch)) *
           static_cast<double>(
               element(c.keys, c.dtype, b * batch_stride + h * head_stride + t * token_stride + ch));
    }
    logits[t] = scale * s;
  }
  return logits;
}

void naive_dense_decode(const DenseKvCache& c, const void* q, int64_t num_q_heads, double scale,
                        std::vector<double>* out, std::vector<double>* lse) {
  const int64_t d = c.head_dim;
  const int64_t group = num_q_heads / c.num_kv_heads;
  const int64_t token_stride = c.token_stride ? c.token_stride : d;
  const int64_t head_stride = c.head_stride ? c.head_stride : c.capacity * d;
  const int64_t batch_stride = c.batch_stride ? c.batch_stride : c.num_kv_heads * c.capacity * d;
  out->assign(static_cast<std::size_t>(c.batch * num_q_heads * d), 0.0);
  lse->assign(static_cast<std::size_t>(c.batch * num_q_heads),
              -std::numeric_limits<double>::infinity());
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.lengths[b];
    if (len == 0) continue;
    for (int64_t hq = 0; hq < num_q_heads; ++hq) {
      const int64_t h = hq / group;
      const std::vector<double> logits = naive_logits(c, q, num_q_heads, scale, b, hq);
      const double max = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (double l : logits) sum += std::exp(l - max);
      for (int64_t t = 0; t < len; ++t) {
        const double w = std::exp(logits[t] - max) / sum;
        for (int64_t ch = 0; ch < d; ++ch) {
          (*out)[(b * num_q_heads + hq) * d + ch] +=
              w * static_cast<double>(element(
                      c.values, c.dtype, b * batch_stride + h * head_stride + t * token_stride + ch));
        }
      }
      (*lse)[b * num_q_heads + hq] = max + std::log(sum);
    }
  }
}

::testing::AssertionResult near_all(const std::vector<float>& got, const std::vector<double>& want,
                                    double rel, double abs, const std::string& what) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << what << ": size " << got.size() << " != " << want.size();
  }
  std::size_t worst = 0, failures = 0;
  double worst_excess = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = want[i];
    if (g == w) continue;  // also equal infinities
    const double excess = std::fabs(g - w) - (rel * std::fabs(w) + abs);
    if (!(excess <= 0)) {
      ++failures;
      if (!(excess <= worst_excess)) {
        worst_excess = std::isnan(excess) ? std::numeric_limits<double>::infinity() : excess;
        worst = i;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg.precision(10);
  msg << what << ": " << failures << " of " << got.size() << " elements differ; worst at " << worst
      << ": got " << got[worst] << ", want " << want[worst] << " (tolerance rel " << rel
      << ", abs " << abs << ")";
  return ::testing::AssertionFailure() << msg.str();
}

}  // namespace litetopk::testing
