// Argument checks for indexer_topk and indexer_logits: every failure names the argument, what was
// expected and what was given.
#include <cstdint>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/indexer_validation.h"
#include "litetopk/indexer.h"

namespace litetopk {

using detail::check_alignment;
using detail::invalid_argument;
using detail::kMaxInt32;
using detail::kMaxInt64;

namespace {

constexpr int64_t kMaxK = 8192;
constexpr int64_t kHeadDim = 128;
// q and kv are read by TMA: the global address must be 16-byte aligned.
constexpr std::uintptr_t kTmaAlignment = 16;

}  // namespace

Status validate_indexer_input_sizes(const IndexerProblem& p) {
  if (p.num_queries < 0) return invalid_argument("num_queries must be >= 0, got ", p.num_queries);
  if (p.num_heads != 32 && p.num_heads != 64) {
    return invalid_argument("num_heads must be 32 or 64, got ", p.num_heads);
  }
  if (p.head_dim != kHeadDim) {
    return invalid_argument("head_dim must be ", kHeadDim, ", got ", p.head_dim);
  }
  if (p.num_keys < 0) return invalid_argument("num_keys must be >= 0, got ", p.num_keys);
  if (p.num_keys > kMaxInt32) {
    return invalid_argument("num_keys must be <= ", kMaxInt32, " (int32 ranges), got ",
                            p.num_keys);
  }
  // q holds T * H * D bytes; kv holds S * D bytes (S <= INT32_MAX, so that one cannot overflow).
  if (p.num_queries > kMaxInt64 / (p.num_heads * p.head_dim)) {
    return invalid_argument("num_queries * num_heads * head_dim overflows int64: num_queries ",
                            p.num_queries, ", num_heads ", p.num_heads, ", head_dim ",
                            p.head_dim);
  }
  return Status::ok();
}

Status validate_indexer_input_addresses(const IndexerProblem& p) {
  if (p.num_queries == 0) return Status::ok();
  if (p.q == nullptr) return invalid_argument("q must not be null");
  if (p.weights == nullptr) return invalid_argument("weights must not be null");
  if (p.ks == nullptr) return invalid_argument("ks must not be null");
  if (p.ke == nullptr) return invalid_argument("ke must not be null");
  // With no keys there is nothing to read from kv and kv_scale.
  if (p.num_keys > 0) {
    if (p.kv == nullptr) return invalid_argument("kv must not be null");
    if (p.kv_scale == nullptr) return invalid_argument("kv_scale must not be null");
  }
  if (Status s = check_alignment({{"q", p.q}, {"kv", p.kv}}, kTmaAlignment, " (TMA)"); !s) {
    return s;
  }
  if (Status s = check_alignment({{"kv_scale", p.kv_scale}, {"weights", p.weights}},
                                 alignof(float));
      !s) {
    return s;
  }
  return check_alignment({{"ks", p.ks}, {"ke", p.ke}}, alignof(int32_t));
}

Status validate_indexer_inputs(const IndexerProblem& p) {
  if (Status s = validate_indexer_input_sizes(p); !s) return s;
  return validate_indexer_input_addresses(p);
}

Status validate_indexer_sizes(const IndexerProblem& p) {
  if (Status s = validate_indexer_input_sizes(p); !s) return s;
  if (p.k < 1 || p.k > kMaxK) {
    return invalid_argument("k must be in [1, ", kMaxK, "], got ", p.k);
  }
  if (p.num_queries > kMaxInt64 / p.k) {
    return invalid_argument("num_queries * k overflows int64: num_queries ", p.num_queries,
                            ", k ", p.k);
  }
  return Status::ok();
}

Status validate_indexer_addresses(const IndexerProblem& p) {
  if (Status s = validate_indexer_input_addresses(p); !s) return s;
  if (p.num_queries == 0) return Status::ok();
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  return check_alignment({{"indices", p.indices}, {"values", p.values}}, 4);
}

Status validate_indexer_problem(const IndexerProblem& p) {
  if (Status s = validate_indexer_sizes(p); !s) return s;
  return validate_indexer_addresses(p);
}

Status validate_indexer_ranges(const IndexerProblem& p, const int32_t* ks, const int32_t* ke) {
  if (p.num_queries <= 0) return Status::ok();
  if (ks == nullptr) return invalid_argument("ks must not be null");
  if (ke == nullptr) return invalid_argument("ke must not be null");
  for (int64_t t = 0; t < p.num_queries; ++t) {
    const int64_t start = ks[t];
    const int64_t end = ke[t];
    if (start < 0 || start > p.num_keys) {
      return invalid_argument("ks[", t, "] must be in [0, num_keys=", p.num_keys, "], got ",
                              start);
    }
    if (end < 0 || end > p.num_keys) {
      return invalid_argument("ke[", t, "] must be in [0, num_keys=", p.num_keys, "], got ",
                              end);
    }
    if (start > end) {
      return invalid_argument("ks[", t, "] must be <= ke[", t, "], got ", start, " > ", end);
    }
  }
  return Status::ok();
}

Status validate_indexer_logits_output(const IndexerProblem& p, const float* logits,
                                      int64_t logits_stride) {
  if (logits_stride < p.num_keys) {
    return invalid_argument("logits_stride must be >= num_keys (", p.num_keys, "), got ",
                            logits_stride);
  }
  if (!detail::row_extent_fits(p.num_queries, logits_stride, p.num_keys, sizeof(float))) {
    return invalid_argument("the logits' extent in bytes overflows int64: num_queries ",
                            p.num_queries, ", logits_stride ", logits_stride, ", num_keys ",
                            p.num_keys);
  }
  if (p.num_queries == 0 || p.num_keys == 0) return Status::ok();
  if (logits == nullptr) return invalid_argument("logits must not be null");
  return check_alignment({{"logits", logits}}, alignof(float));
}

}  // namespace litetopk
