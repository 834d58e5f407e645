// dsa_prefill_cpu: the CPU reference of one DSA layer (host pointers): indexer_topk_cpu, the
// indexer's positions made kv rows (formats/dsa_kv_rows.h, as the GPU's kernel does), then
// sparse_attention_cpu over them.
#include <cstdint>
#include <vector>

#include "api/dsa_halves.h"
#include "cpu/run_guarded.h"
#include "formats/dsa_kv_rows.h"
#include "litetopk/dsa.h"

namespace litetopk {

Status dsa_prefill_cpu(const DsaPrefillProblem& problem) {
  if (Status s = validate_dsa_prefill_problem(problem); !s) return s;
  return cpu::run_guarded("dsa_prefill_cpu", [&] {
    std::vector<int32_t> own_rows;
    int32_t* rows = problem.indices;
    if (rows == nullptr) {
      own_rows.resize(static_cast<std::size_t>(problem.num_queries * problem.k));
      rows = own_rows.data();
    }
    if (Status s = detail::dsa_indexer_status(
            indexer_topk_cpu(detail::dsa_indexer_half(problem, rows)));
        !s) {
      return s;
    }
    for (int64_t t = 0; t < problem.num_queries; ++t) {
      int32_t* row = rows + t * problem.k;
      for (int64_t j = 0; j < problem.k; ++j) {
        row[j] = dsa::kv_row(row[j], problem.ks[t], problem.num_keys);
      }
    }
    return detail::dsa_attention_status(sparse_attention_cpu(
        detail::dsa_attention_half(problem, rows, SparseAttentionAlgo::kAuto)));
  });
}

}  // namespace litetopk
