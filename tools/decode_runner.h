// Sparse decoding on a synthetic workload, shared by `litetopk decode` and `litetopk demo`:
// generate the dense cache and queries (testkit/decode_workload.h), then on one backend
//   CPU: quantize them into the sparse cache with sparse_decode_quantize_cpu, run
//        sparse_decode_cpu at each delta and dense_decode_cpu (fp64 references, host timing);
//   GPU: upload them, build the sparse cache with sparse_kv_from_dense, run sparse_decode at each
//        delta and dense_decode (fp32 outputs, CUDA-event timing; decode_gpu.h);
// and judge each output on the host against fp64 dense attention (decode_fidelity_cpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "testkit/decode_workload.h"
#include "litetopk/sparse_decode.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

struct DecodeSpec {
  testkit::DecodePattern pattern = testkit::DecodePattern::kNeedles;  // decode_pattern_label
  DType dtype = DType::kFloat16;                              // fp16 or bf16
  int64_t batch = 1;
  int64_t context = 32768;  // tokens in every sequence
  int64_t num_kv_heads = 2;  // the defaults: the trade-off table of docs/sparse_decode.md
  int64_t num_q_heads = 8;   // num_kv_heads * G, G in 1..16
  int64_t block_size = 128;
  uint64_t seed = 3;
  bool on_gpu = false;  // the GPU kernels; else the CPU references
};

// What is wrong with the spec, or "" when it is valid.
std::string decode_spec_error(const DecodeSpec& spec);
// "synthetic" (testkit::DecodePattern::kNeedles), "flat", "spread", "passages" or "rope" (and
// "extremes", which parse_decode_pattern does not read back).
const char* decode_pattern_label(testkit::DecodePattern pattern);
bool parse_decode_pattern(const std::string& name, testkit::DecodePattern* pattern);
// "1x32768 kv=2 q=8 BS=128"
std::string decode_shape_label(const DecodeSpec& spec);
// "5", "0.5", "inf"; parse_delta reads a number >= 0 or "inf".
std::string delta_label(float delta);
bool parse_delta(const std::string& text, float* delta);
// A selection: a delta as above, or "m" and a mass target in [0, 1) ("m0.01") for kMass.
std::string selection_label(const testkit::DecodeSelection& selection);
bool parse_selection(const std::string& text, testkit::DecodeSelection* selection);

struct DecodeRow {
  bool dense = false;  // dense decode over the original keys; else sparse decode at delta
  float delta = std::numeric_limits<float>::infinity();  // or the mass target (rule kMass)
  SparseSelection rule = SparseSelection::kDelta;
  // Against fp64 dense attention over the original keys. For the dense row only rel_l2 and
  // max_head_rel_l2 are measured; the block and mass figures are those of reading everything
  // (read_fraction 1: the dense cache's own bytes).
  DecodeFidelity fidelity;
  // Sparse rows, when prepared with selection_error: rel L2 against dense attention over the same
  // rebuilt keys (the selection's own error, without the quantization's); else -1.
  double selection_rel_l2 = -1;
  // One run (on the GPU after one warm-up run), or the median of bench.iters after bench.warmup.
  Timing timing;
  std::size_t workspace_bytes = 0;  // GPU only: the decode call's workspace
};

struct DecodeCacheMemory {
  std::size_t sparse_bytes = 0;  // every array of the sparse cache, tail buffer and lengths too
  std::size_t dense_bytes = 0;   // keys + values of the same capacity in the cache dtype
  double per_token_bytes = 0;    // full blocks, per token per KV head (sparse_kv_bytes_per_token)
  double per_token_dense_bytes = 0;  // 4 * D
};

class DecodeGpu;

class DecodeRunner {
 public:
  explicit DecodeRunner(const DecodeSpec& spec);
  ~DecodeRunner();
  DecodeRunner(const DecodeRunner&) = delete;
  DecodeRunner& operator=(const DecodeRunner&) = delete;

  // Generates the workload on the host and builds the sparse cache (both timed: generate_ms,
  // quantize_ms); on the GPU, also uploads the workload and allocates the outputs and workspaces.
  // With `selection_error`, also runs dense attention over the rebuilt keys (fp64, once; on the
  // GPU over the device-built cache copied back), the reference of DecodeRow::selection_rel_l2.
  // Call once, before the runs.
  Status prepare(bool selection_error);
  // Each times one run (on the GPU one warm-up run first), or bench.iters runs after
  // bench.warmup when bench.enabled, then judges the output of the last one.
  Status run_dense(const BenchOptions& bench, DecodeRow* row);
  Status run_sparse(const testkit::DecodeSelection& selection, const BenchOptions& bench,
                    DecodeRow* row);

  const DecodeSpec& spec() const { return spec_; }
  DecodeCacheMemory memory() const;
  double generate_ms() const { return generate_ms_; }
  // CPU: sparse_decode_quantize_cpu (wall clock). GPU: one sparse_kv_from_dense call after a
  // warm-up one (CUDA events).
  double quantize_ms() const { return quantize_ms_; }

 private:
  // Judges out_ (and kept_mask_ when `sparse`) into row->fidelity and row->selection_rel_l2.
  Status judge(bool sparse, DecodeRow* row);

  DecodeSpec spec_;
  testkit::DecodeWorkload workload_;
  SparseKvCache shape_;             // the sparse cache's shape (its pointers are not used)
  testkit::HostSparseCache cache_;      // CPU: the cache; GPU: a copy, with selection_error only
  std::unique_ptr<DecodeGpu> gpu_;  // GPU only
  std::vector<float> rebuilt_out_;  // dense attention over the rebuilt keys (fp32)
  std::vector<float> out_;          // [batch, num_q_heads, D] fp32
  std::vector<uint8_t> kept_mask_;  // [batch, num_kv_heads, max_blocks]
  bool prepared_ = false;
  double generate_ms_ = 0;
  double quantize_ms_ = 0;
};

}  // namespace litetopk::tools
