// Argument checks for retrieval_topk: every failure names the argument, what was expected and what
// was given.
#include <cstdint>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/retrieval_validation.h"
#include "litetopk/retrieval.h"

namespace litetopk {

namespace {

using detail::check_alignment;
using detail::invalid_argument;
using detail::kMaxInt32;
using detail::product_fits;

// The corpus' type, format, row count and dimension (what retrieval_topk and
// retrieval_corpus_norms share).
Status validate_corpus_sizes(const RetrievalProblem& p) {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return invalid_argument("dtype must be float16 or bfloat16, got ", dtype_name(p.dtype));
  }
  switch (p.corpus_format) {
    case RetrievalCorpusFormat::kSameAsQueries:
      if (p.corpus_scales != nullptr) {
        return invalid_argument("corpus_scales must be null unless corpus_format is fp8_e4m3");
      }
      break;
    case RetrievalCorpusFormat::kFp8E4M3:
      break;
    default:
      return invalid_argument("corpus_format must be same_as_queries or fp8_e4m3, got ",
                              static_cast<int>(p.corpus_format));
  }
  if (p.n < 0) return invalid_argument("n must be >= 0, got ", p.n);
  if (p.n > kMaxInt32) return invalid_argument("n must be <= ", kMaxInt32, ", got ", p.n);
  if (p.dim < kRetrievalMinDim || p.dim > kRetrievalMaxDim || p.dim % kRetrievalDimMultiple != 0) {
    return invalid_argument("dim must be a multiple of ", kRetrievalDimMultiple, " in [",
                            kRetrievalMinDim, ", ", kRetrievalMaxDim, "], got ", p.dim);
  }
  return Status::ok();
}

// The corpus' pointers: set when there are rows (the scales with an fp8 corpus), aligned.
Status validate_corpus_addresses(const RetrievalProblem& p) {
  if (p.n > 0 && p.corpus == nullptr) return invalid_argument("corpus must not be null");
  if (p.n > 0 && p.corpus_format == RetrievalCorpusFormat::kFp8E4M3 &&
      p.corpus_scales == nullptr) {
    return invalid_argument("corpus_scales must not be null: corpus_format is fp8_e4m3");
  }
  if (Status status = check_alignment({{"corpus", p.corpus}}, 16); !status) return status;
  return check_alignment({{"corpus_scales", p.corpus_scales}}, 4);
}

}  // namespace

const char* retrieval_corpus_format_name(RetrievalCorpusFormat format) {
  switch (format) {
    case RetrievalCorpusFormat::kSameAsQueries: return "same_as_queries";
    case RetrievalCorpusFormat::kFp8E4M3: return "fp8_e4m3";
  }
  return "invalid";
}

Status detail::validate_retrieval_sizes(const RetrievalProblem& p) {
  if (Status status = validate_corpus_sizes(p); !status) return status;
  if (p.batch < 0) return invalid_argument("batch must be >= 0, got ", p.batch);
  if (p.batch > kMaxInt32) return invalid_argument("batch must be <= ", kMaxInt32, ", got ", p.batch);
  if (!product_fits(p.batch, p.dim) || !product_fits(p.n, p.dim)) {
    return invalid_argument("batch * dim and n * dim must fit in int64: batch ", p.batch, ", n ",
                            p.n, ", dim ", p.dim);
  }
  switch (p.metric) {
    case RetrievalMetric::kInnerProduct:
    case RetrievalMetric::kCosine:
    case RetrievalMetric::kL2:
      break;
    default:
      return invalid_argument("metric must be ip, cosine or l2, got ", static_cast<int>(p.metric));
  }
  if (p.corpus_norms != nullptr && p.metric != RetrievalMetric::kL2) {
    return invalid_argument("corpus_norms must be null unless metric is l2, got metric ",
                            retrieval_metric_name(p.metric));
  }
  if (p.k < 1 || p.k > kRetrievalMaxK) {
    return invalid_argument("k must be in [1, ", kRetrievalMaxK, "], got ", p.k);
  }
  if (!product_fits(p.batch, p.k)) {
    return invalid_argument("batch * k overflows int64: batch ", p.batch, ", k ", p.k);
  }
  return Status::ok();
}

Status detail::validate_retrieval_addresses(const RetrievalProblem& p) {
  if (p.batch == 0) return Status::ok();
  if (p.queries == nullptr) return invalid_argument("queries must not be null");
  if (Status status = validate_corpus_addresses(p); !status) return status;
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  if (Status status = check_alignment({{"queries", p.queries}}, 16); !status) return status;
  return check_alignment({{"corpus_norms", p.corpus_norms},
                          {"range_starts", p.range_starts},
                          {"range_ends", p.range_ends},
                          {"indices", p.indices},
                          {"scores", p.scores}},
                         4);
}

Status detail::validate_retrieval_corpus(const RetrievalProblem& p) {
  if (Status status = validate_corpus_sizes(p); !status) return status;
  return validate_corpus_addresses(p);
}

Status detail::validate_retrieval_ranges(const RetrievalProblem& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t start = p.range_starts ? p.range_starts[b] : 0;
    const int64_t end = p.range_ends ? p.range_ends[b] : p.n;
    if (start < 0 || start > end || end > p.n) {
      return invalid_argument("range [range_starts[", b, "], range_ends[", b,
                              "]) must satisfy 0 <= start <= end <= n (", p.n, "), got [", start,
                              ", ", end, ")");
    }
  }
  return Status::ok();
}

Status validate_retrieval_problem(const RetrievalProblem& p) {
  if (Status status = detail::validate_retrieval_sizes(p); !status) return status;
  return detail::validate_retrieval_addresses(p);
}

}  // namespace litetopk
