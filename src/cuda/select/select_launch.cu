// The CUDA backend of select_topk: a plan (the planners' facts for the dispatch rule in
// src/heuristics/select_heuristics.cpp, the chosen algorithm's launch shape, the workspace size),
// and its launch (carve the workspace once, run the algorithm, then the sort for sorted output).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "api/format.h"
#include "api/select_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/select/select_kernels.h"
#include "heuristics/select_heuristics.h"

namespace litetopk {
namespace cuda_select {

namespace {

constexpr int64_t kMaxGridBlocks = 2147483647;  // a grid's x dimension

// Everything one launch needs, carved from the workspace (or only sized when base is null).
struct CallLayout {
  SampleFilterWorkspace sample_filter_ws{};
  RadixWorkspace radix_ws{};
  GridRadixWorkspace grid_ws{};
  SieveWorkspace sieve_ws{};
  SortWorkspace sort_ws{};
  std::size_t bytes = 0;
};

SampleFilterPlan sample_filter_of(const SelectPlan& plan) {
  return SampleFilterPlan{plan.large_k, plan.segments, plan.blocks_per_sm,
                          plan.threads_per_block};
}

SievePlan sieve_of(const SelectPlan& plan) {
  return SievePlan{plan.segments, plan.sieve_keep, plan.sieve_capacity, plan.sieve_shared_bytes};
}

Status lay_out(const SelectProblem& problem, const SelectPlan& plan, void* base,
               CallLayout* layout) {
  cuda_common::WorkspaceCarver carver(base);
  if (plan.algo == SelectAlgo::kSampleFilter) {
    layout->sample_filter_ws = carve_sample_filter(carver, problem, sample_filter_of(plan));
  } else if (plan.algo == SelectAlgo::kGridRadix) {
    layout->grid_ws = carve_grid_radix(carver, problem);
  } else if (plan.algo == SelectAlgo::kSieve) {
    layout->sieve_ws = carve_sieve(carver, problem, sieve_of(plan));
  } else if (plan.algo == SelectAlgo::kCluster || plan.algo == SelectAlgo::kRegister) {
    // No workspace: a row's state lives in its CTAs' shared memory and registers.
  } else {
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

// The planners' view of one problem on `device` (grid-radix's asks the occupancy calculator).
Status shape_facts(const SelectProblem& problem, const cuda_common::DeviceShape& device,
                   heuristics::SelectShapeFacts* facts) {
  facts->k = problem.k;
  facts->n = problem.n;
  facts->batch = problem.batch;
  facts->sm_count = device.sm_count;
  facts->element_bytes = problem.dtype == DType::kFloat32 ? 4 : 2;
  facts->sample_filter_segments = plan_sample_filter(problem, device).segments;
  GridRadixPlan grid{};
  if (Status s = plan_grid_radix(problem, &grid); !s) return s;
  facts->grid_radix_segments = grid.segments;
  facts->sieve_segments = plan_sieve(problem, device).segments;
  const ClusterPlan cluster = plan_cluster(problem);
  facts->cluster_size = cluster.cluster;
  facts->resident_clusters = cluster.resident;
  facts->register_keys_per_thread = plan_register(problem).per_thread;
  return Status::ok();
}

}  // namespace
}  // namespace cuda_select

namespace detail {

using cuda_select::CallLayout;

SelectAlgo cuda_select_dispatch(const SelectProblem& problem) {
  cuda_common::DeviceShape device{};
  heuristics::SelectShapeFacts facts{};
  if (!cuda_common::current_device_shape(&device) ||
      !cuda_select::shape_facts(problem, device, &facts)) {
    return SelectAlgo::kRadix;
  }
  return heuristics::choose_select_algo(facts);
}

Status cuda_select_plan(const SelectProblem& problem, SelectAlgo algo, SelectPlan* plan) {
  cuda_common::DeviceShape device{};
  if (Status status = cuda_common::current_device_shape(&device); !status) return status;
  if (algo == SelectAlgo::kAuto) {
    heuristics::SelectShapeFacts facts{};
    if (Status status = cuda_select::shape_facts(problem, device, &facts); !status) return status;
    algo = heuristics::choose_select_algo(facts);
  }
  plan->algo = algo;
  if (algo == SelectAlgo::kSampleFilter) {
    const cuda_select::SampleFilterPlan sample_filter =
        cuda_select::plan_sample_filter(problem, device);
    plan->segments = sample_filter.segments;
    plan->blocks_per_sm = sample_filter.blocks_per_sm;
    plan->large_k = sample_filter.large_k;
    plan->threads_per_block = sample_filter.threads;
  } else if (algo == SelectAlgo::kGridRadix) {
    cuda_select::GridRadixPlan grid{};
    if (Status status = cuda_select::plan_grid_radix(problem, &grid); !status) return status;
    if (grid.segments == 0) {
      return Status(StatusCode::kUnsupported,
                    detail::concat("grid-radix needs every block resident: ", problem.batch,
                                   " rows are too many for this device (use auto or radix)"));
    }
    plan->segments = grid.segments;
  } else if (algo == SelectAlgo::kCluster) {
    const cuda_select::ClusterPlan cluster = cuda_select::plan_cluster(problem);
    if (cluster.cluster == 0) {
      return Status(StatusCode::kUnsupported,
                    detail::concat("cluster holds a row in one cluster's shared memory: n ",
                                   problem.n, " does not fit this device (use auto or radix)"));
    }
    plan->segments = cluster.cluster;
  } else if (algo == SelectAlgo::kRegister) {
    if (cuda_select::plan_register(problem).per_thread == 0) {
      return Status(StatusCode::kUnsupported,
                    detail::concat("register holds a row in one CTA's registers: n ", problem.n,
                                   " exceeds 16384 (use auto or radix)"));
    }
    plan->segments = 1;
  } else if (algo == SelectAlgo::kSieve) {
    const cuda_select::SievePlan sieve = cuda_select::plan_sieve(problem, device);
    if (sieve.segments == 0) {
      return Status(StatusCode::kUnsupported,
                    detail::concat("sieve keeps a row's survivors in one block: n ", problem.n,
                                   " and k ", problem.k, " leave too many (use auto or radix)"));
    }
    plan->segments = sieve.segments;
    plan->sieve_keep = sieve.keep;
    plan->sieve_capacity = sieve.capacity;
    plan->sieve_shared_bytes = sieve.shared_bytes;
  } else {
    plan->segments = cuda_select::plan_radix(problem, device).segments;
  }
  // Cluster, sieve and register launch a block per (row, segment) along one grid dimension.
  const bool one_dimension = algo == SelectAlgo::kCluster || algo == SelectAlgo::kSieve ||
                             algo == SelectAlgo::kRegister;
  const int64_t most_rows = cuda_select::kMaxGridBlocks / std::max(plan->segments, 1);
  if (one_dimension && problem.batch > most_rows) {
    return Status(StatusCode::kUnsupported,
                  detail::concat(select_algo_name(algo), " launches ", plan->segments,
                                 " blocks a row: ", problem.batch,
                                 " rows exceed a grid (use auto or radix)"));
  }
  CallLayout layout;
  if (Status status = cuda_select::lay_out(problem, *plan, nullptr, &layout); !status) {
    return status;
  }
  plan->workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_select_launch(const SelectPlan& plan, const SelectProblem& problem, void* workspace,
                          cudaStream_t stream) {
  CallLayout layout;
  if (Status status = cuda_select::lay_out(problem, plan, workspace, &layout); !status) {
    return status;
  }
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
    switch (plan.algo) {
      case SelectAlgo::kSampleFilter:
        return cuda_select::launch_sample_filter(problem, cuda_select::sample_filter_of(plan),
                                                 args, layout.sample_filter_ws, stream);
      case SelectAlgo::kGridRadix:
        return cuda_select::launch_grid_radix(problem, cuda_select::GridRadixPlan{plan.segments},
                                              args, layout.grid_ws, stream);
      case SelectAlgo::kCluster:
        return cuda_select::launch_cluster(
            problem, cuda_select::cluster_plan_for(problem, plan.segments), args, stream);
      case SelectAlgo::kRegister:
        return cuda_select::launch_register(problem, cuda_select::plan_register(problem), args,
                                            stream);
      case SelectAlgo::kSieve:
        return cuda_select::launch_sieve(problem, cuda_select::sieve_of(plan), args,
                                         layout.sieve_ws, stream);
      default:
        return cuda_select::launch_radix(problem, cuda_select::RadixPlan{plan.segments}, args,
                                         layout.radix_ws, stream);
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
  SelectPlan plan{};
  if (Status status = detail::cuda_select_plan(problem, SelectAlgo::kAuto, &plan); !status) {
    return status;
  }
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status select_rows(const SelectProblem& problem, void* workspace, cudaStream_t stream) {
  if (problem.batch == 0) return Status::ok();
  SelectPlan plan{};
  if (Status status = detail::cuda_select_plan(problem, SelectAlgo::kAuto, &plan); !status) {
    return status;
  }
  return detail::cuda_select_launch(plan, problem, workspace, stream);
}

}  // namespace cuda_select
}  // namespace litetopk
