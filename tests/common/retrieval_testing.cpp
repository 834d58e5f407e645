#include "common/retrieval_testing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "litetopk/float_bits.h"
#include "litetopk/fp8_e4m3.h"

namespace litetopk::testing {

namespace {

double element(const void* data, DType dtype, int64_t i) {
  return float_bits::decode_score(float_bits::load_score(data, dtype, i), dtype);
}

// Element i of the corpus without its row's fp8 scale.
double corpus_element(const RetrievalProblem& p, int64_t i) {
  if (p.corpus_format != RetrievalCorpusFormat::kFp8E4M3) return element(p.corpus, p.dtype, i);
  return fp8::e4m3_to_float(static_cast<const uint8_t*>(p.corpus)[i]);
}

}  // namespace

std::vector<float> retrieval_scores(const RetrievalProblem& p) {
  std::vector<float> scores(static_cast<std::size_t>(p.batch * p.n),
                            std::numeric_limits<float>::quiet_NaN());
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = p.range_starts ? p.range_starts[b] : 0;
    const int64_t end = p.range_ends ? p.range_ends[b] : p.n;
    for (int64_t c = start; c < end; ++c) {
      if (p.corpus_bitmap && ((p.corpus_bitmap[c / 8] >> (c % 8)) & 1) == 0) continue;
      double dot = 0.0;
      double norm = 0.0;
      double query_norm = 0.0;
      for (int64_t j = 0; j < p.dim; ++j) {
        const double x = corpus_element(p, c * p.dim + j);
        const double q = element(p.queries, p.dtype, b * p.dim + j);
        dot += q * x;
        norm += x * x;
        query_norm += q * q;
      }
      const double scale = p.corpus_scales ? double{p.corpus_scales[c]} : 1.0;
      dot *= scale;
      norm *= scale * scale;
      if (p.metric == RetrievalMetric::kL2) {
        if (p.corpus_norms) norm = p.corpus_norms[c];
        dot = 2.0 * dot - norm - query_norm;
      }
      scores[b * p.n + c] = static_cast<float>(dot);
    }
  }
  return scores;
}

ExpectedTopk sorted_topk(const std::vector<float>& scores, int64_t batch, int64_t n, int64_t k) {
  ExpectedTopk out;
  out.indices.assign(static_cast<std::size_t>(batch * k), -1);
  out.scores.assign(static_cast<std::size_t>(batch * k), std::numeric_limits<float>::quiet_NaN());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<std::pair<float, int32_t>> row;
    for (int64_t c = 0; c < n; ++c) {
      const float s = scores[b * n + c];
      if (!std::isnan(s)) row.emplace_back(s, static_cast<int32_t>(c));
    }
    std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    for (int64_t j = 0; j < k && j < static_cast<int64_t>(row.size()); ++j) {
      out.indices[b * k + j] = row[j].second;
      out.scores[b * k + j] = row[j].first;
    }
  }
  return out;
}

::testing::AssertionResult same_topk(const ExpectedTopk& expected, const int32_t* indices,
                                     const float* scores, int64_t batch, int64_t k) {
  for (int64_t i = 0; i < batch * k; ++i) {
    if (indices[i] != expected.indices[i]) {
      return ::testing::AssertionFailure() << "query " << i / k << " slot " << i % k << ": index "
                                           << indices[i] << ", expected " << expected.indices[i];
    }
    if (scores == nullptr) continue;
    const float want = expected.scores[i];
    if (std::isnan(want) ? !std::isnan(scores[i]) : scores[i] != want) {
      return ::testing::AssertionFailure() << "query " << i / k << " slot " << i % k << ": score "
                                           << scores[i] << ", expected " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace litetopk::testing
