// retrieval_topk_cpu, the test oracle, and retrieval_corpus_norms_cpu (host pointers).
//
// 1. Validate the problem and the host ranges 0 <= start <= end <= n.
// 2. Widen the queries and the corpus to fp32 once (exact for fp16, bf16 and e4m3; an fp8 row is
//    its e4m3 values, its scale applied to the dot product); for l2 the squared norms in fp64
//    (the corpus' from corpus_norms when given).
// 3. Per query (spread over the threads): the fp64 dot products with the corpus rows of its
//    range whose bitmap bit is set (fp8: times the row's scale), rounded to fp32 (l2:
//    2 q . c - ||c||^2 - ||q||^2 in fp64, then rounded), NaN for every other row.
// 4. select_topk_cpu's reference (a full sort: sorted and deterministic) over that row, whose
//    indices are corpus row numbers.
#include <cstdint>
#include <limits>
#include <vector>

#include "api/format.h"
#include "api/retrieval_validation.h"
#include "cpu/parallel_for.h"
#include "cpu/run_guarded.h"
#include "litetopk/float_bits.h"
#include "litetopk/fp8_e4m3.h"
#include "litetopk/retrieval.h"
#include "litetopk/select.h"

namespace litetopk {

namespace {

std::vector<float> widen(const void* data, DType dtype, int64_t count) {
  std::vector<float> out(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = float_bits::decode_score(float_bits::load_score(data, dtype, i), dtype);
  }
  return out;
}

// The corpus' values in fp32, without the fp8 row scales.
std::vector<float> widen_corpus(const RetrievalProblem& p) {
  if (p.corpus_format != RetrievalCorpusFormat::kFp8E4M3) return widen(p.corpus, p.dtype, p.n * p.dim);
  std::vector<float> out(static_cast<std::size_t>(p.n * p.dim));
  const auto* bytes = static_cast<const uint8_t*>(p.corpus);
  for (int64_t i = 0; i < p.n * p.dim; ++i) out[i] = fp8::e4m3_to_float(bytes[i]);
  return out;
}

double dot(const float* a, const float* b, int64_t dim) {
  double sum = 0.0;
  for (int64_t j = 0; j < dim; ++j) sum += static_cast<double>(a[j]) * static_cast<double>(b[j]);
  return sum;
}

double row_scale(const RetrievalProblem& p, int64_t c) {
  return p.corpus_scales ? static_cast<double>(p.corpus_scales[c]) : 1.0;
}

// ||row c||^2 in fp64 of the widened corpus.
double corpus_norm(const RetrievalProblem& p, const std::vector<float>& corpus, int64_t c) {
  const double scale = row_scale(p, c);
  return scale * scale * dot(&corpus[c * p.dim], &corpus[c * p.dim], p.dim);
}

bool allowed(const RetrievalProblem& p, int64_t c) {
  return p.corpus_bitmap == nullptr || ((p.corpus_bitmap[c >> 3] >> (c & 7)) & 1) != 0;
}

}  // namespace

Status retrieval_topk_cpu(const RetrievalProblem& p, int num_threads) {
  if (Status status = validate_retrieval_problem(p); !status) return status;
  if (Status status = detail::validate_retrieval_ranges(p); !status) return status;
  if (num_threads < 0) {
    return detail::invalid_argument("num_threads must be >= 0 (0 = every hardware thread), got ",
                                    num_threads);
  }
  if (p.batch == 0) return Status::ok();
  const int threads = num_threads > 0 ? num_threads : cpu::hardware_threads();
  return cpu::run_guarded("retrieval_topk_cpu", [&] {
    const std::vector<float> queries = widen(p.queries, p.dtype, p.batch * p.dim);
    const std::vector<float> corpus = widen_corpus(p);
    const bool l2 = p.metric == RetrievalMetric::kL2;
    std::vector<double> norms;
    if (l2) {
      norms.resize(static_cast<std::size_t>(p.n));
      for (int64_t c = 0; c < p.n; ++c) {
        norms[c] = p.corpus_norms ? static_cast<double>(p.corpus_norms[c])
                                  : corpus_norm(p, corpus, c);
      }
    }
    std::vector<Status> statuses(static_cast<std::size_t>(p.batch));
    cpu::parallel_for(p.batch, threads, [&](int64_t b) {
      std::vector<float> row(static_cast<std::size_t>(p.n),
                             std::numeric_limits<float>::quiet_NaN());
      const int64_t start = p.range_starts ? p.range_starts[b] : 0;
      const int64_t end = p.range_ends ? p.range_ends[b] : p.n;
      const float* q = &queries[b * p.dim];
      const double query_norm = l2 ? dot(q, q, p.dim) : 0.0;
      for (int64_t c = start; c < end; ++c) {
        if (!allowed(p, c)) continue;
        const double d = row_scale(p, c) * dot(q, &corpus[c * p.dim], p.dim);
        row[c] = static_cast<float>(l2 ? 2.0 * d - norms[c] - query_norm : d);
      }
      SelectProblem select;
      select.scores = row.data();
      select.dtype = DType::kFloat32;
      select.batch = 1;
      select.n = p.n;
      select.k = p.k;
      select.sorted = true;
      select.deterministic = true;
      select.indices = p.indices + b * p.k;
      select.values = p.scores ? p.scores + b * p.k : nullptr;
      statuses[b] = select_topk_cpu(select, CpuSelectAlgo::kReference, 1);
    });
    for (const Status& status : statuses) {
      if (!status) return status;
    }
    return Status::ok();
  });
}

Status retrieval_corpus_norms_cpu(const RetrievalProblem& p, float* norms) {
  if (Status status = detail::validate_retrieval_corpus(p); !status) return status;
  if (p.n > 0 && norms == nullptr) return detail::invalid_argument("norms must not be null");
  return cpu::run_guarded("retrieval_corpus_norms_cpu", [&] {
    const std::vector<float> corpus = widen_corpus(p);
    for (int64_t c = 0; c < p.n; ++c) norms[c] = static_cast<float>(corpus_norm(p, corpus, c));
    return Status::ok();
  });
}

}  // namespace litetopk
