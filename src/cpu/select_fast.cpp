// CPU fast selection: rows are spread over threads (chunks of rows through parallel_for; when
// there are fewer rows than threads, each long row is cut into segments filtered in parallel and
// merged). Each row or segment is one streaming pass with a rising gate:
// 1. The gate starts at keys::kAdmitAllValid, which drops NaN. An entry's composite (key, ~index)
//    is appended to the thread's candidate buffer only when it is >= the gate.
// 2. When the buffer holds `capacity` = max(4k, 256) candidates, nth_element keeps exactly the best
//    k and the gate rises to the k-th best composite: an entry below it can never reach the top k,
//    because k better candidates are already held. Composites are distinct per position, so the
//    result is exact and ties at the k-th value go to the smallest indices (deterministic for free;
//    the non-deterministic mode uses the same logic).
// 3. At the end, nth_element cuts the buffer to k (for a split row: the union of its segments'
//    best k), then a sort orders it if `sorted`. A segment's best k contain every entry of the
//    row's best k that lies in the segment, so the merge is exact.
// On random data only about k * ln(len / k) entries pass the gate, so the pass is a key compare
// per entry plus a few nth_element calls on a buffer that stays in cache.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "cpu/cpu_algos.h"
#include "cpu/parallel_for.h"
#include "cpu/row_access.h"

namespace litetopk::cpu {

namespace {

constexpr int64_t kMinCapacity = 256;
constexpr int64_t kCapacityPerK = 4;
constexpr int64_t kMinSegment = int64_t{1} << 16;  // elements per segment of a split row

// Candidates kept in the buffer of one row: k <= INT32_MAX, so 4k cannot overflow; never more
// than a row holds.
int64_t buffer_capacity(const SelectProblem& p) {
  return std::min(std::max(kCapacityPerK * p.k, kMinCapacity), p.n);
}

// Keeps the best min(count, k) composites of buf[0, count) in front; returns how many.
int64_t keep_best(uint64_t* buf, int64_t count, int64_t k) {
  if (count <= k) return count;
  std::nth_element(buf, buf + (k - 1), buf + count, std::greater<uint64_t>());
  return k;
}

// Leaves the best `count` (<= k) composites of the row in buf[0, count), unordered. Element i of
// `row` is position first_index + i of the row.
template <typename Traits, bool kLargest>
int64_t filter_row(const RowSpan& row, int64_t k, uint64_t* buf, int64_t capacity,
                   int64_t first_index) {
  const int64_t cap = std::min(capacity, row.len);
  uint64_t gate = keys::kAdmitAllValid;
  int64_t count = 0;
  for (int64_t i = 0; i < row.len; ++i) {
    const uint32_t key = Traits::key(load_raw<Traits>(row.data, i), kLargest);
    const uint64_t composite = keys::make_composite(key, static_cast<uint32_t>(first_index + i));
    if (composite >= gate) {
      buf[count++] = composite;
      // cap < row.len implies cap = capacity > k; cap == row.len ends the row anyway.
      if (count == cap && count > k) {
        count = keep_best(buf, count, k);
        gate = buf[k - 1];  // later positions have other composites, so ">=" means ">"
      }
    }
  }
  return keep_best(buf, count, k);
}

// Orders the row's best (when sorted) and writes them with -1 padding.
template <typename Traits>
void finish_row(const SelectProblem& p, int64_t b, uint64_t* buf, int64_t count) {
  if (p.sorted) std::sort(buf, buf + count, std::greater<uint64_t>());
  write_row<Traits>(p, b, buf, count);
}

template <typename Traits, bool kLargest>
void select_rows(const SelectProblem& p, int threads) {
  const int64_t capacity = buffer_capacity(p);
  const int64_t segments =
      p.batch < threads
          ? std::max<int64_t>(1, std::min<int64_t>(threads / p.batch, p.n / kMinSegment))
          : 1;
  if (segments == 1) {
    // About 16 chunks per thread: balances uneven ranges without a task per tiny row.
    const int64_t chunk = std::max<int64_t>(1, p.batch / (int64_t{threads} * 16));
    parallel_for((p.batch + chunk - 1) / chunk, threads, [&](int64_t c) {
      std::vector<uint64_t> buffer(static_cast<std::size_t>(capacity));
      for (int64_t b = c * chunk; b < std::min(p.batch, (c + 1) * chunk); ++b) {
        const int64_t count =
            filter_row<Traits, kLargest>(row_span(p, b), p.k, buffer.data(), capacity, 0);
        finish_row<Traits>(p, b, buffer.data(), count);
      }
    });
    return;
  }
  std::vector<std::vector<uint64_t>> found(static_cast<std::size_t>(p.batch * segments));
  parallel_for(p.batch * segments, threads, [&](int64_t item) {
    const RowSpan row = row_span(p, item / segments);
    const int64_t s = item % segments;
    const int64_t lo = row.len * s / segments;
    const int64_t hi = row.len * (s + 1) / segments;
    std::vector<uint64_t>& buffer = found[static_cast<std::size_t>(item)];
    buffer.resize(static_cast<std::size_t>(capacity));
    const RowSpan part{static_cast<const unsigned char*>(row.data) +
                           lo * static_cast<int64_t>(dtype_size(p.dtype)),
                       hi - lo};
    buffer.resize(static_cast<std::size_t>(
        filter_row<Traits, kLargest>(part, p.k, buffer.data(), capacity, lo)));
  });
  for (int64_t b = 0; b < p.batch; ++b) {
    std::vector<uint64_t> merged;
    for (int64_t s = 0; s < segments; ++s) {
      const std::vector<uint64_t>& part = found[static_cast<std::size_t>(b * segments + s)];
      merged.insert(merged.end(), part.begin(), part.end());
    }
    const int64_t count = keep_best(merged.data(), static_cast<int64_t>(merged.size()), p.k);
    finish_row<Traits>(p, b, merged.data(), count);
  }
}

}  // namespace

void select_fast_rows(const SelectProblem& p, int num_threads) {
  visit_dtype(p.dtype, [&](auto traits) {
    using Traits = decltype(traits);
    if (p.largest) {
      select_rows<Traits, true>(p, num_threads);
    } else {
      select_rows<Traits, false>(p, num_threads);
    }
  });
}

}  // namespace litetopk::cpu
