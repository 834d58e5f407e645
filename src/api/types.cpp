#include "litetopk/types.h"

#include <cstring>

namespace litetopk {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16: return 2;
    case DType::kFloat16: return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
  }
  return "invalid";
}

bool parse_dtype(const char* name, DType* dtype) {
  struct Alias {
    const char* name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kFloat32}, {"fp32", DType::kFloat32},   {"f32", DType::kFloat32},
      {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16}, {"float16", DType::kFloat16},
      {"fp16", DType::kFloat16},     {"f16", DType::kFloat16},    {"half", DType::kFloat16},
  };
  for (const Alias& alias : kAliases) {
    if (std::strcmp(name, alias.name) == 0) {
      *dtype = alias.dtype;
      return true;
    }
  }
  return false;
}

}  // namespace litetopk
