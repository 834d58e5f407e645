// Argument checks for sparse attention (validate_sparse_attention_problem): shapes, sizes,
// pointers and alignment. Every failure names the argument, what was expected and what was given.
// The contents of indices are never read (device values; any value outside [0, s_kv) is a
// skipped slot, see litetopk/attention.h).
#include <cmath>
#include <cstring>
#include <cstdint>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/sparse_attention_validation.h"
#include "heuristics/attention_plan.h"
#include "litetopk/attention.h"

namespace litetopk {

using detail::check_alignment;
using detail::invalid_argument;
using detail::kMaxInt32;
using detail::product_fits;

namespace {

constexpr int64_t kValueDim = 512;
constexpr int64_t kBf16Bytes = 2;
// q, kv and out are moved by TMA: the global address must be 16-byte aligned.
constexpr std::uintptr_t kTmaAlignment = 16;

Status check_shapes(const SparseAttentionProblem& p) {
  if (p.s_q < 0 || p.s_q > kMaxInt32) {
    return invalid_argument("s_q must be in [0, ", kMaxInt32, "], got ", p.s_q);
  }
  if (p.s_kv < 0 || p.s_kv > kMaxInt32) {
    return invalid_argument("s_kv must be in [0, ", kMaxInt32, "] (int32 indices), got ", p.s_kv);
  }
  if (p.h_q != 16 && p.h_q != 32 && p.h_q != 64 && p.h_q != 128) {
    return invalid_argument("h_q must be 16, 32, 64 or 128, got ", p.h_q);
  }
  if (p.d_qk != 576 && p.d_qk != 512) {
    return invalid_argument("d_qk must be 576 or 512, got ", p.d_qk);
  }
  if (p.d_v != kValueDim) return invalid_argument("d_v must be ", kValueDim, ", got ", p.d_v);
  if (p.topk < 1 || p.topk > kMaxInt32) {
    return invalid_argument("topk must be in [1, ", kMaxInt32, "], got ", p.topk);
  }
  if (!std::isfinite(p.sm_scale)) {
    return invalid_argument("sm_scale must be finite, got ", p.sm_scale);
  }
  if (std::strcmp(sparse_attention_algo_name(p.algo), "invalid") == 0) {
    return invalid_argument("algo must be a SparseAttentionAlgo, got ", static_cast<int>(p.algo));
  }
  if (p.algo == SparseAttentionAlgo::kUnionPacked && !heuristics::union_packing_applies(p)) {
    return invalid_argument("algo union-packed needs h_q 16 or 32, (64 / h_q) * topk <= 8192 and "
                            "s_kv <= 2^27; got h_q ", p.h_q, ", topk ", p.topk, ", s_kv ", p.s_kv);
  }
  // s_q, s_kv <= INT32_MAX and h_q, d_qk, d_v small: the q, kv and out byte counts fit (below
  // 2^50). Only the indices can overflow: s_q * topk * 4 bytes reaches 2^64.
  if (!product_fits(p.s_q, p.topk, sizeof(int32_t))) {
    return invalid_argument("s_q * topk * 4 (the bytes of indices) overflows int64: s_q ", p.s_q,
                            ", topk ", p.topk);
  }
  static_assert(kMaxInt32 * 128 * 576 * kBf16Bytes < (int64_t{1} << 50), "q bytes fit");
  return Status::ok();
}

Status check_pointers(const SparseAttentionProblem& p) {
  if (p.q == nullptr) return invalid_argument("q must not be null");
  if (p.s_kv > 0 && p.kv == nullptr) return invalid_argument("kv must not be null");
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  if (p.out == nullptr) return invalid_argument("out must not be null");
  if (Status s = check_alignment({{"q", p.q}, {"kv", p.kv}, {"out", p.out}}, kTmaAlignment,
                                 " (TMA)");
      !s) {
    return s;
  }
  return check_alignment({{"indices", p.indices}, {"max_logits", p.max_logits}, {"lse", p.lse}},
                         4);
}

}  // namespace

Status detail::validate_sparse_attention_shapes(const SparseAttentionProblem& p) {
  return check_shapes(p);
}

Status detail::validate_sparse_attention_addresses(const SparseAttentionProblem& p) {
  if (p.s_q == 0) return Status::ok();
  return check_pointers(p);
}

Status validate_sparse_attention_problem(const SparseAttentionProblem& p) {
  if (Status s = check_shapes(p); !s) return s;
  return detail::validate_sparse_attention_addresses(p);
}

}  // namespace litetopk
