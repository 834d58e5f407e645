// Counter-based random numbers for the tool's generated inputs: element i of a stream is a pure
// function of (stream base, i), so inputs are generated in parallel and are the same bytes for any
// thread count. A stream base is hash64 of the seed (and of a stream tag, to draw several
// independent arrays from one seed); element i draws from hash64(base + i).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "testkit/parallel_for.h"

namespace litetopk::testkit {

// SplitMix64's output function.
inline uint64_t hash64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1) from 32 random bits.
inline double uniform01(uint32_t bits) { return (bits + 0.5) * 0x1p-32; }

// N(0, 1) by Box-Muller on the two halves of one hash.
inline double standard_normal(uint64_t h) {
  constexpr double kTwoPi = 6.283185307179586;
  const double radius = std::sqrt(-2.0 * std::log(uniform01(static_cast<uint32_t>(h))));
  return radius * std::cos(kTwoPi * uniform01(static_cast<uint32_t>(h >> 32)));
}

// Calls fill(begin, end) on chunks of [0, count) over all hardware threads.
template <typename Fill>
void parallel_fill(int64_t count, Fill fill) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  parallel_for(chunks, [&](int64_t c) {
    fill(c * kChunk, std::min(count, (c + 1) * kChunk));
  });
}

}  // namespace litetopk::testkit
