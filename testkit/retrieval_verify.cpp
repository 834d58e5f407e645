#include "testkit/retrieval_verify.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "litetopk/float_bits.h"
#include "litetopk/fp8_e4m3.h"

namespace litetopk::testkit {

namespace {

double query_value(const RetrievalProblem& p, int64_t i) {
  return float_bits::decode_score(float_bits::load_score(p.queries, p.dtype, i), p.dtype);
}

// Element i of the corpus without the fp8 row scale.
double corpus_value(const RetrievalProblem& p, int64_t i) {
  if (p.corpus_format == RetrievalCorpusFormat::kFp8E4M3) {
    return fp8::e4m3_to_float(static_cast<const uint8_t*>(p.corpus)[i]);
  }
  return float_bits::decode_score(float_bits::load_score(p.corpus, p.dtype, i), p.dtype);
}

// The reference arithmetic's score of (query b, corpus row c).
float exact_score(const RetrievalProblem& p, int64_t b, int64_t c) {
  const double scale = p.corpus_scales ? double{p.corpus_scales[c]} : 1.0;
  double dot = 0.0;
  double norm = 0.0;
  double query_norm = 0.0;
  for (int64_t j = 0; j < p.dim; ++j) {
    const double q = query_value(p, b * p.dim + j);
    const double x = corpus_value(p, c * p.dim + j);
    dot += q * x;
    norm += x * x;
    query_norm += q * q;
  }
  dot *= scale;
  norm *= scale * scale;
  if (p.metric != RetrievalMetric::kL2) return static_cast<float>(dot);
  if (p.corpus_norms != nullptr) norm = p.corpus_norms[c];
  return static_cast<float>(2.0 * dot - norm - query_norm);
}

bool allowed(const RetrievalProblem& p, int64_t c) {
  return p.corpus_bitmap == nullptr || ((p.corpus_bitmap[c >> 3] >> (c & 7)) & 1) != 0;
}

}  // namespace

float retrieval_tolerance(const RetrievalProblem& p, const float* reference_scores) {
  float largest = 0.0f;
  for (int64_t i = 0; i < p.batch * p.k; ++i) {
    if (std::isfinite(reference_scores[i])) largest = std::max(largest, std::fabs(reference_scores[i]));
  }
  return std::ldexp(1.0f + largest, -12);
}

std::string compare_retrieval(const RetrievalProblem& p, const int32_t* indices,
                              const float* scores, const int32_t* reference_indices,
                              const float* reference_scores, float tolerance) {
  std::ostringstream failure;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = p.range_starts ? p.range_starts[b] : 0;
    const int64_t end = p.range_ends ? p.range_ends[b] : p.n;
    int64_t count = 0;
    while (count < p.k && reference_indices[b * p.k + count] >= 0) ++count;
    const float kth = count > 0 ? reference_scores[b * p.k + count - 1] : 0.0f;
    std::set<int32_t> seen;
    for (int64_t j = 0; j < p.k; ++j) {
      const int32_t row = indices[b * p.k + j];
      if (j >= count) {
        if (row != -1) {
          failure << "query " << b << " slot " << j << ": row " << row << ", expected -1 after "
                  << count << " rows";
          return failure.str();
        }
        continue;
      }
      if (row < start || row >= end || !allowed(p, row) || !seen.insert(row).second) {
        failure << "query " << b << " slot " << j << ": row " << row
                << " is outside the query's range [" << start << ", " << end
                << "), filtered out by the bitmap, or repeated";
        return failure.str();
      }
      const float exact = exact_score(p, b, row);
      if (std::isnan(exact) || exact < kth - tolerance) {
        failure << "query " << b << " slot " << j << ": row " << row << " scores " << exact
                << ", below the k-th best " << kth << " - " << tolerance;
        return failure.str();
      }
      if (scores != nullptr && !(std::fabs(scores[b * p.k + j] - exact) <= tolerance)) {
        failure << "query " << b << " slot " << j << ": score " << scores[b * p.k + j]
                << ", the reference arithmetic gives " << exact;
        return failure.str();
      }
    }
  }
  return {};
}

}  // namespace litetopk::testkit
