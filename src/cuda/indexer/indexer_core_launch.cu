// Host side of the scoring core: tensor maps, arguments and grid (indexer_kernels.h).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/tensor_map_sm90.h"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/common/device_shape.h"
#include "cuda/common/workspace_carver.h"

namespace litetopk::cuda_indexer {

Status prepare_core_launch(const IndexerProblem& problem, CoreLaunch* launch) {
  const auto q_rows = static_cast<uint64_t>(problem.num_queries * problem.num_heads);
  if (Status s = detail::make_row_tile_map(problem.q, q_rows, sm90core::kBankColumns * 2,
                                           &launch->q_map);
      !s) {
    return s;
  }
  if (Status s = detail::make_row_tile_map(problem.kv, static_cast<uint64_t>(problem.num_keys),
                                           sm90core::kTileKeys, &launch->kv_map);
      !s) {
    return s;
  }
  const int64_t query_blocks = core_query_blocks(problem);
  launch->args = {static_cast<const uint8_t*>(problem.kv),
                  problem.kv_scale,
                  problem.weights,
                  problem.ks,
                  problem.ke,
                  static_cast<int32_t>(problem.num_queries),
                  static_cast<int32_t>(problem.num_keys),
                  static_cast<int32_t>(query_blocks),
                  nullptr,
                  0,
                  0,
                  nullptr,
                  sm90core::kWalkAll};
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  launch->blocks = static_cast<unsigned>(std::min<int64_t>(query_blocks, device.sm_count));
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
