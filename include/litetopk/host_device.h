// LITETOPK_HD marks a small inline function of the public headers (fp8_e4m3.h,
// paged_kv_layout.h) that host code and CUDA kernels share: __host__ __device__ under nvcc, plain
// inline otherwise.
#pragma once

#if defined(__CUDACC__)
#define LITETOPK_HD __host__ __device__ __forceinline__
#else
#define LITETOPK_HD inline
#endif
