// Host entry points of the decode attention kernels (api/decode_backend.h): the split plan, the
// workspace layout and the launch order.
//
// Splits are sized from the cache's capacity and the GPU, never from the lengths (which live on
// the device), by heuristics::decode_units_per_split, so that one CUDA graph stays valid as the
// context grows (splits past a length exit at once). The last split of each (sequence, KV head)
// to finish merges the splits into the output (decode_merge_sm90.cuh); the launch's first kernel
// zeroes the arrival counters that find it.
//   dense:  tokens per split = 64 * blocks_per_split (a "block" is the kernel's 64-token tile);
//           counter reset -> dense kernel (programmatic dependent).
//   sparse: blocks_per_split KV blocks per split (at most 1024), by selection (SparsePass):
//           top-delta: anchor kernel (pseudo-max; zeroes the counters) -> sparse kernel
//             kScanDelta (programmatic dependent: its code scan overlaps the anchors);
//           bounded mass: sparse kernel kScanMass (block masses; zeroes the counters) -> pick
//             kernel -> sparse kernel kAttendPicked (each a programmatic dependent of the one
//             before);
//           every block (delta = inf, mass_target = 0, or the plan's read-all dispatch from the
//             sizes, heuristics/decode_heuristics.h): counter reset -> sparse kernel kAttendAll.
// Workspace: the splits' partial outputs [rows, splits, D] fp32 and log2-sum-exps [rows, splits]
// (rows = batch * num_q_heads), the arrival counters [batch * num_kv_heads] uint32, the anchor
// maxima [rows, 3 * BS / 64] (whatever delta is), and for bounded mass the block masses
// [rows, max_blocks] fp32 and the pick rows [rows, max_blocks] bytes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "api/decode_backend.h"
#include "api/format.h"
#include "cuda/common/counter_reset.h"
#include "cuda/common/device_shape.h"
#include "cuda/common/workspace_carver.h"
#include "cuda/decode/decode_kernels.h"
#include "heuristics/decode_heuristics.h"

namespace litetopk::detail {
namespace {

constexpr int64_t kFallbackSmCount = 132;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t sm_count() {
  cuda_common::DeviceShape device{};
  if (!cuda_common::current_device_shape(&device)) return kFallbackSmCount;
  return device.sm_count;
}

int64_t units_per_split(int64_t units, int64_t unit_tokens, int64_t pairs, int64_t ctas_per_sm,
                        int64_t option, int64_t cap) {
  heuristics::DecodeSplitShape shape;
  shape.units = units;
  shape.unit_tokens = unit_tokens;
  shape.pairs = pairs;
  shape.sm_count = sm_count();
  shape.ctas_per_sm = ctas_per_sm;
  return heuristics::decode_units_per_split(shape, option, cap);
}

struct Plan {
  int64_t splits = 0;
  int64_t units_per_split = 1;  // dense: 64-token tiles; sparse: KV blocks
  int64_t split_tokens = 1;
  int64_t rows = 0;
  int64_t pairs = 0;
  decode::SparsePass pass = decode::SparsePass::kAttendAll;  // sparse only: the first pass
  int64_t anchor_chunks = 0;  // sparse
  int64_t pick_blocks = 0;    // sparse, bounded mass: max_blocks

