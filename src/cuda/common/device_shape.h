// The properties of the current device that the launch planners read.
#pragma once

#include "litetopk/status.h"

namespace litetopk::cuda_common {

struct DeviceShape {
  int sm_count;
};

// The current device's shape (two runtime attribute queries; no synchronization).
Status current_device_shape(DeviceShape* shape);

}  // namespace litetopk::cuda_common
