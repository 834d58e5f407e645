// Shared test support for sparse_decode (CPU suites now, GPU suites later): the synthetic
// workloads (testkit/decode_workload.h: (a) sinks + local window + needles + heavy tail, (b)
// flat attention, fp16 extremes), the adversarial case list, a naive fp64 attention oracle written
// independently of the library's reference, and output comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "testkit/decode_workload.h"
#include "litetopk/sparse_decode.h"

namespace litetopk::testing {

using testkit::DecodePattern;
using testkit::DecodeWorkload;
using testkit::DecodeWorkloadSpec;
using testkit::HostSparseCache;
using testkit::make_decode_workload;
using testkit::quantize_workload;
using testkit::TokenKind;

struct DecodeCase {
  std::string name;  // unique, gtest-safe ([A-Za-z0-9_])
  DecodeWorkloadSpec spec;
  int64_t block_size = 128;
  bool paged = false;
};
void PrintTo(const DecodeCase& c, std::ostream* os);

// The adversarial list, for BS = 128 and 256: lengths 0, 1, BS-1, BS, BS+1, 2BS, 3BS+17 and
// other non-multiples in one batch; group sizes 1, 4, 8 and 16; every pattern; identical heads;
// fp16 extremes in fp16 and bf16; contiguous and paged. Sized so that the whole CPU reference
// over the list takes about a second on two cores.
std::vector<DecodeCase> decode_cases();

// A dense fp32 cache holding the sparse cache's rebuilt keys and its values
// (sparse_kv_rebuild_cpu), and the query widened to fp32, ready for the naive oracle.
struct RebuiltCache {
  std::vector<float> keys, values, q;
  std::vector<int32_t> lengths;
  DenseKvCache cache;  // views into the vectors
};
void rebuild_cache(const SparseKvCache& cache, const DecodeWorkload& workload, RebuiltCache* out);

// Naive dense attention in fp64 over tokens [0, lengths[b]) of `cache` (any dtype), written
// without the library's reference: out [batch, num_q_heads, D] and lse [batch, num_q_heads]
// (empty sequences give 0 and -inf). `q` has the cache's dtype.
void naive_dense_decode(const DenseKvCache& cache, const void* q, int64_t num_q_heads,
                        double softmax_scale, std::vector<double>* out, std::vector<double>* lse);

// The exact logit l = scale * q . k of every token of (b, query head hq) over `cache`, in fp64.
std::vector<double> naive_logits(const DenseKvCache& cache, const void* q, int64_t num_q_heads,
                                 double softmax_scale, int64_t b, int64_t hq);

// |got[i] - want[i]| <= rel * |want[i]| + abs for every i, with a message naming the worst index.
::testing::AssertionResult near_all(const std::vector<float>& got, const std::vector<double>& want,
                                    double rel, double abs, const std::string& what);

// Element i of a host array of dtype as float.
float element(const void* base, DType dtype, int64_t i);

}  // namespace litetopk::testing
