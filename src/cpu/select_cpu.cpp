// select_topk_cpu: validation and dispatch to the CPU algorithms (all pointers are host pointers).
#include <thread>

#include "api/format.h"
#include "cpu/cpu_algos.h"
#include "cpu/run_guarded.h"
#include "litetopk/select.h"

namespace litetopk {

Status select_topk_cpu(const SelectProblem& problem, CpuSelectAlgo algo, int num_threads) {
  Status status = validate_select_problem(problem);
  if (!status) return status;
  status = validate_select_ranges(problem, problem.row_starts, problem.row_ends);
  if (!status) return status;
  if (algo != CpuSelectAlgo::kReference && algo != CpuSelectAlgo::kFast) {
    return detail::invalid_argument("algo must be 0 (reference) or 1 (fast), got ",
                                    static_cast<int>(algo));
  }
  if (num_threads < 0) {
    return detail::invalid_argument("num_threads must be >= 0 (0 = every hardware thread), got ",
                                    num_threads);
  }
  if (problem.batch == 0) return Status::ok();

  return cpu::run_guarded("select_topk_cpu", [&] {
    if (algo == CpuSelectAlgo::kReference) {
      cpu::select_reference_rows(problem);
    } else {
      int threads = num_threads;
      if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
      if (threads < 1) threads = 1;
      cpu::select_fast_rows(problem, threads);
    }
    return Status::ok();
  });
}

}  // namespace litetopk
