// Argument checks for merge_topk: every failure names the argument, what was expected and what was
// given.
#include <cstdint>

#include "api/argument_checks.h"
#include "api/format.h"
#include "api/merge_validation.h"
#include "litetopk/merge.h"

namespace litetopk {

MergeProblem detail::with_merge_strides(const MergeProblem& p) {
  MergeProblem resolved = p;
  if (resolved.shard_stride == 0) resolved.shard_stride = p.k_in;
  if (resolved.row_stride == 0) resolved.row_stride = p.shards * p.k_in;
  return resolved;
}

Status detail::validate_merge_sizes(const MergeProblem& p) {
  if (p.batch < 0) return invalid_argument("batch must be >= 0, got ", p.batch);
  if (p.shards < 1) return invalid_argument("shards must be >= 1, got ", p.shards);
  if (p.k_in < 1) return invalid_argument("k_in must be >= 1, got ", p.k_in);
  if (!product_fits(p.shards, p.k_in) || p.shards * p.k_in > kMaxInt32) {
    return invalid_argument("shards * k_in must be <= ", kMaxInt32, " (candidates per row), got ",
                            p.shards, " * ", p.k_in);
  }
  if (p.k < 1) return invalid_argument("k must be >= 1, got ", p.k);
  if (p.k > kMaxInt32) return invalid_argument("k must be <= ", kMaxInt32, ", got ", p.k);
  if (!product_fits(p.batch, p.k)) {
    return invalid_argument("batch * k overflows int64: batch ", p.batch, ", k ", p.k);
  }
  if (p.row_stride < 0) {
    return invalid_argument("row_stride must be >= 0 (0: shards * k_in), got ", p.row_stride);
  }
  if (p.shard_stride < 0) {
    return invalid_argument("shard_stride must be >= 0 (0: k_in), got ", p.shard_stride);
  }
  const MergeProblem r = with_merge_strides(p);
  if (p.shards > 1 && r.shard_stride < p.k_in) {
    return invalid_argument("shard_stride must be >= k_in (", p.k_in, ") or 0, got ",
                            p.shard_stride);
  }
  if (p.batch > 1 && r.row_stride < p.k_in) {
    return invalid_argument("row_stride must be >= k_in (", p.k_in, ") or 0, got ", p.row_stride);
  }
  // The last candidate's offset in bytes (4-byte values and indices) fits in int64.
  const int64_t rows_before = p.batch > 0 ? p.batch - 1 : 0;
  if (!product_fits(rows_before, r.row_stride) || !product_fits(p.shards - 1, r.shard_stride) ||
      rows_before * r.row_stride > kMaxInt64 - (p.shards - 1) * r.shard_stride - p.k_in ||
      !product_fits(rows_before * r.row_stride + (p.shards - 1) * r.shard_stride + p.k_in, 4)) {
    return invalid_argument("the candidates' extent in bytes overflows int64: batch ", p.batch,
                            ", row_stride ", r.row_stride, ", shards ", p.shards,
                            ", shard_stride ", r.shard_stride);
  }
  return Status::ok();
}

Status detail::validate_merge_addresses(const MergeProblem& p) {
  if (p.batch == 0) return Status::ok();
  if (p.values == nullptr) return invalid_argument("values must not be null");
  if (p.indices == nullptr) return invalid_argument("indices must not be null");
  if (p.out_indices == nullptr) return invalid_argument("out_indices must not be null");
  return check_alignment({{"values", p.values},
                          {"indices", p.indices},
                          {"counts", p.counts},
                          {"out_indices", p.out_indices},
                          {"out_values", p.out_values}},
                         4);
}

Status validate_merge_problem(const MergeProblem& p) {
  if (Status status = detail::validate_merge_sizes(p); !status) return status;
  return detail::validate_merge_addresses(p);
}

}  // namespace litetopk
