#include "litetopk/device.h"

namespace litetopk {

BuildInfo build_info() {
  BuildInfo info;
  info.version = "0.1.0";
#if defined(LITETOPK_WITH_CUDA)
  info.cuda_compiled = true;
  info.cuda_targets = "sm_90a";
#else
  info.cuda_compiled = false;
#endif
  return info;
}

}  // namespace litetopk
