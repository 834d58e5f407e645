// sparse_attention on the GPU against the CPU reference (sparse_attention_cpu), every algorithm
// that applies (per-query, union-packed, plain, auto): every h_q, d_qk 576 and 512, topk not a
// multiple of the kernels' 64-slot tile, -1 padding and out-of-range indices, repeated tokens,
// queries with nothing to attend, s_kv = 0, neighbour-shared rows, union groups cut by the
// chunk's edge, unions from one query's row to G rows, a repeat inside a packed group, unions
// built by the bitmap (s_kv <= 2^18) and by the sort.
//
// Tolerance, from the arithmetic: the kernel rounds each probability 2^(l - m) to bf16 (relative
// error <= 2^-9) before the second product and accumulates in fp32, so out differs from the
// exact result by at most 2^-9 max_j |v_j| (the weights sum to 1), plus bf16 rounding of out
// (2^-9 |out|); the fp32 logits are off by about d_qk 2^-24 of their scale, which moves the
// weights by far less. The test allows twice that: 2^-8 (max |v| + |out|) per element, and
// 1e-4 (1 + |x|) for max_logits and lse; -inf exactly where the CPU has it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu/gpu_select_runner.h"
#include "litetopk/float_bits.h"
#include "litetopk/attention.h"
#include "testkit/device_memory.h"
#include "testkit/sparse_attention_workload.h"

