// select_scored_rows (see scored_rows_topk.h).
#include "cpu/scored_rows_topk.h"

#include <algorithm>
#include <vector>

#include "api/format.h"
#include "cpu/parallel_for.h"
#include "litetopk/select.h"

namespace litetopk::cpu {

namespace {

// Keys scored per work item: small enough to spread a few long rows over all threads.
constexpr int64_t kKeysPerItem = 4096;

// Keys [begin, end) of chunk row `row`.
struct WorkItem {
  int64_t row, begin, end;
};

}  // namespace

Status select_scored_rows(const ScoredRows& rows, int64_t k, int32_t* indices, float* values,
                          int64_t max_chunk_floats, int num_threads) {
  if (max_chunk_floats < 1) {
    return detail::invalid_argument("max_chunk_floats must be >= 1, got ", max_chunk_floats);
  }
  if (num_threads < 1) {
    return detail::invalid_argument("num_threads must be >= 1, got ", num_threads);
  }
  std::vector<float> buffer;
  std::vector<int32_t> lengths;
  std::vector<WorkItem> items;
  for (int64_t r0 = 0; r0 < rows.rows;) {
    // Grow the chunk while [rows, widest row] fits the budget (always at least one row).
    int64_t r1 = r0, width = 0;
    while (r1 < rows.rows) {
      const int64_t new_width = std::max(width, rows.length(r1));
      if (r1 > r0 && (r1 + 1 - r0) * new_width > max_chunk_floats) break;
      width = new_width;
      ++r1;
    }
    const int64_t chunk_rows = r1 - r0;
    buffer.assign(static_cast<std::size_t>(std::max<int64_t>(1, chunk_rows * width)), 0.0f);
    lengths.assign(static_cast<std::size_t>(chunk_rows), 0);
    items.clear();
    for (int64_t i = 0; i < chunk_rows; ++i) {
      const int64_t length = rows.length(r0 + i);
      lengths[i] = static_cast<int32_t>(length);
      for (int64_t s = 0; s < length; s += kKeysPerItem) {
        items.push_back({i, s, std::min(length, s + kKeysPerItem)});
      }
    }
    parallel_for(static_cast<int64_t>(items.size()), num_threads, [&](int64_t i) {
      const WorkItem& w = items[i];
      rows.score(r0 + w.row, w.begin, w.end, buffer.data() + w.row * width + w.begin);
    });

    SelectProblem select;
    select.scores = buffer.data();
    select.dtype = DType::kFloat32;
    select.batch = chunk_rows;
    select.n = width;
    select.row_stride = width;
    select.row_ends = lengths.data();
    select.k = k;
    select.indices = indices + r0 * k;
    select.values = values ? values + r0 * k : nullptr;
    Status status = select_topk_cpu(select, CpuSelectAlgo::kFast, num_threads);
    if (!status) return status;
    r0 = r1;
  }
  return Status::ok();
}

}  // namespace litetopk::cpu
