// cuTensorMapEncodeTiled through cudaGetDriverEntryPointByVersion (see tensor_map_sm90.h).
#include "cuda/common/tensor_map_sm90.h"

#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <string>

#include "cuda/common/cuda_check.h"

namespace litetopk::detail {
namespace {

Status tensor_map_encoder(PFN_cuTensorMapEncodeTiled_v12000* encoder) {
  static PFN_cuTensorMapEncodeTiled_v12000 cached = nullptr;
  if (cached == nullptr) {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LITETOPK_CUDA_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000,
                                                       cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
      return Status(StatusCode::kCudaError, "the driver has no cuTensorMapEncodeTiled");
    }
    cached = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }
  *encoder = cached;
  return Status::ok();
}

Status encode(const void* base, cuuint32_t rank, const cuuint64_t* dims, const cuuint64_t* strides,
              const cuuint32_t* box, CUtensorMap* map) {
  PFN_cuTensorMapEncodeTiled_v12000 encoder = nullptr;
  if (Status s = tensor_map_encoder(&encoder); !s) return s;
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result = encoder(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, rank, const_cast<void*>(base),
                                  dims, strides, box, element_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    std::string shape;
    for (cuuint32_t i = 0; i < rank; ++i) {
      shape += (i ? " x " : "") + std::to_string(dims[i]) + " (box " + std::to_string(box[i]) + ")";
    }
    return Status(StatusCode::kCudaError, "cuTensorMapEncodeTiled failed with CUresult " +
                                              std::to_string(result) + " for " + shape);
  }
  return Status::ok();
}

}  // namespace

Status make_row_tile_map(const void* base, uint64_t rows, uint32_t box_rows, CUtensorMap* map) {
  constexpr uint64_t kRowBytes = 128;
  const cuuint64_t dims[2] = {kRowBytes, rows};
  const cuuint64_t strides[1] = {kRowBytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kRowBytes), box_rows};
  return encode(base, 2, dims, strides, box, map);
}

Status make_matrix_tile_map(const void* base, uint64_t rows, uint64_t row_bytes, uint32_t box_rows,
                            CUtensorMap* map) {
  constexpr cuuint32_t kBoxBytes = 128;
  const cuuint64_t dims[2] = {row_bytes, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {kBoxBytes, box_rows};
  return encode(base, 2, dims, strides, box, map);
}

Status make_paged_block_map(const void* base, uint64_t blocks, uint64_t block_bytes,
                            CUtensorMap* map) {
  constexpr uint64_t kRowBytes = 128;
  constexpr uint64_t kRows = 64;
  const cuuint64_t dims[3] = {kRowBytes, kRows, blocks};
  const cuuint64_t strides[2] = {kRowBytes, block_bytes};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(kRowBytes), static_cast<cuuint32_t>(kRows), 1};
  return encode(base, 3, dims, strides, box, map);
}

}  // namespace litetopk::detail