namespace litetopk::testing {
namespace {

using testkit::DeviceBuffer;
using testkit::SparseAttentionSpec;
using testkit::SparseAttentionWorkload;

using float_bits::f32_from_bf16_bits;

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> max_logits, lse;
};

Outputs run_cpu(const SparseAttentionWorkload& w) {
  Outputs r;
  SparseAttentionProblem p = w.host_problem();
  r.out.assign(size(p.s_q * p.h_q * p.d_v), 0);
  r.max_logits.assign(size(p.s_q * p.h_q), 0.0f);
  r.lse.assign(r.max_logits.size(), 0.0f);
  p.out = r.out.data();
  p.max_logits = r.max_logits.data();
  p.lse = r.lse.data();
  const Status s = sparse_attention_cpu(p);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

Outputs run_gpu(const SparseAttentionWorkload& w, SparseAttentionAlgo algo) {
  SparseAttentionProblem p = w.host_problem();
  p.algo = algo;
  DeviceBuffer q, kv, indices, out, max_logits, lse;
  EXPECT_TRUE(testkit::upload(w.q, &q).is_ok());
  EXPECT_TRUE(kv.allocate(std::max<std::size_t>(w.kv.size() * 2, 16)).is_ok());
  if (!w.kv.empty()) {
    EXPECT_TRUE(testkit::copy_to_device(kv.data(), w.kv.data(), w.kv.size() * 2).is_ok());
  }
  EXPECT_TRUE(testkit::upload(w.indices, &indices).is_ok());
  Outputs r;
  r.out.assign(size(p.s_q * p.h_q * p.d_v), 0x7fc0);  // NaN until written
  r.max_logits.assign(size(p.s_q * p.h_q), 12345.0f);
  r.lse.assign(r.max_logits.size(), 12345.0f);
  EXPECT_TRUE(testkit::upload(r.out, &out).is_ok());
  EXPECT_TRUE(testkit::upload(r.max_logits, &max_logits).is_ok());
  EXPECT_TRUE(testkit::upload(r.lse, &lse).is_ok());
  p.q = q.data();
  p.kv = kv.data();
  p.indices = indices.as<int32_t>();
  p.out = out.data();
  p.max_logits = max_logits.as<float>();
  p.lse = lse.as<float>();
  std::size_t bytes = 1;
  EXPECT_TRUE(sparse_attention_workspace_size(p, &bytes).is_ok());
  DeviceBuffer workspace;
  if (bytes > 0) {
    EXPECT_TRUE(workspace.allocate(bytes).is_ok());
  }
  const Status s = sparse_attention(p, workspace.data(), bytes, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(testkit::device_synchronize().is_ok());
  EXPECT_TRUE(testkit::copy_to_host(r.out.data(), out.data(), r.out.size() * 2).is_ok());
  EXPECT_TRUE(
      testkit::copy_to_host(r.max_logits.data(), max_logits.data(), r.lse.size() * 4).is_ok());
  EXPECT_TRUE(testkit::copy_to_host(r.lse.data(), lse.data(), r.lse.size() * 4).is_ok());
  return r;
}

bool close_or_same_inf(float got, float want, double tol) {
  if (std::isinf(want)) return got == want;
  return std::isfinite(got) && std::fabs(static_cast<double>(got) - want) <= tol;
}

::testing::AssertionResult check(const SparseAttentionWorkload& w, const Outputs& gpu,
                                 const Outputs& cpu) {
  const SparseAttentionProblem p = w.host_problem();
  for (int64_t query = 0; query < p.s_q; ++query) {
    // max |v| over the query's valid rows.
    double max_v = 0.0;
    for (int64_t j = 0; j < p.topk; ++j) {
      const int32_t token = w.indices[size(query * p.topk + j)];
      if (token < 0 || token >= p.s_kv) continue;
      for (int64_t c = 0; c < p.d_v; ++c) {
        max_v = std::max(max_v, std::fabs(static_cast<double>(
                                    f32_from_bf16_bits(w.kv[size(token * p.d_qk + c)]))));
      }
    }
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t at = query * p.h_q + h;
      for (const auto& [name, got, want] :
           {std::make_tuple("max_logits", gpu.max_logits[size(at)], cpu.max_logits[size(at)]),
            std::make_tuple("lse", gpu.lse[size(at)], cpu.lse[size(at)])}) {
        if (!close_or_same_inf(got, want, 1e-4 * (1.0 + std::fabs(static_cast<double>(want))))) {
          return ::testing::AssertionFailure() << "query " << query << " head " << h << ": "
                                               << name << " " << got << ", CPU " << want;
        }
      }
      for (int64_t c = 0; c < p.d_v; ++c) {
        const float got = f32_from_bf16_bits(gpu.out[size(at * p.d_v + c)]);
        const float want = f32_from_bf16_bits(cpu.out[size(at * p.d_v + c)]);
        const double tol = std::ldexp(max_v + std::fabs(static_cast<double>(want)), -8) + 1e-30;
        if (!(std::fabs(static_cast<double>(got) - want) <= tol)) {
          return ::testing::AssertionFailure()
                 << "query " << query << " head " << h << " column " << c << ": out " << got
                 << ", CPU " << want << " (tolerance " << tol << ")";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

SparseAttentionSpec spec_of(int64_t s_q, int64_t s_kv, int64_t h_q, int64_t d_qk, int64_t topk,
                            uint64_t seed) {
  SparseAttentionSpec spec;
  spec.s_q = s_q;
  spec.s_kv = s_kv;
  spec.h_q = h_q;
  spec.d_qk = d_qk;
  spec.topk = topk;
  spec.seed = seed;
  return spec;
}

// `spec` with groups of `group` neighbouring queries sharing `shared` of their rows.
SparseAttentionSpec group_shared(SparseAttentionSpec spec, int64_t group, double shared) {
  spec.pattern = testkit::IndexPattern::kGroupShared;
  spec.group = group;
  spec.shared_fraction = shared;
  return spec;
}

// Every algorithm that applies to the workload's shape.
std::vector<SparseAttentionAlgo> algos_for(const SparseAttentionWorkload& w) {
  std::vector<SparseAttentionAlgo> algos = {SparseAttentionAlgo::kAuto,
                                            SparseAttentionAlgo::kPerQuery,
                                            SparseAttentionAlgo::kPlain};
  SparseAttentionProblem p = w.host_problem();
  p.algo = SparseAttentionAlgo::kUnionPacked;
  if (validate_sparse_attention_problem(p).is_ok()) algos.push_back(p.algo);
  return algos;
}

void expect_matches_cpu(const SparseAttentionWorkload& w) {
  const Outputs cpu = run_cpu(w);
  for (SparseAttentionAlgo algo : algos_for(w)) {
    const Outputs gpu = run_gpu(w, algo);
    EXPECT_TRUE(check(w, gpu, cpu)) << testkit::sparse_attention_shape_label(w.spec) << ", "
                                    << sparse_attention_algo_name(algo);
  }
}

TEST(SparseAttentionGpu, EveryHeadCountAndHeadDim) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t h_q : {int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}}) {
    for (int64_t d_qk : {int64_t{576}, int64_t{512}}) {
      SCOPED_TRACE("h_q " + std::to_string(h_q) + " d_qk " + std::to_string(d_qk));
      expect_matches_cpu(testkit::make_sparse_attention_workload(
          spec_of(6, 3000, h_q, d_qk, 200, static_cast<uint64_t>(h_q + d_qk))));
    }
  }
}

TEST(SparseAttentionGpu, TopkNotAMultipleOfTheTile) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t topk : {int64_t{1}, int64_t{17}, int64_t{63}, int64_t{64}, int64_t{65},
                       int64_t{2048}}) {
    SCOPED_TRACE("topk " + std::to_string(topk));
    expect_matches_cpu(testkit::make_sparse_attention_workload(
        spec_of(5, std::max<int64_t>(2 * topk, 100), 32, 576, topk, static_cast<uint64_t>(topk))));
  }
}

TEST(SparseAttentionGpu, PaddingAndOutOfRangeIndices) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = spec_of(9, 5000, 64, 576, 300, 7);
  spec.padding_fraction = 0.3;
  spec.out_of_range_fraction = 0.2;
  expect_matches_cpu(testkit::make_sparse_attention_workload(spec));
}

TEST(SparseAttentionGpu, NeighbourSharedRows) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = group_shared(spec_of(16, 8000, 16, 576, 512, 8), 4, 0.8);
  expect_matches_cpu(testkit::make_sparse_attention_workload(spec));
}

