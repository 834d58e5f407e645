// merge_topk_cpu, the test oracle: for each row, the composite (key, ~global index) of every
// non-empty candidate of every shard, all sorted best first, the first k kept. Sorted and
// deterministic by construction.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "api/merge_validation.h"
#include "cpu/row_access.h"
#include "cpu/run_guarded.h"
#include "formats/merge_candidates.h"
#include "litetopk/merge.h"

namespace litetopk {

Status merge_topk_cpu(const MergeProblem& problem) {
  if (Status status = validate_merge_problem(problem); !status) return status;
  if (problem.batch == 0) return Status::ok();
  const MergeProblem p = detail::with_merge_strides(problem);
  // The output as select_topk's: write_row decodes composites into indices and values.
  SelectProblem out;
  out.batch = p.batch;
  out.k = p.k;
  out.largest = p.largest;
  out.indices = p.out_indices;
  out.values = p.out_values;
  return cpu::run_guarded("merge_topk_cpu", [&] {
    std::vector<uint64_t> candidates;
    for (int64_t b = 0; b < p.batch; ++b) {
      candidates.clear();
      for (int64_t s = 0; s < p.shards; ++s) {
        const int64_t length = merge::list_length(p.counts, b * p.shards + s, p.k_in);
        const int64_t base = b * p.row_stride + s * p.shard_stride;
        for (int64_t j = 0; j < length; ++j) {
          uint32_t bits = 0;
          std::memcpy(&bits, p.values + base + j, sizeof(bits));
          const uint64_t c = merge::candidate_composite(bits, p.indices[base + j], true, p.largest);
          if (c != keys::kEmptyComposite) candidates.push_back(c);
        }
      }
      std::sort(candidates.begin(), candidates.end(), std::greater<uint64_t>());
      const int64_t count = std::min<int64_t>(p.k, static_cast<int64_t>(candidates.size()));
      cpu::write_row<cpu::DTypeTraits<DType::kFloat32>>(out, b, candidates.data(), count);
    }
    return Status::ok();
  });
}

}  // namespace litetopk
