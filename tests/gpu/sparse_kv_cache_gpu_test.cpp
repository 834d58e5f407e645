// The GPU writers of the sparse KV cache against the CPU reference, byte for byte over whole
// arrays: both start from the same poisoned cache (HostSparseCache's NaN / 0xa5 / 0x80 fill), so
// every byte the contract defines must match and every byte it leaves alone must stay poisoned.
//   SparseKvCacheFromDense  every case of decode_cases(): sparse_kv_from_dense vs
//                           sparse_decode_quantize_cpu.
//   SparseKvCacheSmall      (both BS, paged and contiguous, fp16 and bf16) strided dense input with
//                           shared lengths; appends across a block boundary, from 0 and up to
//                           capacity vs sparse_kv_append_cpu, by separate calls and by replays of
//                           one captured CUDA graph. Small enough for compute-sanitizer.
//   SparseKvCacheTiming     1 x 8 KV heads x 131072 tokens fp16: conversion and append times
//                           (printed, never asserted).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "common/sparse_decode_testing.h"
#include "testkit/device_memory.h"
#include "gpu/gpu_select_runner.h"
#include "litetopk/sparse_decode.h"

namespace litetopk::testing {
namespace {

constexpr int64_t kD = 128;

template <typename T>
std::size_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

// A device copy of a HostSparseCache (same shape, same block table).
struct DeviceSparseCache {
  testkit::DeviceBuffer codes, scales, residuals, values, tail, lengths, table;
  SparseKvCache view;

  Status upload(HostSparseCache& host) {
    view = host.view();
    const struct {
      testkit::DeviceBuffer* buffer;
      const void* data;
      std::size_t bytes;
    } arrays[] = {{&codes, host.key_codes.data(), bytes_of(host.key_codes)},
                  {&scales, host.key_scales.data(), bytes_of(host.key_scales)},
                  {&residuals, host.key_residuals.data(), bytes_of(host.key_residuals)},
                  {&values, host.values.data(), bytes_of(host.values)},
                  {&tail, host.tail_keys.data(), bytes_of(host.tail_keys)},
                  {&lengths, host.lengths.data(), bytes_of(host.lengths)},
                  {&table, host.block_table.data(), bytes_of(host.block_table)}};
    for (const auto& a : arrays) {
      if (a.bytes == 0) continue;
      if (Status s = a.buffer->allocate(a.bytes); !s) return s;
      if (Status s = testkit::copy_to_device(a.buffer->data(), a.data, a.bytes); !s) return s;
    }
    view.key_codes = codes.as<uint8_t>();
    view.key_scales = scales.data();
    view.key_residuals = residuals.as<uint8_t>();
    view.values = values.data();
    view.tail_keys = tail.data();
    view.lengths = lengths.as<int32_t>();
    view.block_table = host.block_table.empty() ? nullptr : table.as<int32_t>();
    return Status::ok();
  }

  // Every array into `host` (which has this cache's shape).
  Status download(HostSparseCache* host) const {
    const struct {
      void* data;
      const testkit::DeviceBuffer* buffer;
      std::size_t bytes;
    } arrays[] = {{host->key_codes.data(), &codes, bytes_of(host->key_codes)},
                  {host->key_scales.data(), &scales, bytes_of(host->key_scales)},
                  {host->key_residuals.data(), &residuals, bytes_of(host->key_residuals)},
                  {host->values.data(), &values, bytes_of(host->values)},
                  {host->tail_keys.data(), &tail, bytes_of(host->tail_keys)},
                  {host->lengths.data(), &lengths, bytes_of(host->lengths)}};
    for (const auto& a : arrays) {
      if (Status s = testkit::copy_to_host(a.data, a.buffer->data(), a.bytes); !s) return s;
    }
    return testkit::device_synchronize();
  }
};

template <typename T>
::testing::AssertionResult same_array(const std::vector<T>& got, const std::vector<T>& want,
                                      const char* name) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << name << ": sizes " << got.size() << " vs " << want.size();
  }
  const auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  if (diff.first == got.end()) return ::testing::AssertionSuccess();
  const auto at = diff.first - got.begin();
  return ::testing::AssertionFailure()
         << name << "[" << at << "]: GPU " << static_cast<int64_t>(*diff.first) << ", CPU "
         << static_cast<int64_t>(*diff.second) << " ("
         << std::count_if(got.begin(), got.end(),
                          [&, i = std::size_t{0}](const T& g) mutable { return g != want[i++]; })
         << " elements differ)";
}

