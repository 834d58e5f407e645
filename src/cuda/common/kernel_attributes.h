// Per-kernel launch attributes set (and occupancies queried) once per kernel and device instead of
// before every launch: cudaFuncSetAttribute and the occupancy query cost host microseconds per
// call. And the cooperative launch that grid-wide barriers need, and the clustered one.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "litetopk/status.h"

namespace litetopk::cuda_common {

// Lets `kernel` (a __global__ function) launch with `bytes` of dynamic shared memory on the current
// device: cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) the
// first time a kernel needs that many bytes on a device, nothing after. Thread-safe.
Status allow_dynamic_shared_memory(const void* kernel, int bytes);

// The blocks of `kernel` (launched with `threads` threads and `smem` bytes of dynamic shared
// memory, already allowed) that the current device holds at once: the occupancy query run once per
// (kernel, device, threads, smem), remembered after.
Status resident_blocks(const void* kernel, int threads, int smem, int* blocks);

// Launches `kernel` as a cooperative grid (every block resident at once, or the launch fails with
// cudaErrorCooperativeLaunchTooLarge instead of hanging): what grid-wide barriers need. With
// `dependent`, also with programmatic stream serialization (as launch_dependent).
Status launch_cooperative(const void* kernel, dim3 grid, int threads, int smem, cudaStream_t stream,
                          void** args, bool dependent = false);

// The clusters of `cluster` blocks of `kernel` (launched with `threads` threads and `smem` bytes of
// dynamic shared memory, already allowed) the current device holds at once; 0 when none fits. The
// query (cudaOccupancyMaxActiveClusters) runs once per (kernel, device, threads, smem, cluster).
// Clusters of more than 8 blocks are allowed on the kernel first (a non-portable size).
Status resident_clusters(const void* kernel, int threads, int smem, int cluster, int* clusters);

// Launches `kernel` as a grid of thread-block clusters of `cluster` blocks along x.
Status launch_clustered(const void* kernel, dim3 grid, int threads, int smem, int cluster,
                        cudaStream_t stream, void** args);

// Launches `kernel` with `args`, with programmatic stream serialization when `dependent` (the
// kernel waits for the grid before it with griddepcontrol.wait, grid_dependency_sm90.cuh).
Status launch_dependent(const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                        bool dependent, cudaStream_t stream, void** args);

}  // namespace litetopk::cuda_common
