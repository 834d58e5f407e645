// Sorted output: the selection writes composites, which sort best-first (ties by ascending index,
// -1 padding last) because of how composites are built; then they are decoded.
//
// 1. fill_offsets_kernel: segment offsets row * k.
// 2. cub::DeviceSegmentedSort::SortKeysDescending over the rows.
// 3. decode_kernel: composites -> indices (and values).
#include <cuda_runtime_api.h>

#include <cub/device/device_segmented_sort.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_select {
namespace {

__global__ void fill_offsets_kernel(int64_t* offsets, int64_t batch, int64_t k) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i <= batch) offsets[i] = i * k;
}

template <typename Traits>
__global__ void decode_kernel(const SelectArgs args, const uint64_t* sorted, int64_t total) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= total) return;
  write_output<Traits>(args, i / args.k, static_cast<int32_t>(i % args.k), sorted[i]);
}

std::size_t cub_sort_bytes(const SelectProblem& problem) {
  std::size_t bytes = 0;
  cub::DeviceSegmentedSort::SortKeysDescending(
      nullptr, bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
      problem.batch * problem.k, problem.batch, static_cast<const int64_t*>(nullptr),
      static_cast<const int64_t*>(nullptr));
  return bytes;
}

}  // namespace

Status carve_sort(cuda_common::WorkspaceCarver& carver, const SelectProblem& problem, SortWorkspace* ws) {
  const int64_t total = problem.batch * problem.k;
  ws->composites = carver.take<uint64_t>(total);
  ws->sorted = carver.take<uint64_t>(total);
  ws->offsets = carver.take<int64_t>(problem.batch + 1);
  ws->cub_temp_bytes = cub_sort_bytes(problem);
  ws->cub_temp = carver.take<unsigned char>(ws->cub_temp_bytes);
  return Status::ok();
}

Status launch_sort_selected(const SelectProblem& problem, const SortWorkspace& ws,
                            cudaStream_t stream) {
  const int64_t total = problem.batch * problem.k;
  constexpr int kThreads = 256;
  fill_offsets_kernel<<<static_cast<unsigned>((problem.batch + kThreads) / kThreads), kThreads, 0,
                        stream>>>(ws.offsets, problem.batch, problem.k);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  std::size_t temp_bytes = ws.cub_temp_bytes;
  LITETOPK_CUDA_TRY(cub::DeviceSegmentedSort::SortKeysDescending(
      ws.cub_temp, temp_bytes, ws.composites, ws.sorted, total, problem.batch, ws.offsets,
      ws.offsets + 1, stream));
  SelectArgs args{};
  args.k = static_cast<int32_t>(problem.k);
  args.largest = problem.largest;
  args.indices = problem.indices;
  args.values = problem.values;
  return dispatch_dtype(problem.dtype, [&](auto traits) -> Status {
    using Traits = decltype(traits);
    decode_kernel<Traits><<<static_cast<unsigned>((total + kThreads - 1) / kThreads), kThreads, 0,
                            stream>>>(args, ws.sorted, total);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  });
}

}  // namespace litetopk::cuda_select
