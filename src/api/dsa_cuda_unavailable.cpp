// The stand-in for the CUDA dsa_prefill backend in a build without CUDA.
#include "api/dsa_backend.h"

namespace litetopk::detail {

Status cuda_dsa_kv_rows(const int32_t*, int32_t*, int64_t, int64_t, int64_t, cudaStream_t) {
  return Status(StatusCode::kNotCompiled,
                "this litetopk build has no CUDA backend (configure with LITETOPK_ENABLE_CUDA=ON)");
}

}  // namespace litetopk::detail
