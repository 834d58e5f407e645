// retrieval_topk_cpu, the test oracle (host pointers).
//
// 1. Validate the problem and the host ranges 0 <= start <= end <= n.
// 2. Widen the corpus to fp32 once (exact for fp16 and bf16); for l2 without corpus_norms, the
//    squared norms in fp64.
// 3. Per query (spread over the threads): the fp64 dot products with the corpus rows of its
//    range, rounded to fp32 (l2: 2 q . c - ||c||^2 in fp64, then rounded), NaN outside the range.
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

double dot(const float* a, const float* b, int64_t dim) {
  double sum = 0.0;
  for (int64_t j = 0; j < dim; ++j) sum += static_cast<double>(a[j]) * static_cast<double>(b[j]);
  return sum;
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
    const std::vector<float> corpus = widen(p.corpus, p.dtype, p.n * p.dim);
    std::vector<double> norms;
    if (p.metric == RetrievalMetric::kL2) {
      norms.resize(static_cast<std::size_t>(p.n));
      for (int64_t c = 0; c < p.n; ++c) {
        norms[c] = p.corpus_norms ? static_cast<double>(p.corpus_norms[c])
                                  : dot(&corpus[c * p.dim], &corpus[c * p.dim], p.dim);
      }
    }
    std::vector<Status> statuses(static_cast<std::size_t>(p.batch));
    cpu::parallel_for(p.batch, threads, [&](int64_t b) {
      std::vector<float> row(static_cast<std::size_t>(p.n),
                             std::numeric_limits<float>::quiet_NaN());
      const int64_t start = p.range_starts ? p.range_starts[b] : 0;
      const int64_t end = p.range_ends ? p.range_ends[b] : p.n;
      const float* q = &queries[b * p.dim];
      for (int64_t c = start; c < end; ++c) {
        const double d = dot(q, &corpus[c * p.dim], p.dim);
        row[c] = static_cast<float>(p.metric == RetrievalMetric::kL2 ? 2.0 * d - norms[c] : d);
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

}  // namespace litetopk
