// select_topk's dispatch rule. Sample-filter reads the scores once; radix reads them 4 to 7 times
// but spreads a row over many blocks in every pass. Sample-filter wins whenever each row gets a
// block of its own; when the batch is too small for that and rows are split, its last-block merge
// of up to segments * k candidates runs on one SM, and radix was faster on every such shape
// measured (docs/select.md, "Dispatch"; docs/BENCHMARKS.md). Grid-radix runs radix's passes in one
// launch, with no host round trip between passes, where the rows' blocks fit on the device at once.
#include "heuristics/select_heuristics.h"

namespace litetopk::heuristics {

SelectAlgo choose_select_algo(const SelectShapeFacts& facts) {
  if (facts.k <= kSampleFilterMaxK && facts.sample_filter_segments == 1) {
    return SelectAlgo::kSampleFilter;
  }
  if (facts.grid_radix_segments > 0) return SelectAlgo::kGridRadix;
  return SelectAlgo::kRadix;
}

}  // namespace litetopk::heuristics
