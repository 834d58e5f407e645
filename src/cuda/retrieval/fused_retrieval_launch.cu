// The fused retrieval path (fused_retrieval.h): plan, workspace and the launches in order.
//
// 1. l2: the squared norms of the queries and, without corpus_norms, of the corpus.
// 2. With a sample: fused_retrieval_kernel over every sample_stride-th tile writes their scores
//    (the same arithmetic as the scan, so the gates hold for the scan's own scores), select_topk
//    takes each query's k best.
// 3. fused_gates_kernel: the gates (the sample's k-th key, or every non-NaN score).
// 4. fused_retrieval_kernel over every tile: the gate in the epilogue, survivors into the lists,
//    the lists into the queries' pools.
// 5. fused_select_kernel: per query the k best of its pool, into the outputs, or (sorted) into
//    composites that sort_selected sorts best first and decodes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "api/format.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_shape.h"
#include "cuda/common/tensor_map_sm90.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/retrieval/fused_retrieval.h"
#include "cuda/retrieval/retrieval_kernels.h"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_retrieval {
namespace {

struct Layout {
  float* corpus_norms = nullptr;  // [n], l2 without corpus_norms
  float* query_norms = nullptr;   // [batch], l2
  float* sample_scores = nullptr;
  float* sample_values = nullptr;     // [batch, k]
  int32_t* sample_indices = nullptr;  // [batch, k]
  char* sample_select = nullptr;
  uint64_t* gates = nullptr;
  uint64_t* lists = nullptr;
  uint32_t* counts = nullptr;
  uint64_t* pool = nullptr;
  uint32_t* pool_counts = nullptr;
  cuda_select::SortWorkspace sort{};
  std::size_t bytes = 0;
};

bool is_l2(const RetrievalProblem& p) { return p.metric == RetrievalMetric::kL2; }

// The sort of the k best per query (sorted output): composites to indices and scores.
SelectProblem sort_problem(const RetrievalProblem& p) {
  SelectProblem s;
  s.dtype = DType::kFloat32;
  s.batch = p.batch;
  s.n = p.k;
  s.k = p.k;
  s.indices = p.indices;
  s.values = p.scores;
  return s;
}

Status carve(const RetrievalPlan& plan, void* base, Layout* layout) {
  const RetrievalProblem& p = plan.problem;
  cuda_common::WorkspaceCarver carver(base);
  *layout = Layout{};
  const auto batch = static_cast<std::size_t>(p.batch);
  if (is_l2(p)) {
    if (!plan.has_norms) layout->corpus_norms = carver.take<float>(static_cast<std::size_t>(p.n));
    layout->query_norms = carver.take<float>(batch);
  }
  if (plan.fused_sample_tiles > 0) {
    layout->sample_scores = carver.take<float>(
        batch * static_cast<std::size_t>(plan.fused_sample_tiles * kFusedTileRows));
    layout->sample_values = carver.take<float>(batch * static_cast<std::size_t>(p.k));
    layout->sample_indices = carver.take<int32_t>(batch * static_cast<std::size_t>(p.k));
    layout->sample_select = carver.take<char>(plan.sample_select.workspace_bytes);
  }
  layout->gates = carver.take<uint64_t>(batch);
  const auto lanes = static_cast<std::size_t>(plan.fused_splits * kFusedMathGroups);
  layout->lists =
      carver.take<uint64_t>(batch * lanes * static_cast<std::size_t>(plan.fused_list_capacity));
  layout->counts = carver.take<uint32_t>(batch * lanes);
  layout->pool =
      carver.take<uint64_t>(batch * static_cast<std::size_t>(plan.fused_pool_capacity));
  layout->pool_counts = carver.take<uint32_t>(batch);
  if (p.sorted) {
    if (Status s = cuda_select::carve_sort(carver, sort_problem(p), &layout->sort); !s) return s;
  }
  layout->bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

Status fused_retrieval_unsupported(const RetrievalProblem& p, std::string* why) {
  why->clear();
  if (p.corpus_format != RetrievalCorpusFormat::kSameAsQueries) {
    *why = "the fused path reads a float16 or bfloat16 corpus, got fp8_e4m3";
    return Status::ok();
  }
  int device = 0;
  int major = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  LITETOPK_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) {
    *why = "the fused path needs an sm_90 device, got compute capability " +
           std::to_string(major) + ".x";
  }
  return Status::ok();
}

Status plan_fused_retrieval(RetrievalPlan* plan) {
  const RetrievalProblem& p = plan->problem;
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  const heuristics::FusedRetrievalShape shape =
      heuristics::fused_retrieval_shape(p.batch, p.n, p.k, device.sm_count);
  plan->fused_splits = shape.splits;
  plan->fused_list_capacity = shape.list_capacity;
  plan->fused_pool_capacity = shape.pool_capacity;
  plan->fused_stages = fused_stage_count(p.dim);
  plan->fused_sample_stride = shape.sample_stride;
  plan->fused_sample_tiles = shape.sample_tiles;
  plan->sample_select = SelectPlan{};
  if (shape.sample_tiles > 0 && p.batch > 0) {
    static float values_marker = 0.0f;  // select_topk_plan keeps only whether it is null
    SelectProblem sample;
    sample.dtype = DType::kFloat32;
    sample.batch = p.batch;
    sample.n = shape.sample_tiles * kFusedTileRows;
    sample.k = p.k;
    sample.values = &values_marker;
    if (Status s = select_topk_plan(sample, SelectOptions{}, &plan->sample_select); !s) return s;
  }
  Layout layout;
  if (Status s = carve(*plan, nullptr, &layout); !s) return s;
  plan->workspace_bytes = layout.bytes;
  return Status::ok();
}

Status launch_fused_retrieval(const RetrievalPlan& plan, const RetrievalProblem& p,
                              void* workspace, cudaStream_t stream) {
  Layout layout;
  if (Status s = carve(plan, workspace, &layout); !s) return s;
  FusedScan scan;
  const uint64_t row_bytes = static_cast<uint64_t>(p.dim) * dtype_size(p.dtype);
  if (Status s = detail::make_matrix_tile_map(p.queries, static_cast<uint64_t>(p.batch), row_bytes,
                                              kFusedQueryRows, &scan.query_map);
      !s) {
    return s;
  }
  if (Status s = detail::make_matrix_tile_map(p.corpus, static_cast<uint64_t>(p.n), row_bytes,
                                              kFusedTileRows, &scan.corpus_map);
      !s) {
    return s;
  }
  scan.bitmap = p.corpus_bitmap;
  scan.starts = p.range_starts;
  scan.ends = p.range_ends;
  // 1.
  if (is_l2(p)) {
    if (Status s = launch_l2_norms(p, layout.corpus_norms, layout.query_norms, &scan.corpus_norms,
                                   stream);
        !s) {
      return s;
    }
    scan.query_norms = layout.query_norms;
  }
  // 2.
  if (plan.fused_sample_tiles > 0) {
    scan.sample_scores = layout.sample_scores;
    if (Status s = launch_fused_scan(plan, scan, /*sample=*/true, stream); !s) return s;
    SelectAddresses sample;
    sample.scores = layout.sample_scores;
    sample.indices = layout.sample_indices;
    sample.values = layout.sample_values;
    if (Status s = select_topk_launch(plan.sample_select, sample, layout.sample_select, stream);
        !s) {
      return s;
    }
  }
  // 3.-4.
  if (Status s = launch_fused_gates(layout.sample_values, p.batch, p.k, layout.gates,
                                   layout.pool_counts, stream);
      !s) {
    return s;
  }
  scan.gates = layout.gates;
  scan.lists = layout.lists;
  scan.counts = layout.counts;
  scan.pool = layout.pool;
  scan.pool_counts = layout.pool_counts;
  if (Status s = launch_fused_scan(plan, scan, /*sample=*/false, stream); !s) return s;
  // 5.
  if (!p.sorted) return launch_fused_select(plan, scan, p.indices, p.scores, nullptr, stream);
  if (Status s = launch_fused_select(plan, scan, nullptr, nullptr, layout.sort.composites, stream);
      !s) {
    return s;
  }
  return cuda_select::launch_sort_selected(sort_problem(p), layout.sort, stream);
}

}  // namespace litetopk::cuda_retrieval
