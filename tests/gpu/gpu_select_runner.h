// Runs one SelectCase on the GPU (upload, poisoned outputs, select_topk, download), and checks it
// against the CPU reference.
#pragma once

#include <cstdint>
#include <vector>

#include "common/select_testing.h"
#include "testkit/device_memory.h"

namespace litetopk::testing {

struct GpuRunOptions {
  SelectAlgo algo = SelectAlgo::kAuto;
  bool validate_ranges = false;
};

// Fills `result` (host) from a GPU run of the case. Output buffers are poisoned (0x5a bytes) first.
Status run_gpu_select(const SelectCase& c, const HostRows& rows, const GpuRunOptions& options,
                      HostResult* result);

// Runs the case on the GPU with `algo` and checks the result against the CPU reference on the
// same rows (check_selection); a failure names the step that failed.
::testing::AssertionResult gpu_matches_reference(const SelectCase& c, const HostRows& rows,
                                                 SelectAlgo algo);

// Restricts row r of the case to [starts[r], ends[r]) and fills the rest of the row (and the
// stride padding) with the mode's best value (+inf largest-first, -inf smallest-first), so that
// reading outside a range shows up as a wrong answer.
void restrict_to_ranges(SelectCase* c, HostRows* rows, const std::vector<int32_t>& starts,
                        const std::vector<int32_t>& ends);

// True when a CUDA device is present; GPU tests skip otherwise.
bool gpu_available();

}  // namespace litetopk::testing