// Whole caches equal byte for byte.
::testing::AssertionResult same_cache(const HostSparseCache& got, const HostSparseCache& want) {
  for (const ::testing::AssertionResult& r :
       {same_array(got.lengths, want.lengths, "lengths"),
        same_array(got.key_codes, want.key_codes, "key_codes"),
        same_array(got.key_scales, want.key_scales, "key_scales"),
        same_array(got.key_residuals, want.key_residuals, "key_residuals"),
        same_array(got.values, want.values, "values"),
        same_array(got.tail_keys, want.tail_keys, "tail_keys")}) {
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

// The dense cache of a workload on the device (contiguous).
struct DeviceDense {
  testkit::DeviceBuffer keys, values, lengths;
  DenseKvCache view;

  Status upload(DecodeWorkload& w) {
    view = w.dense();
    for (auto [buffer, data, bytes] :
         {std::tuple{&keys, static_cast<const void*>(w.keys.data()), bytes_of(w.keys)},
          std::tuple{&values, static_cast<const void*>(w.values.data()), bytes_of(w.values)},
          std::tuple{&lengths, static_cast<const void*>(w.lengths.data()), bytes_of(w.lengths)}}) {
      if (Status s = buffer->allocate(bytes); !s) return s;
      if (Status s = testkit::copy_to_device(buffer->data(), data, bytes); !s) return s;
    }
    view.keys = keys.data();
    view.values = values.data();
    view.lengths = lengths.as<int32_t>();
    return Status::ok();
  }
};

int64_t blocks_for(int64_t tokens, int64_t bs) { return std::max<int64_t>(1, (tokens + bs - 1) / bs); }

class SparseKvCacheFromDense : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(SparseKvCacheFromDense, MatchesCpuConversionByteForByte) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const DecodeCase& c = GetParam();
  DecodeWorkload w = make_decode_workload(c.spec);
  const int64_t max_blocks = blocks_for(w.capacity, c.block_size);
  HostSparseCache want(w.dtype, w.batch, w.num_kv_heads, c.block_size, max_blocks, c.paged);
  HostSparseCache got = want;
  DeviceSparseCache device;
  ASSERT_TRUE(device.upload(got).is_ok());
  DeviceDense dense;
  ASSERT_TRUE(dense.upload(w).is_ok());

  ASSERT_TRUE(sparse_decode_quantize_cpu(w.dense(), want.view()).is_ok());
  const Status s = sparse_kv_from_dense(dense.view, device.view, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_TRUE(device.download(&got).is_ok());
  EXPECT_TRUE(same_cache(got, want));
}

INSTANTIATE_TEST_SUITE_P(Cases, SparseKvCacheFromDense, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& param_info) {
                           return param_info.param.name;
                         });

struct SmallCase {
  int64_t block_size;
  bool paged;
  DType dtype;
};

void PrintTo(const SmallCase& c, std::ostream* os) {
  *os << "BS " << c.block_size << (c.paged ? " paged " : " contiguous ") << dtype_name(c.dtype);
}

std::string small_name(const ::testing::TestParamInfo<SmallCase>& param_info) {
  const SmallCase& c = param_info.param;
  return "BS" + std::to_string(c.block_size) + (c.paged ? "_Paged" : "") +
         (c.dtype == DType::kBFloat16 ? "_Bf16" : "_Fp16");
}

std::vector<SmallCase> small_cases() {
  std::vector<SmallCase> cases;
  for (const int64_t bs : {128, 256}) {
    for (const bool paged : {false, true}) {
      for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) cases.push_back({bs, paged, dtype});
    }
  }
  return cases;
}

