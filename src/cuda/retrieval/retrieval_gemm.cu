// The chunk GEMM of the unfused retrieval path through cuBLAS, and the per-device handles.
//
// 1. prepare_blas (at plan time) creates the current device's handle once, under a lock.
// 2. chunk_scores binds the stream, then the caller's workspace (cublasSetStream resets the
//    workspace, so the order matters): cuBLAS allocates nothing and the call can be captured.
// 3. One cublasGemmEx, C = A^T B in cuBLAS's column-major terms: A is the corpus chunk seen as
//    [dim, rows] (lda dim), B the queries seen as [dim, batch] (ldb dim), and C [rows, batch]
//    (ldc rows) is the row-major [batch, rows] score matrix. fp16 / bf16 inputs, fp32 compute
//    and output.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

#include "api/format.h"
#include "cuda/common/cuda_check.h"
#include "cuda/retrieval/retrieval_kernels.h"

namespace litetopk::cuda_retrieval {

namespace {

constexpr int kMaxDevices = 64;

struct Handles {
  std::mutex lock;
  std::array<cublasHandle_t, kMaxDevices> handles{};
};

Handles& handles() {
  static Handles instance;
  return instance;
}

Status blas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status(StatusCode::kCudaError,
                detail::concat(what, ": ", cublasGetStatusName(status), " (",
                               cublasGetStatusString(status), ")"));
}

Status current_device(int* device) {
  LITETOPK_CUDA_TRY(cudaGetDevice(device));
  if (*device < 0 || *device >= kMaxDevices) {
    return Status(StatusCode::kUnsupported,
                  detail::concat("retrieval_topk supports devices 0 to ", kMaxDevices - 1,
                                 ", got device ", *device));
  }
  return Status::ok();
}

}  // namespace

Status prepare_blas(int* device) {
  if (Status status = current_device(device); !status) return status;
  Handles& all = handles();
  std::lock_guard<std::mutex> guard(all.lock);
  if (all.handles[*device] == nullptr) {
    cublasHandle_t handle = nullptr;
    if (Status status = blas_status(cublasCreate(&handle), "cublasCreate"); !status) {
      return status;
    }
    all.handles[*device] = handle;
  }
  return Status::ok();
}

Status chunk_scores(const void* queries, const void* corpus, DType dtype, int64_t batch,
                    int64_t rows, int64_t dim, float* scores, void* blas_workspace,
                    cudaStream_t stream) {
  int device = 0;
  if (Status status = current_device(&device); !status) return status;
  Handles& all = handles();
  cublasHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> guard(all.lock);
    handle = all.handles[device];
  }
  if (handle == nullptr) {
    return Status(StatusCode::kInternal,
                  detail::concat("no cuBLAS handle on device ", device,
                                 ": launch on the device the plan was made on"));
  }
  if (Status s = blas_status(cublasSetStream(handle, stream), "cublasSetStream"); !s) return s;
  if (Status s = blas_status(cublasSetWorkspace(handle, blas_workspace, kBlasWorkspaceBytes),
                             "cublasSetWorkspace");
      !s) {
    return s;
  }
  const cudaDataType_t type = dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const int m = static_cast<int>(rows);
  const int n = static_cast<int>(batch);
  const int k = static_cast<int>(dim);
  return blas_status(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, corpus, type,
                                  k, queries, type, k, &beta, scores, CUDA_R_32F, m,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

}  // namespace litetopk::cuda_retrieval
