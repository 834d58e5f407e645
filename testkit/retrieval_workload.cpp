#include "testkit/retrieval_workload.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "litetopk/float_bits.h"
#include "testkit/counter_random.h"
#include "testkit/parallel_for.h"

namespace litetopk::testkit {

namespace {

struct KindName {
  RetrievalKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {RetrievalKind::kNormal, "normal"},
    {RetrievalKind::kNormalized, "normalized"},
    {RetrievalKind::kClustered, "clustered"},
    {RetrievalKind::kAnisotropic, "anisotropic"},
};

// Stream tags of the arrays drawn from one seed.
enum Tag : uint64_t { kQueries = 1, kCorpus = 2, kCentres = 3, kMean = 4, kPick = 5 };

// The base of row `row` of array `tag`: coordinate j draws from hash64(base + j).
uint64_t row_base(uint64_t seed, uint64_t tag, int64_t row) {
  return hash64(hash64(seed ^ (tag << 56)) + static_cast<uint64_t>(row));
}

void normal_row(uint64_t base, int64_t dim, double scale, double* out) {
  for (int64_t j = 0; j < dim; ++j) out[j] = scale * standard_normal(hash64(base + j));
}

void normalize(double* row, int64_t dim) {
  double sum = 0.0;
  for (int64_t j = 0; j < dim; ++j) sum += row[j] * row[j];
  const double inv = sum > 0.0 ? 1.0 / std::sqrt(sum) : 0.0;
  for (int64_t j = 0; j < dim; ++j) row[j] *= inv;
}

struct Generator {
  const RetrievalSpec& spec;
  int64_t clusters;
  std::vector<double> mean;  // the anisotropic kind's shared mean direction

  // Row `row` of array `tag` (kQueries or kCorpus) in double precision.
  void row(uint64_t tag, int64_t r, double* out) const {
    const int64_t dim = spec.dim;
    const uint64_t base = row_base(spec.seed, tag, r);
    switch (spec.kind) {
      case RetrievalKind::kNormal:
        normal_row(base, dim, 1.0, out);
        return;
      case RetrievalKind::kNormalized:
        normal_row(base, dim, 1.0, out);
        normalize(out, dim);
        return;
      case RetrievalKind::kClustered: {
        const int64_t centre = tag == kCorpus
                                   ? r % clusters
                                   : static_cast<int64_t>(hash64(row_base(spec.seed, kPick, r)) %
                                                          static_cast<uint64_t>(clusters));
        normal_row(row_base(spec.seed, kCentres, centre), dim, 1.0, out);
        normalize(out, dim);
        const double spread = (tag == kCorpus ? 0.25 : 0.1) / std::sqrt(static_cast<double>(dim));
        for (int64_t j = 0; j < dim; ++j) out[j] += spread * standard_normal(hash64(base + j));
        normalize(out, dim);
        return;
      }
      case RetrievalKind::kAnisotropic: {
        for (int64_t j = 0; j < dim; ++j) {
          const double sigma = std::exp(-3.0 * static_cast<double>(j) / static_cast<double>(dim));
          out[j] = mean[j] + sigma * standard_normal(hash64(base + j));
        }
        return;
      }
    }
  }

  void fill(uint64_t tag, int64_t rows, std::vector<uint16_t>* out) const {
    out->assign(static_cast<std::size_t>(rows * spec.dim), 0);
    parallel_for(rows, [&](int64_t r) {
      std::vector<double> values(static_cast<std::size_t>(spec.dim));
      row(tag, r, values.data());
      for (int64_t j = 0; j < spec.dim; ++j) {
        (*out)[r * spec.dim + j] = static_cast<uint16_t>(
            float_bits::encode_score(static_cast<float>(values[j]), spec.dtype));
      }
    });
  }
};

}  // namespace

const char* retrieval_kind_name(RetrievalKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "invalid";
}

bool parse_retrieval_kind(const std::string& name, RetrievalKind* kind) {
  for (const KindName& entry : kKindNames) {
    if (name == entry.name) {
      *kind = entry.kind;
      return true;
    }
  }
  return false;
}

std::string retrieval_kind_choices() {
  std::string choices;
  for (const KindName& entry : kKindNames) {
    if (!choices.empty()) choices += "|";
    choices += entry.name;
  }
  return choices;
}

std::vector<RetrievalKind> all_retrieval_kinds() {
  std::vector<RetrievalKind> kinds;
  for (const KindName& entry : kKindNames) kinds.push_back(entry.kind);
  return kinds;
}

RetrievalProblem RetrievalWorkload::host_problem() const {
  RetrievalProblem p;
  p.queries = queries.data();
  p.corpus = corpus.data();
  p.dtype = spec.dtype;
  p.batch = spec.batch;
  p.n = spec.n;
  p.dim = spec.dim;
  p.metric = spec.metric;
  p.k = spec.k;
  return p;
}

RetrievalWorkload make_retrieval_workload(const RetrievalSpec& spec) {
  RetrievalWorkload w;
  w.spec = spec;
  Generator generator{spec, std::max<int64_t>(1, spec.n / 64), {}};
  generator.mean.resize(static_cast<std::size_t>(spec.dim));
  normal_row(row_base(spec.seed, kMean, 0), spec.dim, 1.0, generator.mean.data());
  normalize(generator.mean.data(), spec.dim);
  generator.fill(kQueries, spec.batch, &w.queries);
  generator.fill(kCorpus, spec.n, &w.corpus);
  w.corpus_norms.assign(static_cast<std::size_t>(spec.n), 0.0f);
  for (int64_t c = 0; c < spec.n; ++c) {
    double sum = 0.0;
    for (int64_t j = 0; j < spec.dim; ++j) {
      const double x = float_bits::decode_score(w.corpus[c * spec.dim + j], spec.dtype);
      sum += x * x;
    }
    w.corpus_norms[c] = static_cast<float>(sum);
  }
  return w;
}

}  // namespace litetopk::testkit
