// Runs one DSA layer (testkit/dsa_workload.h) on one backend, shared by `litetopk dsa` and
// `litetopk demo`: dsa_prefill (litetopk/dsa.h) picks each query's k tokens into indices [T, k]
// (-1 padded; kv rows, which are the indexer's positions here since the causal ranges start at
// 0), then attends over them.
//   GPU: uploads the workload, runs each stage with the requested algorithm and times, with CUDA
//        events on the default stream, the indexer alone, the attention alone (over the indexer's
//        indices) and the layer (one dsa_prefill launch: the indexer, the kv-row kernel and the
//        attention, back to back on the stream);
//   CPU: dsa_prefill_cpu (the references, slow), timed with the host clock; the stages are timed
//        as indexer_topk_cpu and sparse_attention_cpu calls of their own, once per timed run.
// The outputs kept for checking (testkit/dsa_verify.h) are the last layer run's, written over
// poisoned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/attention.h"
#include "litetopk/dsa.h"
#include "litetopk/indexer.h"
#include "testkit/dsa_workload.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

struct DsaRunOptions {
  bool on_gpu = false;                                              // else the CPU references
  IndexerAlgo indexer_algo = IndexerAlgo::kAuto;                    // GPU only
  SparseAttentionAlgo attention_algo = SparseAttentionAlgo::kAuto;  // GPU only
  // Enabled: bench.warmup + bench.iters runs of each stage and of the layer (the median and the
  // minimum of the last bench.iters; on the CPU of the layer, its stages timed inside it);
  // disabled: one layer run, untimed.
  BenchOptions bench;
};

struct DsaRun {
  // What ran: "cpu", or the GPU algorithm ("auto" resolved: indexer_topk_dispatch; union-packed
  // where it applies, else per-query).
  std::string indexer_algo;
  std::string attention_algo;
  std::vector<int32_t> indices;        // [T, k], host
  std::vector<uint16_t> out;           // [T, h_q, d_v] bf16 bits
  std::vector<float> max_logits, lse;  // [T, h_q], base 2
  Timing indexer, attention, layer;    // with bench
  std::size_t indexer_workspace_bytes = 0;    // GPU only
  std::size_t attention_workspace_bytes = 0;  // GPU only
  std::size_t layer_workspace_bytes = 0;      // GPU only: dsa_prefill's (both halves' and none
                                              // for the indices, which are the run's own)
};

// The layer of `w` as one dsa_prefill problem over the workload's host arrays; the caller sets
// out (and max_logits, lse, indices).
DsaPrefillProblem dsa_prefill_problem(const DsaWorkload& w);

// "" when `options` can run `spec` (the attention algorithm applies to its shape; a GPU
// algorithm other than auto needs on_gpu), else why not.
std::string dsa_run_error(const DsaSpec& spec, const DsaRunOptions& options);

// Runs the layer (see above). The spec must pass dsa_spec_error and dsa_run_error.
Status run_dsa_layer(const DsaWorkload& w, const DsaRunOptions& options, DsaRun* run);

// LiteDSA's packing group at h_q 16 and 32: G = 64 / h_q neighbouring queries; 0 otherwise.
int64_t dsa_union_group(const DsaSpec& spec);
// How much a union-packed kernel saves on `indices` [T, k]: kv rows gathered one query at a time
// over rows gathered once per group of dsa_union_group(spec) queries (measure_group_unions's
// reuse; 1 without overlap, G when neighbours choose the same tokens); 0 when no group applies.
double dsa_union_reuse(const DsaSpec& spec, const int32_t* indices);

}  // namespace litetopk::tools
