// LITETOPK_HD: a small function shared by host code and CUDA kernels (the CPU reference and tests
// call the same code the kernels inline).
#pragma once

#if defined(__CUDACC__)
#define LITETOPK_HD __host__ __device__ __forceinline__
#else
#define LITETOPK_HD inline
#endif
