#include "testkit/indexer_workload.h"

#include <algorithm>
#include <limits>

#include "testkit/counter_random.h"
#include "testkit/indexer_generators.h"

namespace litetopk::testkit {

namespace {

// Independent streams of one seed, one per array.
enum Stream : uint64_t { kQ = 1, kKv, kKvScale, kWeights, kRanges };

}  // namespace

const char* indexer_ranges_name(IndexerRanges ranges) {
  switch (ranges) {
    case IndexerRanges::kCausal: return "causal";
    case IndexerRanges::kFull: return "full";
    case IndexerRanges::kRagged: return "ragged";
  }
  return "invalid";
}

bool parse_indexer_ranges(const std::string& name, IndexerRanges* ranges) {
  for (IndexerRanges r : {IndexerRanges::kCausal, IndexerRanges::kFull, IndexerRanges::kRagged}) {
    if (name == indexer_ranges_name(r)) {
      *ranges = r;
      return true;
    }
  }
  return false;
}

std::string indexer_spec_error(const IndexerSpec& spec) {
  if (spec.T < 1) return "T must be >= 1, got " + std::to_string(spec.T);
  if (spec.S < 1) return "S must be >= 1, got " + std::to_string(spec.S);
  if (spec.S > std::numeric_limits<int32_t>::max()) {
    return "S must be <= 2^31 - 1 (int32 ranges), got " + std::to_string(spec.S);
  }
  if (spec.ranges == IndexerRanges::kCausal && spec.S < spec.T) {
    return "causal ranges put the T queries at the end of the S keys, so S must be >= T; got T " +
           std::to_string(spec.T) + ", S " + std::to_string(spec.S);
  }
  return "";
}

std::string indexer_shape_label(const IndexerSpec& spec) {
  return "T=" + std::to_string(spec.T) + " S=" + std::to_string(spec.S) +
         " H=" + std::to_string(spec.H) + " k=" + std::to_string(spec.k);
}

int64_t IndexerWorkload::valid_pairs() const {
  int64_t pairs = 0;
  for (std::size_t t = 0; t < ks.size(); ++t) pairs += ke[t] - ks[t];
  return pairs;
}

double IndexerWorkload::flops() const {
  return 2.0 * static_cast<double>(valid_pairs()) * static_cast<double>(spec.H * spec.D);
}

IndexerProblem IndexerWorkload::host_problem() const {
  IndexerProblem p;
  p.q = q.data();
  p.kv = kv.data();
  p.kv_scale = kv_scale.data();
  p.weights = weights.data();
  p.ks = ks.data();
  p.ke = ke.data();
  p.num_queries = spec.T;
  p.num_heads = spec.H;
  p.head_dim = spec.D;
  p.num_keys = spec.S;
  p.k = spec.k;
  return p;
}

IndexerWorkload make_indexer_workload(const IndexerSpec& spec) {
  IndexerWorkload w;
  w.spec = spec;
  const int64_t T = spec.T, S = spec.S, H = spec.H, D = spec.D;
  fill_fp8_normal(&w.q, T * H * D, stream_base(spec.seed, kQ));
  fill_fp8_normal(&w.kv, S * D, stream_base(spec.seed, kKv));

  w.kv_scale.resize(static_cast<std::size_t>(S));
  const uint64_t scale_base = stream_base(spec.seed, kKvScale);
  parallel_fill(S, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) w.kv_scale[s] = kv_scale_at(scale_base, s);
  });
  fill_weights(&w.weights, T, H, stream_base(spec.seed, kWeights));

  w.ks.resize(static_cast<std::size_t>(T));
  w.ke.resize(static_cast<std::size_t>(T));
  const uint64_t range_base = stream_base(spec.seed, kRanges);
  for (int64_t t = 0; t < T; ++t) {
    int64_t start = 0, end = S;
    switch (spec.ranges) {
      case IndexerRanges::kCausal: end = S - T + t + 1; break;
      case IndexerRanges::kFull: break;
      case IndexerRanges::kRagged: {
        const uint64_t h = hash64(range_base + static_cast<uint64_t>(t));
        start = static_cast<int64_t>((h & 0xffffffffu) % static_cast<uint64_t>(S / 4 + 1));
        const int64_t length =
            static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(S - start + 1));
        end = start + length;
        if (t % 8 == 7) end = start + std::min(length, spec.k / 2);  // fewer than k: -1 padding
        if (t % 32 == 31) end = start;                               // empty
        break;
      }
    }
    w.ks[t] = static_cast<int32_t>(start);
    w.ke[t] = static_cast<int32_t>(end);
  }
  return w;
}

void slice_indexer_rows(const IndexerWorkload& w, const std::vector<int64_t>& queries,
                        IndexerRows* rows) {
  const int64_t H = w.spec.H, D = w.spec.D;
  rows->queries = queries;
  rows->q.clear();
  rows->weights.clear();
  rows->ks.clear();
  rows->ke.clear();
  for (int64_t t : queries) {
    rows->q.insert(rows->q.end(), w.q.begin() + t * H * D, w.q.begin() + (t + 1) * H * D);
    rows->weights.insert(rows->weights.end(), w.weights.begin() + t * H,
                         w.weights.begin() + (t + 1) * H);
    rows->ks.push_back(w.ks[t]);
    rows->ke.push_back(w.ke[t]);
  }
  rows->problem = w.host_problem();
  rows->problem.q = rows->q.data();
  rows->problem.weights = rows->weights.data();
  rows->problem.ks = rows->ks.data();
  rows->problem.ke = rows->ke.data();
  rows->problem.num_queries = static_cast<int64_t>(queries.size());
}

}  // namespace litetopk::testkit
