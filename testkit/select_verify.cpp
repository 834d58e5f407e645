#include "testkit/select_verify.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "formats/float_bits.h"
#include "formats/score_keys.h"
#include "testkit/select_workload.h"

namespace litetopk::testkit {

namespace {

int64_t selected_count(const int32_t* row, int64_t k) {
  int64_t count = 0;
  while (count < k && row[count] != -1) ++count;
  return count;
}

// "" when row b of `got` agrees with `want`, else what differs.
std::string compare_row(const SelectProblem& p, int64_t b, const int32_t* got,
                        const int32_t* want) {
  const int64_t stride = p.row_stride == 0 ? p.n : p.row_stride;
  const int64_t start = p.row_starts ? p.row_starts[b] : 0;
  const int64_t length = (p.row_ends ? p.row_ends[b] : p.n) - start;
  const auto value = [&](int32_t index) {
    return score_as_float(p.scores, p.dtype, b * stride + start + index);
  };
  // The selection order of formats/score_keys.h: larger key = better, NaN = 0.
  const auto key = [&](int32_t index) {
    return keys::key_from_f32_bits(float_bits::f32_bits(value(index)), p.largest);
  };
  std::ostringstream error;

  const int64_t count = selected_count(got, p.k);
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
    if (j < count && key(got[j]) == 0) {
      error << "slot " << j << " selects NaN at index " << got[j];
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
      const uint32_t prev = key(got[j - 1]);
      const uint32_t cur = key(got[j]);
      if (cur > prev || (cur == prev && got[j] < got[j - 1])) {
        error << "sorted: slot " << j << " (index " << got[j] << ", value " << value(got[j])
              << ") should come before slot " << j - 1 << " (index " << got[j - 1] << ", value "
              << value(got[j - 1]) << ")";
        return error.str();
      }
    }
  }

  // Equal keys are equal values, bit for bit.
  std::vector<uint32_t> got_keys;
  std::vector<uint32_t> want_keys;
  for (int64_t j = 0; j < count; ++j) {
    got_keys.push_back(key(got[j]));
    want_keys.push_back(key(want[j]));
  }
  std::sort(got_keys.begin(), got_keys.end(), std::greater<>());
  std::sort(want_keys.begin(), want_keys.end(), std::greater<>());
  const auto differ = std::mismatch(got_keys.begin(), got_keys.end(), want_keys.begin());
  if (differ.first != got_keys.end()) {
    const auto rank = differ.first - got_keys.begin();
    const auto as_value = [&](uint32_t k) {
      return float_bits::f32_from_bits(keys::f32_bits_from_key(k, p.largest));
    };
    error << "selected value #" << rank + 1 << " (best first) is " << as_value(*differ.first)
          << ", the reference's is " << as_value(*differ.second);
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
                         const int32_t* reference, int64_t rows) {
  for (int64_t b = 0; b < rows; ++b) {
    const std::string error =
        compare_row(problem, b, candidate + b * problem.k, reference + b * problem.k);
    if (!error.empty()) return "row " + std::to_string(b) + ": " + error;
  }
  return "";
}

}  // namespace litetopk::testkit
