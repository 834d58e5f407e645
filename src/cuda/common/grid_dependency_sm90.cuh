// Thin PTX wrappers for programmatic dependent launch (sm_90): a grid launched with the
// programmatic stream serialization attribute may start while the grid before it runs.
#pragma once

namespace litetopk::sm90 {

// Waits for the grids this one depends on; lets the grids that depend on this one start their
// prologue.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void allow_dependent_grids() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace litetopk::sm90
