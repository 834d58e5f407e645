#include "testkit/retrieval_workload.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "litetopk/float_bits.h"
#include "litetopk/fp8_e4m3.h"
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
enum Tag : uint64_t { kQueries = 1, kCorpus = 2, kCentres = 3, kMean = 4, kPick = 5, kBitmap = 6 };

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

bool is_fp8(const RetrievalSpec& spec) {
  return spec.corpus_format == RetrievalCorpusFormat::kFp8E4M3;
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

  // The corpus as e4m3 bytes and per-row scales.
  void fill_fp8(std::vector<uint8_t>* bytes, std::vector<float>* scales) const {
    bytes->assign(static_cast<std::size_t>(spec.n * spec.dim), 0);
    scales->assign(static_cast<std::size_t>(spec.n), 1.0f);
    parallel_for(spec.n, [&](int64_t r) {
      std::vector<double> values(static_cast<std::size_t>(spec.dim));
      row(kCorpus, r, values.data());
      double largest = 0.0;
      for (double v : values) largest = std::max(largest, std::fabs(v));
      const float scale = largest > 0.0 ? static_cast<float>(largest / fp8::kE4m3Max) : 1.0f;
      (*scales)[r] = scale;
      for (int64_t j = 0; j < spec.dim; ++j) {
        (*bytes)[r * spec.dim + j] = fp8::float_to_e4m3(static_cast<float>(values[j] / scale));
      }
    });
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

const void* RetrievalWorkload::corpus_data() const {
  return is_fp8(spec) ? static_cast<const void*>(corpus_fp8.data()) : corpus.data();
}

std::size_t RetrievalWorkload::corpus_bytes() const {
  return is_fp8(spec) ? corpus_fp8.size() : corpus.size() * sizeof(uint16_t);
}

RetrievalProblem RetrievalWorkload::host_problem() const {
  RetrievalProblem p;
  p.queries = queries.data();
  p.corpus = corpus_data();
  p.dtype = spec.dtype;
  p.corpus_format = spec.corpus_format;
  p.corpus_scales = is_fp8(spec) ? corpus_scales.data() : nullptr;
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
  if (is_fp8(spec)) {
    generator.fill_fp8(&w.corpus_fp8, &w.corpus_scales);
  } else {
    generator.fill(kCorpus, spec.n, &w.corpus);
  }
  w.corpus_norms.assign(static_cast<std::size_t>(spec.n), 0.0f);
  for (int64_t c = 0; c < spec.n; ++c) {
    // As retrieval_corpus_norms_cpu: the fp8 row's scale squared times its sum of squares.
    double sum = 0.0;
    for (int64_t j = 0; j < spec.dim; ++j) {
      const int64_t i = c * spec.dim + j;
      const double x = is_fp8(spec) ? fp8::e4m3_to_float(w.corpus_fp8[i])
                                    : float_bits::decode_score(w.corpus[i], spec.dtype);
      sum += x * x;
    }
    const double scale = is_fp8(spec) ? double{w.corpus_scales[c]} : 1.0;
    w.corpus_norms[c] = static_cast<float>(scale * scale * sum);
  }
  return w;
}

std::vector<uint8_t> make_retrieval_bitmap(int64_t n, double allowed, uint64_t seed) {
  std::vector<uint8_t> bitmap(static_cast<std::size_t>(retrieval_bitmap_bytes(n)), 0);
  const uint64_t base = row_base(seed, kBitmap, 0);
  for (int64_t c = 0; c < n; ++c) {
    const double u = static_cast<double>(hash64(base + static_cast<uint64_t>(c)) >> 11) * 0x1.0p-53;
    if (u < allowed) bitmap[c >> 3] = static_cast<uint8_t>(bitmap[c >> 3] | (1u << (c & 7)));
  }
  return bitmap;
}

}  // namespace litetopk::testkit