TEST(SparseAttentionGpu, RepeatedTokensAndEmptyQueries) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionWorkload w =
      testkit::make_sparse_attention_workload(spec_of(4, 1000, 16, 576, 70, 9));
  const int64_t topk = w.spec.topk;
  for (int64_t j = 0; j < topk; ++j) {
    w.indices[size(0 * topk + j)] = static_cast<int32_t>(j % 5);  // query 0: five tokens, repeated
    w.indices[size(1 * topk + j)] = -1;                           // query 1: nothing to attend
    w.indices[size(2 * topk + j)] = j % 2 ? 1000 : -7;            // query 2: all out of range
  }
  const Outputs cpu = run_cpu(w);
  for (SparseAttentionAlgo algo : algos_for(w)) {
    SCOPED_TRACE(sparse_attention_algo_name(algo));
    const Outputs gpu = run_gpu(w, algo);
    EXPECT_TRUE(check(w, gpu, cpu));
    for (int64_t q : {int64_t{1}, int64_t{2}}) {
      for (int64_t h = 0; h < 16; ++h) {
        EXPECT_EQ(gpu.lse[size(q * 16 + h)], -INFINITY);
        EXPECT_EQ(gpu.max_logits[size(q * 16 + h)], -INFINITY);
      }
      for (int64_t c = 0; c < 16 * 512; ++c) {
        EXPECT_EQ(gpu.out[size(q * 16 * 512 + c)] & 0x7fff, 0);
      }
    }
  }
}

// Union packing: groups of G = 64 / h_q queries; the last group of a chunk may be short.
TEST(SparseAttentionGpu, UnionGroupsAtTheChunkEdge) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t h_q : {int64_t{16}, int64_t{32}}) {
    for (int64_t s_q : {int64_t{1}, int64_t{5}, int64_t{7}, int64_t{9}}) {
      SCOPED_TRACE("h_q " + std::to_string(h_q) + " s_q " + std::to_string(s_q));
      expect_matches_cpu(testkit::make_sparse_attention_workload(
          group_shared(spec_of(s_q, 6000, h_q, 576, 130, static_cast<uint64_t>(s_q)), 4, 0.5)));
    }
  }
}

