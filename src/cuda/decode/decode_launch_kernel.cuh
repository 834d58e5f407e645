// launch_kernel (decode_kernels.h): cuda_common::launch_dependent of a typed kernel (optional
// programmatic stream serialization), and dispatch_cache_type, the runtime-to-template dispatch
// of the decode kernels, for the decode .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/kernel_attributes.h"
#include "cuda/decode/decode_kernels.h"

namespace litetopk::decode {

template <typename Params>
Status launch_kernel(void (*kernel)(Params), dim3 grid, dim3 block, std::size_t smem_bytes,
                     bool dependent, cudaStream_t stream, const Params& params) {
  if (smem_bytes > 48 * 1024) {
    if (Status s = cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel),
                                                            static_cast<int>(smem_bytes));
        !s) {
      return s;
    }
  }
  void* args[] = {const_cast<Params*>(&params)};
  return cuda_common::launch_dependent(reinterpret_cast<const void*>(kernel), grid, block,
                                       smem_bytes, dependent, stream, args);
}

// Calls body(T{}, std::integral_constant<int, NT>{}) for the runtime cache dtype and group: T is
// __half for a float16 cache, else __nv_bfloat16 (the callers validated the dtype); NT, the
// 8-head MMA tiles of the group's query heads, is 2 for a group over 8 heads, else 1. A kernel
// that does not depend on the group ignores NT.
template <typename Body>
Status dispatch_cache_type(DType dtype, int group, Body&& body) {
  using Narrow = std::integral_constant<int, 1>;
  using Wide = std::integral_constant<int, 2>;
  const bool wide = group > 8;
  if (dtype == DType::kFloat16) return wide ? body(__half{}, Wide{}) : body(__half{}, Narrow{});
  return wide ? body(__nv_bfloat16{}, Wide{}) : body(__nv_bfloat16{}, Narrow{});
}

}  // namespace litetopk::decode
