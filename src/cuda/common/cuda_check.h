// Turns CUDA runtime errors into litetopk::Status.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "litetopk/status.h"

namespace litetopk::detail {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return Status(StatusCode::kCudaError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace litetopk::detail

// Returns a kCudaError Status from the enclosing function when `expr` fails.
#define LITETOPK_CUDA_TRY(expr)                                                   \
  do {                                                                           \
    const cudaError_t litetopk_err_ = (expr);                                    \
    if (litetopk_err_ != cudaSuccess) return ::litetopk::detail::cuda_status(litetopk_err_, #expr); \
  } while (0)
