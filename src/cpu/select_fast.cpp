// CPU fast selection: rows are spread over threads (each takes chunks of rows from a shared
// counter); each row is one streaming pass with a rising gate:
// 1. The gate starts at keys::kAdmitAllValid, which drops NaN. An entry's composite (key, ~index)
//    is appended to the thread's candidate buffer only when it is >= the gate.
// 2. When the buffer holds `capacity` = max(4k, 256) candidates, nth_element keeps exactly the best
//    k and the gate rises to the k-th best composite: an entry below it can never reach the top k,
//    because k better candidates are already held. Composites are distinct per position, so the
//    result is exact and ties at the k-th value go to the smallest indices (deterministic for free;
//    the non-deterministic mode uses the same logic).
// 3. At the end of the row, nth_element cuts the buffer to k, then a sort orders it if `sorted`.
// On random data only about k * ln(len / k) entries pass the gate, so the pass is a key compare
// per entry plus a few nth_element calls on a buffer that stays in cache.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/cpu_algos.h"
#include "cpu/row_access.h"

namespace litetopk::cpu {

namespace {

constexpr int64_t kMinCapacity = 256;
constexpr int64_t kCapacityPerK = 4;

// Candidates kept in the buffer of one row: k <= INT32_MAX, so 4k cannot overflow; never more
// than a row holds.
int64_t buffer_capacity(const SelectProblem& p) {
  return std::min(std::max(kCapacityPerK * p.k, kMinCapacity), p.n);
}

// Leaves the best `count` (<= k) composites of the row in buf[0, count), unordered.
template <typename Traits, bool kLargest>
int64_t filter_row(const RowSpan& row, int64_t k, uint64_t* buf, int64_t capacity) {
  const int64_t cap = std::min(capacity, row.len);
  uint64_t gate = keys::kAdmitAllValid;
  int64_t count = 0;
  for (int64_t i = 0; i < row.len; ++i) {
    const uint32_t key = Traits::key(load_raw<Traits>(row.data, i), kLargest);
    const uint64_t composite = keys::make_composite(key, static_cast<uint32_t>(i));
    if (composite >= gate) {
      buf[count++] = composite;
      // cap < row.len implies cap = capacity > k; cap == row.len ends the row anyway.
      if (count == cap && count > k) {
        std::nth_element(buf, buf + (k - 1), buf + count, std::greater<uint64_t>());
        count = k;
        gate = buf[k - 1];  // later positions have other composites, so ">=" means ">"
      }
    }
  }
  if (count > k) {
    std::nth_element(buf, buf + (k - 1), buf + count, std::greater<uint64_t>());
    count = k;
  }
  return count;
}

template <typename Traits, bool kLargest>
void run_rows(const SelectProblem& p, std::atomic<int64_t>& next_row, int64_t chunk,
              std::vector<uint64_t>& buffer) {
  const int64_t capacity = static_cast<int64_t>(buffer.size());
  for (;;) {
    const int64_t first = next_row.fetch_add(chunk, std::memory_order_relaxed);
    if (first >= p.batch) return;
    const int64_t last = std::min(p.batch, first + chunk);
    for (int64_t b = first; b < last; ++b) {
      const int64_t count =
          filter_row<Traits, kLargest>(row_span(p, b), p.k, buffer.data(), capacity);
      if (p.sorted) std::sort(buffer.data(), buffer.data() + count, std::greater<uint64_t>());
      write_row<Traits>(p, b, buffer.data(), count);
    }
  }
}

}  // namespace

void select_fast_rows(const SelectProblem& p, int num_threads) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(num_threads, p.batch));
  // About 16 chunks per thread: balances uneven ranges without an atomic per tiny row.
  const int64_t chunk = std::max<int64_t>(1, p.batch / (threads * 16));
  const int64_t capacity = buffer_capacity(p);
  std::atomic<int64_t> next_row{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  auto work = [&]() {
    try {
      std::vector<uint64_t> buffer(static_cast<std::size_t>(capacity));
      visit_dtype(p.dtype, [&](auto traits) {
        using Traits = decltype(traits);
        if (p.largest) {
          run_rows<Traits, true>(p, next_row, chunk, buffer);
        } else {
          run_rows<Traits, false>(p, next_row, chunk, buffer);
        }
      });
    } catch (...) {
      next_row.store(p.batch, std::memory_order_relaxed);  // the others stop at their next chunk
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };

  std::vector<std::thread> workers;
  try {
    workers.reserve(static_cast<std::size_t>(threads - 1));
    for (int64_t t = 1; t < threads; ++t) workers.emplace_back(work);
  } catch (const std::exception&) {
    // Fewer threads than asked: the ones already started and this one share all rows.
  }
  work();
  for (std::thread& worker : workers) worker.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace litetopk::cpu