class SparseKvCacheSmall : public ::testing::TestWithParam<SmallCase> {
 protected:
  // Capacity 3 blocks; lengths: BS-2 (crosses a block edge), 0, 3BS-3 (reaches capacity during
  // the appends), 3BS (at capacity from the start), 2BS-1.
  std::vector<int32_t> edge_lengths() const {
    const auto bs = static_cast<int32_t>(GetParam().block_size);
    return {bs - 2, 0, 3 * bs - 3, 3 * bs, 2 * bs - 1};
  }
  // With `full`, every sequence holds 3BS tokens (the source of the appended tokens).
  DecodeWorkload make_workload(bool full) const {
    const auto bs = static_cast<int32_t>(GetParam().block_size);
    DecodeWorkloadSpec spec;
    spec.dtype = GetParam().dtype;
    spec.num_kv_heads = 2;
    spec.group_size = 1;
    spec.lengths = full ? std::vector<int32_t>(5, 3 * bs) : edge_lengths();
    spec.capacity = 3 * bs;
    spec.seed = 5;
    return make_decode_workload(spec);
  }
};

// A dense input with padded strides (token, head and batch), converted with the sparse cache's
// lengths array as dense.lengths (the contract allows the two to be the same array).
TEST_P(SparseKvCacheSmall, FromDenseStridedWithSharedLengths) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const SmallCase& p = GetParam();
  DecodeWorkload w = make_workload(false);
  const int64_t token_stride = kD + 8, head_stride = (w.capacity + 1) * token_stride,
                batch_stride = w.num_kv_heads * head_stride + 24;
  std::vector<uint16_t> keys(static_cast<std::size_t>(w.batch * batch_stride), 0x7e00);
  std::vector<uint16_t> values(keys.size(), 0x7e00);
  for (int64_t b = 0; b < w.batch; ++b) {
    for (int64_t h = 0; h < w.num_kv_heads; ++h) {
      for (int64_t t = 0; t < w.capacity; ++t) {
        const int64_t from = ((b * w.num_kv_heads + h) * w.capacity + t) * kD;
        const int64_t to = b * batch_stride + h * head_stride + t * token_stride;
        std::copy_n(w.keys.begin() + from, kD, keys.begin() + to);
        std::copy_n(w.values.begin() + from, kD, values.begin() + to);
      }
    }
  }
  DenseKvCache dense = w.dense();
  dense.keys = keys.data();
  dense.values = values.data();
  dense.token_stride = token_stride;
  dense.head_stride = head_stride;
  dense.batch_stride = batch_stride;

  HostSparseCache want(w.dtype, w.batch, w.num_kv_heads, p.block_size, 3, p.paged);
  HostSparseCache got = want;
  ASSERT_TRUE(sparse_decode_quantize_cpu(dense, want.view()).is_ok());

  got.lengths = w.lengths;  // the device lengths array holds dense.lengths
  DeviceSparseCache device;
  ASSERT_TRUE(device.upload(got).is_ok());
  testkit::DeviceBuffer dense_keys, dense_values;
  ASSERT_TRUE(dense_keys.allocate(bytes_of(keys)).is_ok());
  ASSERT_TRUE(dense_values.allocate(bytes_of(values)).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(dense_keys.data(), keys.data(), bytes_of(keys)).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(dense_values.data(), values.data(), bytes_of(values)).is_ok());
  dense.keys = dense_keys.data();
  dense.values = dense_values.data();
  dense.lengths = device.view.lengths;
  const Status s = sparse_kv_from_dense(dense, device.view, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_TRUE(device.download(&got).is_ok());
  EXPECT_TRUE(same_cache(got, want));
}

