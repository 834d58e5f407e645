// Element types and the stream type shared by the public API.
#pragma once

#include <cstddef>
#include <cstdint>

// The CUDA runtime's own declaration of cudaStream_t, repeated so that this header needs no CUDA
// headers (a redeclaration of the same typedef is legal C++).
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace litetopk {

enum class DType : int {
  kFloat32 = 0,
  kBFloat16 = 1,
  kFloat16 = 2,
};

// Bytes per element; 0 for a value outside the enum.
std::size_t dtype_size(DType dtype);
// "float32", "bfloat16", "float16", or "invalid".
const char* dtype_name(DType dtype);
// Parses "float32"/"fp32"/"f32", "bfloat16"/"bf16", "float16"/"fp16"/"half"; false when unknown.
bool parse_dtype(const char* name, DType* dtype);

}  // namespace litetopk
