// CPU reference selection, the test oracle: for each row, collect the composite (key, ~index) of
// every non-NaN entry, sort all of them best first, keep the first k. Deterministic and sorted by
// construction, so it answers every option combination (largest/smallest lives in the key).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "cpu/cpu_algos.h"
#include "cpu/row_access.h"

namespace litetopk::cpu {

void select_reference_rows(const SelectProblem& p) {
  std::vector<uint64_t> candidates;
  visit_dtype(p.dtype, [&](auto traits) {
    using Traits = decltype(traits);
    for (int64_t b = 0; b < p.batch; ++b) {
      const RowSpan row = row_span(p, b);
      candidates.clear();
      for (int64_t i = 0; i < row.len; ++i) {
        const uint32_t key = Traits::key(load_raw<Traits>(row.data, i), p.largest);
        if (key != 0) candidates.push_back(keys::make_composite(key, static_cast<uint32_t>(i)));
      }
      std::sort(candidates.begin(), candidates.end(), std::greater<uint64_t>());
      const int64_t count = std::min<int64_t>(p.k, static_cast<int64_t>(candidates.size()));
      write_row<Traits>(p, b, candidates.data(), count);
    }
  });
}

}  // namespace litetopk::cpu