// Batch-1 view of sequence b (for the CPU reference of a batch where some sequences are full:
// sparse_kv_append_cpu refuses a whole batch with one full sequence).
SparseKvCache sequence_view(const SparseKvCache& c, int64_t b) {
  SparseKvCache v = c;
  v.batch = 1;
  v.lengths += b;
  v.tail_keys = static_cast<uint16_t*>(c.tail_keys) + b * c.num_kv_heads * c.block_size * kD;
  if (c.block_table != nullptr) {
    v.block_table += b * c.max_blocks;
  } else {
    const int64_t slots = b * c.num_kv_heads * c.max_blocks;
    v.key_codes += slots * c.block_size * kD / 4;
    v.key_scales = static_cast<uint16_t*>(c.key_scales) + slots * kD;
    v.key_residuals += slots * c.block_size * kD;
    v.values = static_cast<uint16_t*>(c.values) + slots * c.block_size * kD;
  }
  return v;
}

// The CPU reference of one GPU append: every sequence below capacity gets its token.
void append_cpu(HostSparseCache* cache, const std::vector<uint16_t>& keys,
                const std::vector<uint16_t>& values) {
  const SparseKvCache c = cache->view();
  const int64_t row = c.num_kv_heads * kD;
  for (int64_t b = 0; b < c.batch; ++b) {
    if (c.lengths[b] >= c.max_blocks * c.block_size) continue;
    const Status s = sparse_kv_append_cpu(sequence_view(c, b), keys.data() + b * row,
                                          values.data() + b * row);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
}

// From a converted prefix, 5 appends by separate calls and by replays of one captured graph; the
// new tokens are the workload's next tokens (wrapping at the capacity).
TEST_P(SparseKvCacheSmall, AppendsMatchCpuByCallsAndGraphReplays) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const SmallCase& p = GetParam();
  DecodeWorkload w = make_workload(true);
  std::vector<int32_t> start = edge_lengths();
  DenseKvCache prefix = w.dense();
  prefix.lengths = start.data();
  HostSparseCache want(w.dtype, w.batch, w.num_kv_heads, p.block_size, 3, p.paged);
  ASSERT_TRUE(sparse_decode_quantize_cpu(prefix, want.view()).is_ok());
  HostSparseCache got = want;
  DeviceSparseCache by_calls, by_graph;
  ASSERT_TRUE(by_calls.upload(want).is_ok());
  ASSERT_TRUE(by_graph.upload(want).is_ok());

  const std::size_t token_elements = static_cast<std::size_t>(w.batch * w.num_kv_heads * kD);
  testkit::DeviceBuffer new_keys, new_values;
  ASSERT_TRUE(new_keys.allocate(token_elements * 2).is_ok());
  ASSERT_TRUE(new_values.allocate(token_elements * 2).is_ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status captured =
      sparse_kv_append(by_graph.view, new_keys.data(), new_values.data(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.is_ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::vector<uint16_t> keys(token_elements), values(token_elements);
  for (int step = 0; step < 5; ++step) {
    for (int64_t b = 0; b < w.batch; ++b) {
      for (int64_t h = 0; h < w.num_kv_heads; ++h) {
        const int64_t t = (start[b] + step) % w.capacity;
        const int64_t from = ((b * w.num_kv_heads + h) * w.capacity + t) * kD;
        const int64_t to = (b * w.num_kv_heads + h) * kD;
        std::copy_n(w.keys.begin() + from, kD, keys.begin() + to);
        std::copy_n(w.values.begin() + from, kD, values.begin() + to);
      }
    }
    append_cpu(&want, keys, values);
    ASSERT_TRUE(testkit::copy_to_device(new_keys.data(), keys.data(), token_elements * 2).is_ok());
    ASSERT_TRUE(testkit::copy_to_device(new_values.data(), values.data(), token_elements * 2).is_ok());
    const Status s = sparse_kv_append(by_calls.view, new_keys.data(), new_values.data(), stream);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_TRUE(by_calls.download(&got).is_ok());
    ASSERT_TRUE(same_cache(got, want)) << "separate calls, after append " << step + 1;
    ASSERT_TRUE(by_graph.download(&got).is_ok());
    ASSERT_TRUE(same_cache(got, want)) << "graph replays, after append " << step + 1;
  }
  const int32_t bs = static_cast<int32_t>(p.block_size);
  // BS-2 crossed into block 1; 3BS-3 stopped at capacity; 3BS stayed.
  EXPECT_EQ(got.lengths, (std::vector<int32_t>{bs + 3, 5, 3 * bs, 3 * bs, 2 * bs + 4}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SparseKvCacheSmall, ::testing::ValuesIn(small_cases()),
                         small_name);

// Times only: from_dense of 1 x 8 KV heads x 131072 fp16 tokens, and append steps on the result
// (a graph of one step at a length inside a block and at the block-filling length, replayed; a
// graph of BS consecutive appends).
TEST(SparseKvCacheTiming, FromDenseAndAppend131072Tokens) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kHeads = 8, kTokens = 131072;
  const std::size_t dense_elements = static_cast<std::size_t>(kHeads * kTokens * kD);
  testkit::DeviceBuffer keys, values, dense_lengths, new_keys, new_values, reset_length;
  ASSERT_TRUE(reset_length.allocate(4).is_ok());
  ASSERT_TRUE(keys.allocate(dense_elements * 2).is_ok());
  ASSERT_TRUE(values.allocate(dense_elements * 2).is_ok());
  {
    std::vector<uint16_t> fill(dense_elements);
    for (std::size_t i = 0; i < fill.size(); ++i) {
      fill[i] = static_cast<uint16_t>(0x3c00 + (i * 2654435761u >> 20) % 2048 - 1024);  // ~[0.5, 2)
    }
    ASSERT_TRUE(testkit::copy_to_device(keys.data(), fill.data(), dense_elements * 2).is_ok());
    ASSERT_TRUE(testkit::copy_to_device(values.data(), fill.data(), dense_elements * 2).is_ok());
  }
  ASSERT_TRUE(new_keys.allocate(kHeads * kD * 2).is_ok());
  ASSERT_TRUE(new_values.allocate(kHeads * kD * 2).is_ok());
  ASSERT_TRUE(testkit::fill_device(new_keys.data(), 0x3c, kHeads * kD * 2).is_ok());
  ASSERT_TRUE(testkit::fill_device(new_values.data(), 0x3c, kHeads * kD * 2).is_ok());
  const int32_t full = static_cast<int32_t>(kTokens);
  ASSERT_TRUE(dense_lengths.allocate(4).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(dense_lengths.data(), &full, 4).is_ok());
  DenseKvCache dense;
  dense.batch = 1;
  dense.num_kv_heads = kHeads;
  dense.capacity = kTokens;
  dense.keys = keys.data();
  dense.values = values.data();
  dense.lengths = dense_lengths.as<int32_t>();

  for (const int64_t bs : {128, 256}) {
    SparseKvCache cache;
    cache.batch = 1;
    cache.num_kv_heads = kHeads;
    cache.block_size = bs;
    cache.max_blocks = kTokens / bs + 1;  // room to append
    SparseKvCacheBytes bytes;
    ASSERT_TRUE(sparse_kv_cache_bytes(cache, &bytes).is_ok());
    testkit::DeviceBuffer storage;
    ASSERT_TRUE(storage.allocate(bytes.total() + 6 * 256).is_ok());
    auto* at = storage.as<unsigned char>();
    const auto take = [&](std::size_t n) {
      unsigned char* p = at;
      at += (n + 255) / 256 * 256;
      return p;
    };
    cache.key_codes = take(bytes.key_codes);
    cache.key_scales = take(bytes.key_scales);
    cache.key_residuals = take(bytes.key_residuals);
    cache.values = take(bytes.values);
    cache.tail_keys = take(bytes.tail_keys);
    cache.lengths = reinterpret_cast<int32_t*>(take(bytes.lengths));

    testkit::DeviceTimer timer;
    ASSERT_TRUE(sparse_kv_from_dense(dense, cache, nullptr).is_ok());  // warm-up
    constexpr int kRepeats = 10;
    float ms = 0;
    ASSERT_TRUE(timer.start().is_ok());
    for (int r = 0; r < kRepeats; ++r) ASSERT_TRUE(sparse_kv_from_dense(dense, cache, nullptr).is_ok());
    ASSERT_TRUE(timer.stop(&ms).is_ok());
    const double convert_us = 1000.0 * ms / kRepeats;
    // Bytes moved: keys and values read; codes, residuals, scales and values written.
    const double moved = static_cast<double>(dense_elements) * (2 + 2 + 0.25 + 1 + 2) +
                         static_cast<double>(kHeads * kTokens / bs * kD * 2);
    std::printf("[timing] BS=%lld from_dense 1x8x131072 fp16: %.1f us (%.2f TB/s of %.0f MB moved)\n",
                static_cast<long long>(bs), convert_us, moved / convert_us * 1e-6, moved * 1e-6);

    // One step at a fixed length: a graph of [4-byte copy resetting lengths[0]; append], replayed.
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    for (const int32_t len : {full - static_cast<int32_t>(bs) / 2, full + static_cast<int32_t>(bs) - 1}) {
      ASSERT_TRUE(testkit::copy_to_device(reset_length.data(), &len, 4).is_ok());
      cudaGraph_t step = nullptr;
      cudaGraphExec_t step_exec = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(cache.lengths, reset_length.data(), 4, cudaMemcpyDeviceToDevice, stream),
                cudaSuccess);
      ASSERT_TRUE(sparse_kv_append(cache, new_keys.data(), new_values.data(), stream).is_ok());
      ASSERT_EQ(cudaStreamEndCapture(stream, &step), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&step_exec, step, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(step_exec, stream), cudaSuccess);  // warm-up
      constexpr int kSteps = 50;
      ASSERT_TRUE(timer.start(stream).is_ok());
      for (int r = 0; r < kSteps; ++r) ASSERT_EQ(cudaGraphLaunch(step_exec, stream), cudaSuccess);
      ASSERT_TRUE(timer.stop(&ms, stream).is_ok());
      std::printf("[timing] BS=%lld append (1 x 8 heads) graph [reset copy + append], %s: %.2f us\n",
                  static_cast<long long>(bs),
                  (len + 1) % bs == 0 ? "fills the block (quantizes)" : "inside a block",
                  1000.0 * ms / kSteps);
      cudaGraphExecDestroy(step_exec);
      cudaGraphDestroy(step);
    }
    // A graph of BS consecutive appends (one quantizing): the mean step cost inside a graph.
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int64_t i = 0; i < bs; ++i) {
      ASSERT_TRUE(sparse_kv_append(cache, new_keys.data(), new_values.data(), stream).is_ok());
    }
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    const int32_t start = full - static_cast<int32_t>(bs);
    ASSERT_TRUE(testkit::copy_to_device(cache.lengths, &start, 4).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);  // warm-up
    ASSERT_TRUE(testkit::copy_to_device(cache.lengths, &start, 4).is_ok());
    ASSERT_TRUE(timer.start(stream).is_ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_TRUE(timer.stop(&ms, stream).is_ok());
    std::printf("[timing] BS=%lld append (1 x 8 heads) in a graph of %lld steps: %.2f us per step\n",
                static_cast<long long>(bs), static_cast<long long>(bs), 1000.0 * ms / static_cast<double>(bs));
    int32_t end = 0;
    ASSERT_TRUE(testkit::copy_to_host(&end, cache.lengths, 4).is_ok());
    EXPECT_EQ(end, full);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace litetopk::testing
