// The CUDA backend of select_topk: the cost model, workspace layout and launch of one algorithm,
// plus the sort for sorted output.
#include <cuda_runtime_api.h>

#include <vector>

#include "api/format.h"
#include "api/select_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/select/select_kernels.h"

namespace litetopk {
namespace cuda_select {

namespace {

// Everything one call needs, carved from the workspace (or only sized when base is null).
struct CallLayout {
  SampleFilterPlan sample_filter{};
  SampleFilterWorkspace sample_filter_ws{};
  RadixPlan radix{};
  RadixWorkspace radix_ws{};
  GridRadixPlan grid{};
  GridRadixWorkspace grid_ws{};
  SortWorkspace sort_ws{};
  std::size_t bytes = 0;
};

Status lay_out(const SelectProblem& problem, SelectAlgo algo, void* base, CallLayout* layout) {
  cuda_common::DeviceShape device{};
  Status status = cuda_common::current_device_shape(&device);
  if (!status) return status;
  cuda_common::WorkspaceCarver carver(base);
  if (algo == SelectAlgo::kSampleFilter) {
    layout->sample_filter = plan_sample_filter(problem, device);
    layout->sample_filter_ws = carve_sample_filter(carver, problem, layout->sample_filter);
  } else if (algo == SelectAlgo::kGridRadix) {
    if (Status s = plan_grid_radix(problem, &layout->grid); !s) return s;
    if (layout->grid.segments == 0) {
      return Status(StatusCode::kUnsupported,
                    detail::concat("grid-radix needs every block resident: ", problem.batch,
                           " rows are too many for this device (use auto or radix)"));
    }
    layout->grid_ws = carve_grid_radix(carver, problem);
  } else {
    layout->radix = plan_radix(problem, device);
    layout->radix_ws = carve_radix(carver, problem);
  }
  if (problem.sorted) {
    if (Status sort_status = carve_sort(carver, problem, &layout->sort_ws); !sort_status) {
      return sort_status;
    }
  }
  layout->bytes = carver.bytes();
  return Status::ok();
}

}  // namespace
}  // namespace cuda_select

namespace detail {

using cuda_select::CallLayout;

SelectAlgo cuda_select_dispatch(const SelectProblem& problem) {
  // Sample-filter reads the scores once; radix reads them 4 to 7 times, but spreads a row over
  // many blocks in every pass. Sample-filter wins whenever each row gets a block of its own; when
  // the batch is too small for that and rows are split, its last-block merge of up to
  // segments * k candidates runs on one SM, and radix was faster on every such shape measured on
  // the H200 (docs/BENCHMARKS.md: 64 x 131072, 8 x 2^20, 1 x 2^24); grid-radix runs radix's
  // passes in one launch where the rows' blocks fit on the device at once.
  cuda_common::DeviceShape device{};
  if (!cuda_common::current_device_shape(&device)) return SelectAlgo::kRadix;
  if (problem.k <= kSampleFilterMaxK &&
      cuda_select::plan_sample_filter(problem, device).segments == 1) {
    return SelectAlgo::kSampleFilter;
  }
  // Radix's passes in one launch when the rows' blocks fit on the device at once: no host
  // round trips between passes.
  cuda_select::GridRadixPlan grid{};
  if (cuda_select::plan_grid_radix(problem, &grid) && grid.segments > 0) {
    return SelectAlgo::kGridRadix;
  }
  return SelectAlgo::kRadix;
}

Status cuda_select_workspace_size(const SelectProblem& problem, SelectAlgo algo,
                                  std::size_t* workspace_bytes) {
  CallLayout layout;
  Status status = cuda_select::lay_out(problem, algo, nullptr, &layout);
  if (!status) return status;
  *workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_select_topk(const SelectProblem& problem, SelectAlgo algo, void* workspace,
                        std::size_t /*workspace_bytes*/, cudaStream_t stream) {
  CallLayout layout;
  Status status = cuda_select::lay_out(problem, algo, workspace, &layout);
  if (!status) return status;
  cuda_select::SelectArgs args{};
  args.scores = problem.scores;
  args.row_stride = problem.row_stride == 0 ? problem.n : problem.row_stride;
  args.n = static_cast<int32_t>(problem.n);
  args.row_starts = problem.row_starts;
  args.row_ends = problem.row_ends;
  args.k = static_cast<int32_t>(problem.k);
  args.largest = problem.largest;
  args.deterministic = problem.deterministic;
  args.indices = problem.indices;
  args.values = problem.values;
  args.out_composites = problem.sorted ? layout.sort_ws.composites : nullptr;
  const auto launch_algo = [&]() -> Status {
    switch (algo) {
      case SelectAlgo::kSampleFilter:
        return cuda_select::launch_sample_filter(problem, layout.sample_filter, args,
                                                 layout.sample_filter_ws, stream);
      case SelectAlgo::kGridRadix:
        return cuda_select::launch_grid_radix(problem, layout.grid, args, layout.grid_ws, stream);
      default:
        return cuda_select::launch_radix(problem, layout.radix, args, layout.radix_ws, stream);
    }
  };
  const Status launched = launch_algo();
  if (!launched || !problem.sorted) return launched;
  return cuda_select::launch_sort_selected(problem, layout.sort_ws, stream);
}

Status cuda_validate_select_ranges(const SelectProblem& problem, cudaStream_t stream) {
  const auto batch = static_cast<std::size_t>(problem.batch);
  std::vector<int32_t> starts(problem.row_starts ? batch : 0);
  std::vector<int32_t> ends(problem.row_ends ? batch : 0);
  if (problem.row_starts) {
    LITETOPK_CUDA_TRY(cudaMemcpyAsync(starts.data(), problem.row_starts, batch * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
  }
  if (problem.row_ends) {
    LITETOPK_CUDA_TRY(cudaMemcpyAsync(ends.data(), problem.row_ends, batch * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
  }
  LITETOPK_CUDA_TRY(cudaStreamSynchronize(stream));
  return validate_select_ranges(problem, problem.row_starts ? starts.data() : nullptr,
                                problem.row_ends ? ends.data() : nullptr);
}

}  // namespace detail

namespace cuda_select {

Status select_workspace_size(const SelectProblem& problem, std::size_t* workspace_bytes) {
  return detail::cuda_select_workspace_size(problem, detail::cuda_select_dispatch(problem),
                                            workspace_bytes);
}

Status select_rows(const SelectProblem& problem, void* workspace, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_select_topk(problem, detail::cuda_select_dispatch(problem), workspace, 0,
                                  stream);
}

}  // namespace cuda_select
}  // namespace litetopk