// No overlap, full overlap, and unions of the largest packed size (G * topk = 8192 slots; at
// h_q 32 random rows' pairs run per query, packing_pays).
TEST(SparseAttentionGpu, UnionSizesFromOneRowToEveryRow) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (double shared : {0.0, 1.0}) {
    SparseAttentionSpec spec = group_shared(spec_of(8, 20000, 16, 576, 300, 11), 4, shared);
    expect_matches_cpu(testkit::make_sparse_attention_workload(spec));
  }
  expect_matches_cpu(testkit::make_sparse_attention_workload(spec_of(4, 40000, 16, 512, 2048, 12)));
  expect_matches_cpu(testkit::make_sparse_attention_workload(spec_of(4, 40000, 32, 576, 4096, 13)));
}

// At h_q 32 a pair packs only when its union holds at most 27/32 of its slots (packing_pays in
// union_packing.cu): one batch where pairs 0 and 2 share nearly all their rows (packed) and pair
// 1's second query shares none (it runs per query); every query against the CPU.
TEST(SparseAttentionGpu, PairsPackOnlyWhenTheirUnionPays) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = group_shared(spec_of(6, 20000, 32, 576, 256, 16), 2, 0.95);
  SparseAttentionWorkload w = testkit::make_sparse_attention_workload(spec);
  for (int64_t j = 0; j < spec.topk; ++j) {  // query 3: query 2's tokens, half the context on
    const int32_t token = w.indices[size(2 * spec.topk + j)];
    w.indices[size(3 * spec.topk + j)] =
        token < 0 ? token : static_cast<int32_t>((token + spec.s_kv / 2) % spec.s_kv);
  }
  expect_matches_cpu(w);
}

// Unions over more tokens than the shared-memory bitmap covers (2^18) come from the radix sort.
TEST(SparseAttentionGpu, UnionsOfALongContextComeFromTheSort) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = group_shared(spec_of(9, 270000, 16, 576, 100, 15), 4, 0.5);
  SparseAttentionWorkload w = testkit::make_sparse_attention_workload(spec);
  w.indices[size(3)] = 269999;  // the last token
  w.indices[size(5 * spec.topk + 7)] = w.indices[size(5 * spec.topk + 8)];  // a repeat, group 1
  expect_matches_cpu(w);
}

// A group where one query lists a token twice runs per query (the repeat counts twice) while
// its neighbours' groups stay packed; skipped slots mixed into the unions.
TEST(SparseAttentionGpu, UnionWithRepeatsAndSkippedSlots) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = group_shared(spec_of(12, 3000, 16, 576, 90, 14), 4, 0.6);
  spec.padding_fraction = 0.2;
  spec.out_of_range_fraction = 0.1;
  SparseAttentionWorkload w = testkit::make_sparse_attention_workload(spec);
  w.indices[size(5 * spec.topk + 3)] = w.indices[size(5 * spec.topk)];  // query 5 (group 1)
  for (int64_t j = 0; j < spec.topk; ++j) w.indices[size(9 * spec.topk + j)] = -1;  // group 2
  expect_matches_cpu(w);
}

TEST(SparseAttentionGpu, NoKeysAtAll) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  SparseAttentionSpec spec = spec_of(3, 0, 32, 512, 10, 10);
  spec.padding_fraction = 0.5;       // with s_kv = 0 every slot is -1 or out of range
  spec.out_of_range_fraction = 0.5;
  ASSERT_EQ(testkit::sparse_attention_spec_error(spec), "");
  expect_matches_cpu(testkit::make_sparse_attention_workload(spec));
}

}  // namespace
}  // namespace litetopk::testing
