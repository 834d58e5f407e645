// sparse_attention_cpu: the CPU reference of sparse MLA attention (host pointers).
//
// 1. Validate the problem (shapes, pointers; the contents of indices are not checked: a value
//    outside [0, s_kv) is a skipped slot, litetopk/attention.h).
// 2. In parallel over the queries: gather the query's valid slots (repeats kept, one key per
//    occurrence) as fp64 rows, and its h_q query rows as fp64.
// 3. Per head: the base-2 logits l2_j = sm_scale * log2(e) * dot(q, kv_j) in fp64 (the bf16
//    products are exact; the sums round in fp64), their max m, L = sum 2^(l2_j - m) and
//    acc = sum 2^(l2_j - m) * v_j over the first d_v columns.
// 4. out = acc / L rounded to fp32 then bf16; max_logits = m, lse = m + log2(L) rounded to fp32.
//    No valid slot: out = 0, max_logits = lse = -inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/parallel_for.h"
#include "cpu/run_guarded.h"
#include "litetopk/float_bits.h"
#include "litetopk/attention.h"

namespace litetopk {

namespace {

constexpr double kLog2e = 1.4426950408889634074;  // log2(e)

double bf16_at(const uint16_t* data, int64_t i) {
  return static_cast<double>(float_bits::f32_from_bf16_bits(data[i]));
}

void store_bf16(void* out, int64_t i, double value) {
  const uint16_t bits = float_bits::bf16_bits_from_f32(static_cast<float>(value));
  std::memcpy(static_cast<unsigned char*>(out) + i * 2, &bits, sizeof(bits));
}

// Query s: every head's out, max_logits and lse.
void attend_query(const SparseAttentionProblem& p, int64_t s) {
  const auto* q = static_cast<const uint16_t*>(p.q);
  const auto* kv = static_cast<const uint16_t*>(p.kv);
  const int32_t* row = p.indices + s * p.topk;

  // The valid slots' kv rows in fp64, in slot order (a repeated token appears once per slot).
  std::vector<double> keys;
  int64_t n = 0;
  for (int64_t j = 0; j < p.topk; ++j) {
    const int64_t token = row[j];
    if (token < 0 || token >= p.s_kv) continue;
    keys.resize(static_cast<std::size_t>((n + 1) * p.d_qk));
    double* key = keys.data() + n * p.d_qk;
    for (int64_t c = 0; c < p.d_qk; ++c) key[c] = bf16_at(kv, token * p.d_qk + c);
    ++n;
  }

  const double scale = static_cast<double>(p.sm_scale) * kLog2e;
  std::vector<double> query(static_cast<std::size_t>(p.d_qk));
  std::vector<double> logits(static_cast<std::size_t>(n));
  std::vector<double> acc(static_cast<std::size_t>(p.d_v));
  for (int64_t h = 0; h < p.h_q; ++h) {
    const int64_t row_index = s * p.h_q + h;
    for (int64_t c = 0; c < p.d_qk; ++c) query[c] = bf16_at(q, row_index * p.d_qk + c);
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      const double* key = keys.data() + j * p.d_qk;
      double dot = 0.0;
      for (int64_t c = 0; c < p.d_qk; ++c) dot += query[c] * key[c];
      logits[j] = dot * scale;
      max = std::max(max, logits[j]);
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double weight = std::exp2(logits[j] - max);
      sum += weight;
      const double* value = keys.data() + j * p.d_qk;  // the first d_v columns
      for (int64_t c = 0; c < p.d_v; ++c) acc[c] += weight * value[c];
    }
    for (int64_t c = 0; c < p.d_v; ++c) {
      store_bf16(p.out, row_index * p.d_v + c, n > 0 ? acc[c] / sum : 0.0);
    }
    const float neg_inf = -std::numeric_limits<float>::infinity();
    if (p.max_logits != nullptr) {
      p.max_logits[row_index] = n > 0 ? static_cast<float>(max) : neg_inf;
    }
    if (p.lse != nullptr) {
      p.lse[row_index] = n > 0 ? static_cast<float>(max + std::log2(sum)) : neg_inf;
    }
  }
}

}  // namespace

Status sparse_attention_cpu(const SparseAttentionProblem& problem) {
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  return cpu::run_guarded("sparse_attention_cpu", [&] {
    cpu::parallel_for(problem.s_q, cpu::hardware_threads(),
                      [&](int64_t s) { attend_query(problem, s); });
    return Status::ok();
  });
}

}  // namespace litetopk
