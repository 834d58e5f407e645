// Element generators shared by the indexer workloads (indexer_workload.cpp for prefill,
// paged_indexer_workload.cpp for decode): q and key bytes fp8 e4m3 of N(0, 1), key scales
// U(0.5, 1.5), weights N(0, 1) / sqrt(H). Element i of a stream is a pure function of (stream
// base, i) (counter_random.h), so a workload can write each element straight to its place in any
// layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "litetopk/fp8_e4m3.h"
#include "testkit/counter_random.h"

namespace litetopk::testkit {

// The base of stream `stream` (an array tag) of a seed: independent streams from one seed.
inline uint64_t stream_base(uint64_t seed, uint64_t stream) {
  return hash64(seed * 0x100000001b3ull + stream);
}

// Element i of a q or key stream: fp8 e4m3 of N(0, 1) (e4m3 keeps 3 mantissa bits; the 128-term
// dot products and the continuous key scales keep exact score ties rare).
inline uint8_t fp8_normal_at(uint64_t base, int64_t i) {
  const double x = standard_normal(hash64(base + static_cast<uint64_t>(i)));
  return fp8::float_to_e4m3(static_cast<float>(x));
}

// Element i of a key-scale stream: U(0.5, 1.5).
inline float kv_scale_at(uint64_t base, int64_t i) {
  const uint64_t h = hash64(base + static_cast<uint64_t>(i));
  return static_cast<float>(0.5 + uniform01(static_cast<uint32_t>(h)));
}

// Element i of a weight stream for H heads: N(0, 1) / sqrt(H), negative weights included.
inline float weight_at(uint64_t base, int64_t i, int64_t H) {
  const double weight_scale = 1.0 / std::sqrt(static_cast<double>(H));
  return static_cast<float>(standard_normal(hash64(base + static_cast<uint64_t>(i))) *
                            weight_scale);
}

// out = elements 0 .. count - 1 of an fp8 normal stream (over all hardware threads).
inline void fill_fp8_normal(std::vector<uint8_t>* out, int64_t count, uint64_t base) {
  out->resize(static_cast<std::size_t>(count));
  uint8_t* data = out->data();
  parallel_fill(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = fp8_normal_at(base, i);
  });
}

// out = elements 0 .. rows * H - 1 of a weight stream: [rows, H].
inline void fill_weights(std::vector<float>* out, int64_t rows, int64_t H, uint64_t base) {
  out->resize(static_cast<std::size_t>(rows * H));
  float* data = out->data();
  parallel_fill(rows * H, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = weight_at(base, i, H);
  });
}

}  // namespace litetopk::testkit
