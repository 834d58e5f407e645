// The GPU half of DecodeRunner (decode_runner.h): a workload's dense cache and queries on the
// device, the sparse cache built there by sparse_kv_from_dense, fp32 outputs, the kept mask and
// both decoders' workspaces (allocated once); timed runs of dense_decode and sparse_decode on the
// default stream, their outputs copied back for judging on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "testkit/device_memory.h"
#include "testkit/decode_workload.h"
#include "litetopk/sparse_decode.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

class DecodeGpu {
 public:
  // Uploads `workload` (dense fp16/bf16 cache, lengths, queries), allocates a contiguous sparse
  // cache of `block_size` with max_blocks = ceil(capacity / block_size) and fills it with
  // sparse_kv_from_dense: one warm-up call, then one call timed with CUDA events (*convert_ms).
  // Call once; `workload` must outlive the object.
  Status prepare(testkit::DecodeWorkload* workload, int64_t block_size, double* convert_ms);

  // dense_decode over the dense cache, timed with time_on_device; the last run's fp32 output is
  // copied to host `out` [batch, num_q_heads, D].
  Status run_dense(const BenchOptions& bench, float* out, Timing* timing);
  // sparse_decode at `delta`, likewise; the last run's kept mask goes to host `kept_mask`
  // [batch, num_kv_heads, max_blocks] (every entry checked to be 0 or 1).
  Status run_sparse(const testkit::DecodeSelection& selection, const BenchOptions& bench,
                    float* out, uint8_t* kept_mask,
                    Timing* timing);
  // Copies the device sparse cache into `host`, which must have the cache's shape (contiguous).
  Status download_cache(testkit::HostSparseCache* host) const;

  // The device sparse cache (device pointers; its shape is valid after prepare).
  const SparseKvCache& cache() const { return sparse_.cache; }
  std::size_t dense_workspace_bytes() const { return dense_workspace_.size(); }
  std::size_t sparse_workspace_bytes() const { return sparse_workspace_.size(); }

 private:
  // Poisons the output, times `decode` with time_on_device, copies the fp32 output to `out`.
  Status timed(const BenchOptions& bench, const std::function<Status()>& decode, float* out,
               Timing* timing);

  DenseDecodeProblem dense_;    // device pointers
  SparseDecodeProblem sparse_;  // device pointers; delta set by each run
  testkit::DeviceBuffer keys_, values_, lengths_, q_;                          // the dense cache
  testkit::DeviceBuffer codes_, scales_, residuals_, sparse_values_, tail_, sparse_lengths_;
  testkit::DeviceBuffer out_, kept_mask_, dense_workspace_, sparse_workspace_;
};

}  // namespace litetopk::tools
