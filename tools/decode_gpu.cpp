#include "decode_gpu.h"

#include <algorithm>
#include <limits>

#include <string>

namespace litetopk::tools {

namespace {

constexpr int64_t kD = kSparseDecodeHeadDim;

// Copies `bytes` of a device array into a host vector of exactly that size.
template <typename Vector>
Status download(Vector* host, const void* device, std::size_t bytes) {
  if (host->size() * sizeof((*host)[0]) != bytes) {
    return Status(StatusCode::kInternal,
                  "DecodeGpu: host array of " +
                      std::to_string(host->size() * sizeof((*host)[0])) +
                      " bytes for a device array of " + std::to_string(bytes));
  }
  return testkit::copy_to_host(host->data(), device, bytes);
}

}  // namespace

Status DecodeGpu::prepare(testkit::DecodeWorkload* workload, int64_t block_size, double* convert_ms) {
  using testkit::upload;
  testkit::DecodeWorkload& w = *workload;
  // The dense cache and the queries.
  if (Status s = upload(w.keys, &keys_); !s) return s;
  if (Status s = upload(w.values, &values_); !s) return s;
  if (Status s = upload(w.lengths, &lengths_); !s) return s;
  if (Status s = upload(w.q, &q_); !s) return s;
  const auto rows = static_cast<std::size_t>(w.batch * w.num_q_heads);
  if (Status s = out_.allocate(rows * kD * sizeof(float)); !s) return s;
  dense_ = w.dense_problem(out_.data(), DType::kFloat32);
  dense_.cache.keys = keys_.data();
  dense_.cache.values = values_.data();
  dense_.cache.lengths = lengths_.as<int32_t>();
  dense_.q = q_.data();

  // The sparse cache, contiguous, converted on the device.
  SparseKvCache cache;
  cache.dtype = w.dtype;
  cache.batch = w.batch;
  cache.num_kv_heads = w.num_kv_heads;
  cache.block_size = block_size;
  cache.max_blocks = std::max<int64_t>(1, (w.capacity + block_size - 1) / block_size);
  SparseKvCacheBytes bytes;
  if (Status s = sparse_kv_cache_bytes(cache, &bytes); !s) return s;
  if (Status s = codes_.allocate(bytes.key_codes); !s) return s;
  if (Status s = scales_.allocate(bytes.key_scales); !s) return s;
  if (Status s = residuals_.allocate(bytes.key_residuals); !s) return s;
  if (Status s = sparse_values_.allocate(bytes.values); !s) return s;
  if (Status s = tail_.allocate(bytes.tail_keys); !s) return s;
  if (Status s = sparse_lengths_.allocate(bytes.lengths); !s) return s;
  cache.key_codes = codes_.as<uint8_t>();
  cache.key_scales = scales_.data();
  cache.key_residuals = residuals_.as<uint8_t>();
  cache.values = sparse_values_.data();
  cache.tail_keys = tail_.data();
  cache.lengths = sparse_lengths_.as<int32_t>();
  // The first call also loads the kernel; the second is timed.
  if (Status s = sparse_kv_from_dense(dense_.cache, cache, nullptr); !s) return s;
  testkit::DeviceTimer timer;
  if (Status s = timer.start(); !s) return s;
  if (Status s = sparse_kv_from_dense(dense_.cache, cache, nullptr); !s) return s;
  float ms = 0;
  if (Status s = timer.stop(&ms); !s) return s;
  *convert_ms = ms;
  sparse_ = w.sparse_problem(cache, std::numeric_limits<float>::infinity(), out_.as<float>(),
                             nullptr);
  sparse_.q = q_.data();
  if (Status s = kept_mask_.allocate(static_cast<std::size_t>(
          w.batch * w.num_kv_heads * cache.max_blocks));
      !s) {
    return s;
  }
  sparse_.kept_mask = kept_mask_.as<uint8_t>();

  // Workspaces: their sizes depend on the shapes only (not on delta or the lengths).
  std::size_t workspace_bytes = 0;
  if (Status s = dense_decode_workspace_size(dense_, &workspace_bytes); !s) return s;
  if (Status s = dense_workspace_.allocate(workspace_bytes); !s) return s;
  // The bounded-mass selection needs the larger workspace (its block masses and pick rows).
  SparseDecodeProblem mass = sparse_;
  mass.selection = SparseSelection::kMass;
  if (Status s = sparse_decode_workspace_size(mass, &workspace_bytes); !s) return s;
  return sparse_workspace_.allocate(workspace_bytes);
}

Status DecodeGpu::timed(const BenchOptions& bench, const std::function<Status()>& decode,
                        float* out, Timing* timing) {
  // NaN in every output element until a run writes it.
  if (Status s = testkit::fill_device(out_.data(), 0xff, out_.size()); !s) return s;
  if (Status s = time_on_device(bench, [&](int) { return decode(); }, timing); !s) return s;
  return testkit::copy_to_host(out, out_.data(), out_.size());
}

Status DecodeGpu::run_dense(const BenchOptions& bench, float* out, Timing* timing) {
  return timed(
      bench,
      [&] {
        return dense_decode(dense_, dense_workspace_.data(), dense_workspace_.size(), nullptr);
      },
      out, timing);
}

Status DecodeGpu::run_sparse(const testkit::DecodeSelection& selection, const BenchOptions& bench,
                             float* out, uint8_t* kept_mask, Timing* timing) {
  sparse_.selection = selection.rule;
  sparse_.delta = selection.value;
  sparse_.mass_target = selection.value;
  // Neither 0 nor 1 until a run writes it.
  if (Status s = testkit::fill_device(kept_mask_.data(), kPoisonByte, kept_mask_.size()); !s) {
    return s;
  }
  if (Status s = timed(
          bench,
          [&] {
            DecodeOptions options;
            options.read_all_when_small = false;  // the rule as asked, at every size
            return sparse_decode(sparse_, sparse_workspace_.data(), sparse_workspace_.size(),
                                 nullptr, options);
          },
          out, timing);
      !s) {
    return s;
  }
  if (Status s = testkit::copy_to_host(kept_mask, kept_mask_.data(), kept_mask_.size()); !s) {
    return s;
  }
  // Every sequence is as long as the capacity here, so every entry must have been written.
  for (std::size_t i = 0; i < kept_mask_.size(); ++i) {
    if (kept_mask[i] > 1) {
      return Status(StatusCode::kInternal,
                    "sparse_decode left kept_mask[" + std::to_string(i) +
                      "] = " + std::to_string(int{kept_mask[i]}) + " (neither 0 nor 1: not written)");
    }
  }
  return Status::ok();
}

Status DecodeGpu::download_cache(testkit::HostSparseCache* host) const {
  const SparseKvCache& c = sparse_.cache;
  if (host->shape.block_table != nullptr || !host->block_table.empty() ||
      host->shape.batch != c.batch || host->shape.num_kv_heads != c.num_kv_heads ||
      host->shape.block_size != c.block_size || host->shape.max_blocks != c.max_blocks) {
    return Status(StatusCode::kInternal, "DecodeGpu::download_cache: the host cache's shape "
                                         "differs from the device cache's");
  }
  if (Status s = download(&host->key_codes, codes_.data(), codes_.size()); !s) return s;
  if (Status s = download(&host->key_scales, scales_.data(), scales_.size()); !s) return s;
  if (Status s = download(&host->key_residuals, residuals_.data(), residuals_.size()); !s) {
    return s;
  }
  if (Status s = download(&host->values, sparse_values_.data(), sparse_values_.size()); !s) {
    return s;
  }
  if (Status s = download(&host->tail_keys, tail_.data(), tail_.size()); !s) return s;
  return download(&host->lengths, sparse_lengths_.data(), sparse_lengths_.size());
}

}  // namespace litetopk::tools
