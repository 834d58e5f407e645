// dsa_kv_rows_kernel: dsa_prefill's hand-off from the indexer to the attention, in place on the
// indices [T, k]: the indexer's positions relative to ks[t] become absolute kv rows.
//
// 1. A block takes a query row t (striding over the rows when T exceeds the grid) and reads its
//    range start ks[t] once.
// 2. Its threads stride over the row's k slots: slot = dsa::kv_row(slot, ks[t], num_keys), so -1
//    padding and any other negative stay -1, as does a sum outside [0, num_keys).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "api/dsa_backend.h"
#include "cuda/common/cuda_check.h"
#include "formats/dsa_kv_rows.h"

namespace litetopk::detail {
namespace {

constexpr int kThreads = 256;
// Rows beyond this many blocks are taken by the blocks' stride over the rows.
constexpr int64_t kMaxBlocks = 1 << 16;

__global__ void __launch_bounds__(kThreads)
    dsa_kv_rows_kernel(const int32_t* __restrict__ ks, int32_t* __restrict__ rows,
                       int64_t num_queries, int64_t k, int64_t num_keys) {
  for (int64_t t = blockIdx.x; t < num_queries; t += gridDim.x) {
    const int32_t start = ks[t];
    int32_t* row = rows + t * k;
    for (int64_t j = threadIdx.x; j < k; j += kThreads) {
      row[j] = dsa::kv_row(row[j], start, num_keys);
    }
  }
}

}  // namespace

Status cuda_dsa_kv_rows(const int32_t* ks, int32_t* rows, int64_t num_queries, int64_t k,
                        int64_t num_keys, cudaStream_t stream) {
  if (num_queries <= 0 || k <= 0) return Status::ok();
  const auto blocks = static_cast<unsigned>(std::min(num_queries, kMaxBlocks));
  dsa_kv_rows_kernel<<<blocks, kThreads, 0, stream>>>(ks, rows, num_queries, k, num_keys);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::detail
