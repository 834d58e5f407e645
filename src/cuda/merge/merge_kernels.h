// Host-side entry points of the merge_topk kernels (src/cuda/merge/).
#pragma once

#include <cstdint>

#include "cuda/select/score_source.cuh"
#include "litetopk/merge.h"

namespace litetopk::cuda_merge {

// The shard lists of a merge as the kernel reads them (default strides resolved).
struct MergeLists {
  const float* values;
  const int32_t* indices;
  const int32_t* counts;  // may be null
  int64_t shards;
  int64_t k_in;
  int64_t row_stride;
  int64_t shard_stride;
  bool largest;
};

// One block per row of `batch`: the exact top-k of the row's candidates into `out` (select's
// output arguments: indices and values, or composites to sort when out.out_composites is set).
Status launch_merge_rows(const MergeLists& lists, const cuda_select::SelectArgs& out,
                         int64_t batch, cudaStream_t stream);

}  // namespace litetopk::cuda_merge
