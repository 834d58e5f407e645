#include "testkit/select_verify.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "litetopk/float_bits.h"

namespace litetopk::testkit {

namespace {

// The selection order: by value, larger first when `largest` (smaller first otherwise), with
// -0 below +0 (the two zeros are distinct values to the selection). NaN is never compared.
bool better(float a, float b, bool largest) {
  const bool a_below = a < b || (a == b && std::signbit(a) && !std::signbit(b));
  const bool b_below = b < a || (a == b && std::signbit(b) && !std::signbit(a));
  return largest ? b_below : a_below;
}

int64_t selected_count(const int32_t* row, int64_t k) {
  int64_t count = 0;
  while (count < k && row[count] != -1) ++count;
  return count;
}

// "" when row b of `got` (and of `got_values`, the [rows, k] values, when not null) agrees with
// `want`, else what differs.
std::string compare_row(const SelectProblem& p, int64_t b, const int32_t* got,
                        const void* got_values, const int32_t* want) {
  const int64_t stride = p.row_stride == 0 ? p.n : p.row_stride;
  const int64_t start = p.row_starts ? p.row_starts[b] : 0;
  const int64_t length = std::max<int64_t>(0, (p.row_ends ? p.row_ends[b] : p.n) - start);
  const auto raw = [&](int32_t index) {
    return float_bits::load_score(p.scores, p.dtype, b * stride + start + index);
  };
  const auto value = [&](int32_t index) { return float_bits::decode_score(raw(index), p.dtype); };
  std::ostringstream error;

  int64_t selectable = 0;
  for (int32_t i = 0; i < length; ++i) selectable += std::isnan(value(i)) ? 0 : 1;
  const int64_t count = selected_count(got, p.k);
  if (count != std::min(p.k, selectable)) {
    error << count << " entries selected, expected min(k, " << selectable
          << " non-NaN scores in the row)";
    return error.str();
  }
  for (int64_t j = 0; j < p.k; ++j) {
    if (j >= count && got[j] != -1) {
      error << "slot " << j << " holds " << got[j] << " after -1 padding began at slot " << count;
      return error.str();
    }
    if (j < count && (got[j] < 0 || got[j] >= length)) {
      error << "slot " << j << " holds index " << got[j] << ", outside the row's [0, " << length
            << ")";
      return error.str();
    }
    if (j < count && std::isnan(value(got[j]))) {
      error << "slot " << j << " selects NaN at index " << got[j];
      return error.str();
    }
    if (got_values == nullptr) continue;
    const uint32_t got_raw = float_bits::load_score(got_values, p.dtype, b * p.k + j);
    if (j < count && got_raw != raw(got[j])) {
      error << "slot " << j << " holds value bits " << got_raw << ", the score at index "
            << got[j] << " has bits " << raw(got[j]);
      return error.str();
    }
    if (j >= count && !std::isnan(float_bits::decode_score(got_raw, p.dtype))) {
      error << "slot " << j << " is padding, its value must be NaN";
      return error.str();
    }
  }
  const int64_t want_count = selected_count(want, p.k);
  if (count != want_count) {
    error << count << " entries selected, the reference selects " << want_count;
    return error.str();
  }

  std::vector<int32_t> got_set(got, got + count);
  std::vector<int32_t> want_set(want, want + count);
  std::sort(got_set.begin(), got_set.end());
  std::sort(want_set.begin(), want_set.end());
  const auto duplicate = std::adjacent_find(got_set.begin(), got_set.end());
  if (duplicate != got_set.end()) {
    error << "index " << *duplicate << " is selected twice";
    return error.str();
  }
  if (p.deterministic && got_set != want_set) {
    error << "deterministic: the index set differs from the reference's";
    return error.str();
  }
  if (p.sorted) {
    for (int64_t j = 1; j < count; ++j) {
      const float prev = value(got[j - 1]);
      const float cur = value(got[j]);
      const bool tie = !better(cur, prev, p.largest) && !better(prev, cur, p.largest);
      if (better(cur, prev, p.largest) || (tie && got[j] < got[j - 1])) {
        error << "sorted: slot " << j << " (index " << got[j] << ", value " << value(got[j])
              << ") should come before slot " << j - 1 << " (index " << got[j - 1] << ", value "
              << value(got[j - 1]) << ")";
        return error.str();
      }
    }
  }

  // The selected values, best first, must be the reference's bit for bit.
  std::vector<float> got_sorted;
  std::vector<float> want_sorted;
  for (int64_t j = 0; j < count; ++j) {
    got_sorted.push_back(value(got[j]));
    want_sorted.push_back(value(want[j]));
  }
  const auto best_first = [&](float x, float y) { return better(x, y, p.largest); };
  std::sort(got_sorted.begin(), got_sorted.end(), best_first);
  std::sort(want_sorted.begin(), want_sorted.end(), best_first);
  const auto same_bits = [](float x, float y) {
    return float_bits::f32_bits(x) == float_bits::f32_bits(y);
  };
  const auto differ =
      std::mismatch(got_sorted.begin(), got_sorted.end(), want_sorted.begin(), same_bits);
  if (differ.first != got_sorted.end()) {
    error << "selected value #" << differ.first - got_sorted.begin() + 1 << " (best first) is "
          << *differ.first << ", the reference's is " << *differ.second;
    return error.str();
  }
  return "";
}

}  // namespace

Status reference_topk(const SelectProblem& problem, int64_t rows, std::vector<int32_t>* indices) {
  indices->assign(static_cast<std::size_t>(rows * problem.k), 0);
  SelectProblem subset = problem;
  subset.batch = rows;
  subset.indices = indices->data();
  subset.values = nullptr;
  return select_topk_cpu(subset, CpuSelectAlgo::kReference);
}

std::string compare_topk(const SelectProblem& problem, const int32_t* candidate,
                         const int32_t* reference, int64_t rows, const void* candidate_values) {
  for (int64_t b = 0; b < rows; ++b) {
    const std::string error = compare_row(problem, b, candidate + b * problem.k, candidate_values,
                                          reference + b * problem.k);
    if (!error.empty()) return "row " + std::to_string(b) + ": " + error;
  }
  return "";
}

}  // namespace litetopk::testkit
