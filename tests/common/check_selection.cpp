// check_selection: the testkit's selection checker (testkit/select_verify.h) on a test case, for
// the result and for the reference itself.
#include <string>

#include "common/select_testing.h"
#include "testkit/select_verify.h"

namespace litetopk::testing {

::testing::AssertionResult check_selection(const SelectCase& c, const HostRows& rows,
                                           const int32_t* indices, const void* values,
                                           const int32_t* ref_indices, const void* ref_values) {
  const SelectProblem problem = make_problem(c, rows, nullptr, nullptr);
  std::string error = testkit::compare_topk(problem, ref_indices, ref_indices, c.batch, ref_values);
  if (!error.empty()) {
    return ::testing::AssertionFailure() << "case " << c.name << ": the reference: " << error;
  }
  error = testkit::compare_topk(problem, indices, ref_indices, c.batch, values);
  if (!error.empty()) return ::testing::AssertionFailure() << "case " << c.name << ": " << error;
  return ::testing::AssertionSuccess();
}

}  // namespace litetopk::testing
