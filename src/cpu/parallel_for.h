// A minimal thread pool for the CPU backend: parallel_for over an index range.
#pragma once

#include <cstdint>
#include <functional>

namespace litetopk::cpu {

// Hardware threads (at least 1).
int hardware_threads();

// Calls fn(i) for every i in [0, count) on up to `num_threads` threads (dynamic assignment, one i
// at a time). The first exception thrown by fn is rethrown after all threads have joined.
void parallel_for(int64_t count, int num_threads, const std::function<void(int64_t)>& fn);

}  // namespace litetopk::cpu
