#include "testkit/dsa_verify.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "litetopk/float_bits.h"

namespace litetopk::testkit {

namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

std::vector<int64_t> every_query(int64_t T) {
  std::vector<int64_t> queries(size(T));
  for (int64_t t = 0; t < T; ++t) queries[size(t)] = t;
  return queries;
}

// `count` (>= 2, < T) evenly spaced queries of T, the first and the last included.
std::vector<int64_t> spaced_queries(int64_t T, int64_t count) {
  std::vector<int64_t> queries;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = i * (T - 1) / (count - 1);
    if (queries.empty() || queries.back() != t) queries.push_back(t);
  }
  return queries;
}

bool close_or_same_inf(float got, float want, double tol) {
  if (std::isinf(want)) return got == want;
  return std::isfinite(got) && std::fabs(static_cast<double>(got) - want) <= tol;
}

}  // namespace

std::vector<int64_t> dsa_indexer_check_queries(const DsaSpec& spec) {
  const double all = 2.0 * static_cast<double>(spec.T) * static_cast<double>(spec.S) *
                     static_cast<double>(spec.H * spec.D);  // an upper bound of the causal chunk
  return all <= kDsaIndexerCheckFlops ? every_query(spec.T) : indexer_verify_queries(spec.T);
}

std::vector<int64_t> dsa_attention_check_queries(const DsaSpec& spec) {
  const double per_query = 2.0 * static_cast<double>(spec.k) *
                           static_cast<double>(spec.h_q * (spec.d_qk + spec.d_v));
  const double affordable = std::floor(kDsaAttentionCheckFlops / per_query);
  if (affordable >= static_cast<double>(spec.T)) return every_query(spec.T);
  const int64_t count = std::max<int64_t>(8, static_cast<int64_t>(affordable));
  return count >= spec.T ? every_query(spec.T) : spaced_queries(spec.T, count);
}

DsaChecker::DsaChecker(const DsaWorkload& w)
    : w_(w),
      indexer_queries_(dsa_indexer_check_queries(w.spec)),
      attention_queries_(dsa_attention_check_queries(w.spec)),
      indexer_(w.indexer, indexer_queries_, kIndexerTolRel) {}

std::string DsaChecker::check_indices(const int32_t* indices) const {
  return indexer_.check(indices);
}

std::string DsaChecker::check_attention(const int32_t* indices, const uint16_t* out,
                                        const float* max_logits, const float* lse) const {
  using float_bits::f32_from_bf16_bits;
  const DsaSpec& spec = w_.spec;
  const int64_t h_q = spec.h_q, d_qk = spec.d_qk, d_v = spec.d_v, k = spec.k, S = spec.S;
  const int64_t n = static_cast<int64_t>(attention_queries_.size());

  // The checked queries' q rows and index rows, over the whole kv.
  std::vector<uint16_t> q;
  std::vector<int32_t> rows;
  q.reserve(size(n * h_q * d_qk));
  rows.reserve(size(n * k));
  for (int64_t t : attention_queries_) {
    q.insert(q.end(), w_.attention.q.begin() + t * h_q * d_qk,
             w_.attention.q.begin() + (t + 1) * h_q * d_qk);
    rows.insert(rows.end(), indices + t * k, indices + (t + 1) * k);
  }
  std::vector<uint16_t> ref_out(size(n * h_q * d_v));
  std::vector<float> ref_max(size(n * h_q)), ref_lse(size(n * h_q));
  SparseAttentionProblem p = w_.attention_problem(rows.data());
  p.q = q.data();
  p.s_q = n;
  p.out = ref_out.data();
  p.max_logits = ref_max.data();
  p.lse = ref_lse.data();
  if (Status s = sparse_attention_cpu(p); !s) return "CPU reference failed: " + s.to_string();

  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = attention_queries_[size(r)];
    double max_v = 0.0;  // over the query's attended value rows
    for (int64_t j = 0; j < k; ++j) {
      const int32_t token = rows[size(r * k + j)];
      if (token < 0 || token >= S) continue;
      const uint16_t* v = &w_.attention.kv[size(token * d_qk)];
      for (int64_t c = 0; c < d_v; ++c) {
        max_v = std::max(max_v, std::fabs(static_cast<double>(f32_from_bf16_bits(v[c]))));
      }
    }
    for (int64_t h = 0; h < h_q; ++h) {
      const int64_t at = t * h_q + h, ref_at = r * h_q + h;
      std::ostringstream where;
      where << "attention query " << t << " head " << h << ": ";
      const struct {
        const char* name;
        float got, want;
      } stats[] = {{"max_logits", max_logits[at], ref_max[size(ref_at)]},
                   {"lse", lse[at], ref_lse[size(ref_at)]}};
      for (const auto& stat : stats) {
        const double tol = kDsaStatsTolerance * (1.0 + std::fabs(static_cast<double>(stat.want)));
        if (!close_or_same_inf(stat.got, stat.want, tol)) {
          where << stat.name << ' ' << stat.got << ", CPU reference " << stat.want
                << " (tolerance " << tol << ")";
          return where.str();
        }
      }
      for (int64_t c = 0; c < d_v; ++c) {
        const float got = f32_from_bf16_bits(out[size(at * d_v + c)]);
        const float want = f32_from_bf16_bits(ref_out[size(ref_at * d_v + c)]);
        const double tol =
            std::ldexp(max_v + std::fabs(static_cast<double>(want)), kDsaOutToleranceExponent) +
            1e-30;
        if (!(std::fabs(static_cast<double>(got) - want) <= tol)) {
          where << "out column " << c << ' ' << got << ", CPU reference " << want
                << " (tolerance " << tol << ")";
          return where.str();
        }
      }
    }
  }
  return "";
}

}  // namespace litetopk::testkit
