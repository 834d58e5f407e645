// Checks a DSA layer's outputs (dsa_workload.h) against the CPU references:
// - the indexer's indices on some queries with an IndexerChecker (indexer_verify.h: the
//   reference's count of valid indices, then -1 padding, distinct positions inside the query's
//   causal range, each with a CPU score within tolerance of the reference's k-th score);
// - the attention's out, max_logits and lse on a sample of queries against sparse_attention_cpu
//   over the same index rows (the run's own: a tie the indexer broke another way is not the
//   attention's error), within the bf16 tolerance of tests/gpu/sparse_attention_gpu_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testkit/dsa_workload.h"
#include "testkit/indexer_verify.h"

namespace litetopk::testkit {

// The CPU references' budgets of the checks, in flops: under half a second each on two cores
// (the indexer's reference scores about 20 GFLOP/s there, the attention's about 1.5).
constexpr double kDsaIndexerCheckFlops = 8e9;
constexpr double kDsaAttentionCheckFlops = 1e9;

// The indexer's checked queries: every query when the reference over all of them fits its
// budget, else the first, middle and last among kIndexerVerifyQueries (indexer_verify_queries).
std::vector<int64_t> dsa_indexer_check_queries(const DsaSpec& spec);
// The attention's checked queries: every query when they fit its budget, else evenly spaced ones
// (the first and the last included) that fit it, at least 8.
std::vector<int64_t> dsa_attention_check_queries(const DsaSpec& spec);

// Tolerance of out, from the kernels' arithmetic (tests/gpu/sparse_attention_gpu_test.cpp): a GPU
// kernel rounds each probability to bf16 (relative error <= 2^-9) before the second product and
// accumulates in fp32, so out is off the exact result by at most 2^-9 max_j |v_j| plus its own
// bf16 rounding (2^-9 |out|); the check allows twice that, 2^-8 (max |v| + |out|) per element,
// with max |v| over the query's attended value rows. max_logits and lse: 1e-4 (1 + |x|), and -inf
// exactly where the reference has it.
constexpr int kDsaOutToleranceExponent = -8;
constexpr double kDsaStatsTolerance = 1e-4;

// Runs the indexer reference on its checked queries once (the attention's reference runs in each
// check_attention, over the index rows it is given). `w` must outlive the checker.
class DsaChecker {
 public:
  explicit DsaChecker(const DsaWorkload& w);
  DsaChecker(const DsaChecker&) = delete;
  DsaChecker& operator=(const DsaChecker&) = delete;

  // indices [T, k], host. "" when every checked query passes, else the first failure.
  std::string check_indices(const int32_t* indices) const;
  // The attention's outputs (host: out [T, h_q, d_v] bf16 bits, max_logits and lse [T, h_q])
  // over `indices` [T, k]. "" when every checked query passes, else the first failure.
  std::string check_attention(const int32_t* indices, const uint16_t* out,
                              const float* max_logits, const float* lse) const;

  const std::vector<int64_t>& indexer_queries() const { return indexer_queries_; }
  const std::vector<int64_t>& attention_queries() const { return attention_queries_; }

 private:
  const DsaWorkload& w_;
  std::vector<int64_t> indexer_queries_;
  std::vector<int64_t> attention_queries_;
  IndexerChecker indexer_;
};

}  // namespace litetopk::testkit
