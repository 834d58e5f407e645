// A threaded loop for the testkit's generators and checkers: the library keeps its own thread
// pool internal, so the testkit runs its host work on plain std::threads.
#pragma once

#include <cstdint>
#include <functional>

namespace litetopk::testkit {

// Calls fn(i) for every i in [0, count) on all hardware threads (each thread takes the next i).
// The first exception thrown by fn is rethrown once every thread has joined.
void parallel_for(int64_t count, const std::function<void(int64_t)>& fn);

}  // namespace litetopk::testkit