  std::size_t carve(void* base, decode::SplitPartials* partials,
                    decode::SparseSelectionBuffers* selection) const {
    cuda_common::WorkspaceCarver carver(base);
    partials->o = carver.take<float>(static_cast<std::size_t>(rows * splits * kSparseDecodeHeadDim));
    partials->lse2 = carver.take<float>(static_cast<std::size_t>(rows * splits));
    partials->arrivals = carver.take<uint32_t>(static_cast<std::size_t>(pairs));
    partials->splits = static_cast<int>(splits);
    partials->split_tokens = split_tokens;
    decode::SparseSelectionBuffers buffers;
    buffers.anchor_max = carver.take<float>(static_cast<std::size_t>(rows * anchor_chunks));
    buffers.block_mass2 = carver.take<float>(static_cast<std::size_t>(rows * pick_blocks));
    buffers.keep_rows = carver.take<uint8_t>(static_cast<std::size_t>(rows * pick_blocks));
    if (selection != nullptr) *selection = buffers;
    return carver.bytes();
  }
};

Plan dense_plan(const DenseDecodeProblem& p, const DecodeOptions& options) {
  const DenseKvCache& c = p.cache;
  Plan plan;
  const int64_t tiles = ceil_div(c.capacity, decode::kDenseTileTokens);
  plan.units_per_split = units_per_split(tiles, decode::kDenseTileTokens, c.batch * c.num_kv_heads,
                                         heuristics::kDenseDecodeCtasPerSm, options.blocks_per_split,
                                         INT32_MAX / decode::kDenseTileTokens);
  plan.splits = std::max<int64_t>(1, ceil_div(tiles, plan.units_per_split));  // split 0 always runs
  plan.split_tokens = plan.units_per_split * decode::kDenseTileTokens;
  plan.rows = c.batch * p.num_q_heads;
  plan.pairs = c.batch * c.num_kv_heads;
  return plan;
}

Plan sparse_plan(const SparseDecodeProblem& p, const DecodeOptions& options) {
  const SparseKvCache& c = p.cache;
  Plan plan;
  plan.units_per_split = units_per_split(c.max_blocks, c.block_size, c.batch * c.num_kv_heads,
                                         heuristics::kSparseDecodeCtasPerSm, options.blocks_per_split,
                                         decode::kMaxBlocksPerSplit);
  plan.splits = std::max<int64_t>(1, ceil_div(c.max_blocks, plan.units_per_split));
  plan.split_tokens = plan.units_per_split * c.block_size;
  plan.rows = c.batch * p.num_q_heads;
  plan.pairs = c.batch * c.num_kv_heads;
  plan.anchor_chunks = decode::anchor_chunks(c.block_size);  // so that every delta plans alike
  if (p.selection == SparseSelection::kMass) plan.pick_blocks = c.max_blocks;
  if (heuristics::sparse_decode_plan_reads_all(p, options)) {
    plan.pass = decode::SparsePass::kAttendAll;
  } else {
    plan.pass = p.selection == SparseSelection::kDelta ? decode::SparsePass::kScanDelta
                                                       : decode::SparsePass::kScanMass;
  }
  return plan;
}

}  // namespace

std::size_t cuda_sparse_decode_workspace_size(const SparseDecodeProblem& problem,
                                              const DecodeOptions& options) {
  decode::SplitPartials partials;
  return sparse_plan(problem, options).carve(nullptr, &partials, nullptr);
}

Status cuda_sparse_decode(const SparseDecodeProblem& problem, void* workspace, cudaStream_t stream,
                          const DecodeOptions& options) {
  const SparseKvCache& c = problem.cache;
  if (c.batch == 0) return Status::ok();
  const Plan plan = sparse_plan(problem, options);
  decode::SplitPartials partials;
  decode::SparseSelectionBuffers selection;
  plan.carve(workspace, &partials, &selection);
  const int bps = static_cast<int>(plan.units_per_split);
  using decode::SparsePass;
  switch (plan.pass) {
    case SparsePass::kScanDelta:
      if (Status s = decode::launch_sparse_anchors(problem, selection.anchor_max,
                                                   partials.arrivals, stream);
          !s) {
        return s;
      }
      if (Status s = decode::launch_sparse_decode(problem, bps, SparsePass::kScanDelta, selection,
                                                  partials, true, stream);
          !s) {
        return s;
      }
      break;
    case SparsePass::kScanMass:
      if (c.max_blocks > decode::kMaxPickBlocks) {
        return Status(StatusCode::kUnsupported,
                      concat("sparse_decode with selection kMass on the GPU takes at most ",
                             decode::kMaxPickBlocks, " blocks per sequence, got cache.max_blocks ",
                             c.max_blocks));
      }
      if (Status s = decode::launch_sparse_decode(problem, bps, SparsePass::kScanMass, selection,
                                                  partials, false, stream);
          !s) {
        return s;
      }
      if (Status s = decode::launch_sparse_pick(problem, selection, stream); !s) return s;
      if (Status s = decode::launch_sparse_decode(problem, bps, SparsePass::kAttendPicked,
                                                  selection, partials, true, stream);
          !s) {
        return s;
      }
      break;
    default:
      if (Status s = cuda_common::launch_counter_reset(partials.arrivals, plan.pairs, stream);
          !s) {
        return s;
      }
      if (Status s = decode::launch_sparse_decode(problem, bps, SparsePass::kAttendAll, selection,
                                                  partials, true, stream);
          !s) {
        return s;
      }
      break;
  }
  return Status::ok();
}

std::size_t cuda_dense_decode_workspace_size(const DenseDecodeProblem& problem,
                                             const DecodeOptions& options) {
  decode::SplitPartials partials;
  return dense_plan(problem, options).carve(nullptr, &partials, nullptr);
}

Status cuda_dense_decode(const DenseDecodeProblem& problem, void* workspace, cudaStream_t stream,
                         const DecodeOptions& options) {
  const DenseKvCache& c = problem.cache;
  if (c.dtype != DType::kFloat16 && c.dtype != DType::kBFloat16) {
    return Status(StatusCode::kUnsupported,
                  concat("dense_decode on the GPU takes a float16 or bfloat16 cache, got "
                         "cache.dtype ",
                         dtype_name(c.dtype), " (float32 is for dense_decode_cpu)"));
  }
  if (c.batch == 0) return Status::ok();
  const Plan plan = dense_plan(problem, options);
  decode::SplitPartials partials;
  plan.carve(workspace, &partials, nullptr);
  if (Status s = cuda_common::launch_counter_reset(partials.arrivals, plan.pairs, stream); !s) {
    return s;
  }
  return decode::launch_dense_decode(problem, partials, stream);
}

}  // namespace litetopk::detail
