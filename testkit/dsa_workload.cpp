// make_dsa_workload (see dsa_workload.h).
#include "testkit/dsa_workload.h"

#include <algorithm>
#include <limits>

namespace litetopk::testkit {

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxIndexerK = 8192;

bool one_of(int64_t value, std::initializer_list<int64_t> allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

}  // namespace

std::string dsa_spec_error(const DsaSpec& spec) {
  if (spec.T < 1) return "T (queries) must be >= 1, got " + std::to_string(spec.T);
  if (spec.S < spec.T || spec.S > kMaxInt32) {
    return "S (the context, the chunk's T queries included) must be in [T, 2^31 - 1], got S " +
           std::to_string(spec.S) + " with T " + std::to_string(spec.T);
  }
  if (!one_of(spec.h_q, {16, 32, 64, 128})) {
    return "h_q (attention heads) must be 16, 32, 64 or 128, got " + std::to_string(spec.h_q);
  }
  if (!one_of(spec.d_qk, {512, 576}) || spec.d_v != 512) {
    return "d_qk must be 576 or 512 and d_v 512, got d_qk " + std::to_string(spec.d_qk) +
           ", d_v " + std::to_string(spec.d_v);
  }
  if (!one_of(spec.H, {32, 64}) || spec.D != 128) {
    return "the indexer needs H 32 or 64 and D 128, got H " + std::to_string(spec.H) + ", D " +
           std::to_string(spec.D);
  }
  if (spec.k < 1 || spec.k > kMaxIndexerK) {
    return "k must be in [1, 8192], got " + std::to_string(spec.k);
  }
  return "";
}

std::string dsa_shape_label(const DsaSpec& spec) {
  return "T=" + std::to_string(spec.T) + " S=" + std::to_string(spec.S) +
         " h_q=" + std::to_string(spec.h_q) + " k=" + std::to_string(spec.k);
}

IndexerSpec dsa_indexer_spec(const DsaSpec& spec) {
  IndexerSpec indexer;
  indexer.T = spec.T;
  indexer.S = spec.S;
  indexer.H = spec.H;
  indexer.D = spec.D;
  indexer.k = spec.k;
  indexer.ranges = IndexerRanges::kCausal;
  indexer.seed = spec.seed;
  return indexer;
}

SparseAttentionSpec dsa_attention_spec(const DsaSpec& spec) {
  SparseAttentionSpec attention;
  attention.s_q = spec.T;
  attention.s_kv = spec.S;
  attention.h_q = spec.h_q;
  attention.d_qk = spec.d_qk;
  attention.d_v = spec.d_v;
  attention.topk = spec.k;
  attention.seed = spec.seed + 1;
  return attention;
}

int64_t dsa_attention_pairs(const DsaSpec& spec) {
  int64_t pairs = 0;
  for (int64_t t = 0; t < spec.T; ++t) pairs += std::min(spec.k, spec.S - spec.T + t + 1);
  return pairs;
}

double DsaWorkload::indexer_flops() const { return indexer.flops(); }

double DsaWorkload::attention_flops() const {
  return 2.0 * static_cast<double>(dsa_attention_pairs(spec)) *
         static_cast<double>(spec.h_q * (spec.d_qk + spec.d_v));
}

IndexerProblem DsaWorkload::indexer_problem() const { return indexer.host_problem(); }

SparseAttentionProblem DsaWorkload::attention_problem(const int32_t* indices) const {
  SparseAttentionProblem p = attention.host_problem();
  p.indices = indices;
  p.topk = spec.k;
  return p;
}

DsaWorkload make_dsa_workload(const DsaSpec& spec) {
  DsaWorkload w;
  w.spec = spec;
  w.indexer = make_indexer_workload(dsa_indexer_spec(spec));
  // q and kv as the sparse attention generator draws them. Its index rows are the indexer's job
  // here: one padding slot per query makes it draw no token, and they are dropped.
  SparseAttentionSpec attention = dsa_attention_spec(spec);
  attention.topk = 1;
  attention.padding_fraction = 1.0;
  w.attention = make_sparse_attention_workload(attention);
  w.attention.spec.topk = spec.k;
  w.attention.spec.padding_fraction = 0.0;
  w.attention.indices.clear();
  return w;
}

}  // namespace litetopk::testkit
