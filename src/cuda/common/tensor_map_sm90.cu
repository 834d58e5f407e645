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

}  // namespace

Status make_row_tile_map(const void* base, uint64_t rows, uint32_t box_rows, CUtensorMap* map) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (Status s = tensor_map_encoder(&encode); !s) return s;
  constexpr uint64_t kRowBytes = 128;
  const cuuint64_t dims[2] = {kRowBytes, rows};
  const cuuint64_t strides[1] = {kRowBytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kRowBytes), box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base),
                                 dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return Status(StatusCode::kCudaError,
                  "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(result) +
                      " (rows " + std::to_string(rows) + ", box rows " + std::to_string(box_rows) +
                      ")");
  }
  return Status::ok();
}

}  // namespace litetopk::detail
