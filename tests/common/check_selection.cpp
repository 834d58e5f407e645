// check_selection: verifies one select_topk result against the reference result.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/select_testing.h"
#include "formats/score_keys.h"

namespace litetopk::testing {

namespace {

struct RowContext {
  const SelectCase& c;
  int64_t row;
  const void* data;  // element `start` of the row
  int64_t len;

  ::testing::AssertionResult fail(int64_t slot, const std::string& what) const {
    auto result = ::testing::AssertionFailure() << "case " << c.name << " row " << row;
    if (slot >= 0) result << " slot " << slot;
    return result << ": " << what;
  }
  uint32_t raw(int32_t index) const { return load_score(data, c.dtype, index); }
  uint32_t key(int32_t index) const { return score_key(raw(index), c.dtype, c.largest); }
};

// Shape checks of one row's output (the result or the reference): valid prefix, padding, bounds,
// values.
::testing::AssertionResult check_row_shape(const RowContext& r, const char* who,
                                           const int32_t* indices, const void* values,
                                           int64_t row_offset, int64_t expected_count) {
  const SelectCase& c = r.c;
  for (int64_t s = 0; s < c.k; ++s) {
    const int32_t index = indices[s];
    if (s < expected_count) {
      if (index < 0 || index >= r.len) {
        return r.fail(s, std::string(who) + " index " + std::to_string(index) + " outside [0, " +
                             std::to_string(r.len) + ") (expected " +
                             std::to_string(expected_count) + " valid slots)");
      }
      if (r.key(index) == 0) {
        return r.fail(s, std::string(who) + " selected NaN at index " + std::to_string(index));
      }
      if (values != nullptr) {
        const uint32_t got = load_score(values, c.dtype, row_offset + s);
        if (got != r.raw(index)) {
          return r.fail(s, std::string(who) + " value bits " + std::to_string(got) +
                               " != score bits " + std::to_string(r.raw(index)) + " at index " +
                               std::to_string(index));
        }
      }
    } else {
      if (index != -1) {
        return r.fail(s, std::string(who) + " padding slot holds " + std::to_string(index) +
                             ", expected -1 (valid count " + std::to_string(expected_count) + ")");
      }
      if (values != nullptr &&
          !is_nan_score(load_score(values, c.dtype, row_offset + s), c.dtype)) {
        return r.fail(s, std::string(who) + " padding value is not NaN");
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

::testing::AssertionResult check_selection(const SelectCase& c, const HostRows& rows,
                                           const int32_t* indices, const void* values,
                                           const int32_t* ref_indices, const void* ref_values) {
  const int64_t stride = c.row_stride == 0 ? c.n : c.row_stride;
  const auto esize = static_cast<int64_t>(dtype_size(c.dtype));
  std::vector<int32_t> sorted_got, sorted_ref;
  std::vector<uint32_t> keys_got, keys_ref;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t start = c.with_ranges ? rows.starts[static_cast<std::size_t>(b)] : 0;
    const int64_t end = c.with_ranges ? rows.ends[static_cast<std::size_t>(b)] : c.n;
    const int64_t len = std::max<int64_t>(0, end - start);
    const RowContext r{c, b, rows.scores.data() + (b * stride + start) * esize, len};

    int64_t valid = 0;
    for (int64_t i = 0; i < len; ++i) valid += r.key(static_cast<int32_t>(i)) != 0;
    const int64_t expected = std::min(c.k, valid);
    const int32_t* got = indices + b * c.k;
    const int32_t* ref = ref_indices + b * c.k;

    auto shape = check_row_shape(r, "result", got, values, b * c.k, expected);
    if (!shape) return shape;
    shape = check_row_shape(r, "reference", ref, ref_values, b * c.k, expected);
    if (!shape) return shape;

    sorted_got.assign(got, got + expected);
    std::sort(sorted_got.begin(), sorted_got.end());
    for (std::size_t s = 1; s < sorted_got.size(); ++s) {
      if (sorted_got[s] == sorted_got[s - 1]) {
        return r.fail(-1, "index " + std::to_string(sorted_got[s]) + " selected twice");
      }
    }

    keys_got.clear();
    keys_ref.clear();
    for (int64_t s = 0; s < expected; ++s) {
      keys_got.push_back(r.key(got[s]));
      keys_ref.push_back(r.key(ref[s]));
    }
    std::sort(keys_got.begin(), keys_got.end());
    std::sort(keys_ref.begin(), keys_ref.end());
    for (std::size_t s = 0; s < keys_got.size(); ++s) {
      if (keys_got[s] != keys_ref[s]) {
        return r.fail(-1, "selected keys differ from the reference: rank " +
                              std::to_string(keys_got.size() - 1 - s) + " from the best has key " +
                              std::to_string(keys_got[s]) + ", reference " +
                              std::to_string(keys_ref[s]));
      }
    }

    if (c.deterministic) {
      sorted_ref.assign(ref, ref + expected);
      std::sort(sorted_ref.begin(), sorted_ref.end());
      for (std::size_t s = 0; s < sorted_got.size(); ++s) {
        if (sorted_got[s] != sorted_ref[s]) {
          return r.fail(-1,
                        "deterministic index set differs from the reference: " + std::to_string(s) +
                            "-th smallest index " + std::to_string(sorted_got[s]) + ", reference " +
                            std::to_string(sorted_ref[s]));
        }
      }
    }

    if (c.sorted) {
      for (int64_t s = 0; s < expected; ++s) {
        if (s > 0) {
          const uint64_t prev =
              keys::make_composite(r.key(got[s - 1]), static_cast<uint32_t>(got[s - 1]));
          const uint64_t cur = keys::make_composite(r.key(got[s]), static_cast<uint32_t>(got[s]));
          if (prev <= cur) {
            return r.fail(s, "not sorted best-first with ties by ascending index: index " +
                                 std::to_string(got[s - 1]) + " then " + std::to_string(got[s]));
          }
        }
        if (c.deterministic && got[s] != ref[s]) {
          return r.fail(
              s, "index " + std::to_string(got[s]) + " != reference " + std::to_string(ref[s]));
        }
        // Slot s of a sorted result holds the (s+1)-th best key. keys_ref is the reference's key
        // multiset in ascending order, so this holds whether or not the reference is sorted.
        const uint32_t want = keys_ref[static_cast<std::size_t>(expected - 1 - s)];
        if (r.key(got[s]) != want) {
          return r.fail(s, "key " + std::to_string(r.key(got[s])) + " != reference key " +
                               std::to_string(want) + " (index " + std::to_string(got[s]) + ")");
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace litetopk::testing
