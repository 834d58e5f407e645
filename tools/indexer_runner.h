// Runs indexer_topk (one GPU algorithm) or indexer_topk_cpu on an IndexerWorkload, keeping the
// first run's indices for verification and timing more runs when benchmarking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "testkit/indexer_workload.h"
#include "litetopk/indexer.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

struct IndexerRunOptions {
  bool on_cpu = false;                    // indexer_topk_cpu; else indexer_topk with `algo`
  IndexerAlgo algo = IndexerAlgo::kAuto;  // GPU only
  int64_t candidate_capacity = 0;         // GPU only: IndexerOptions::candidate_capacity
  // GPU only: carry an IndexerState across the runs (the first starts cold).
  bool state = false;
  bool cold_sample = true;  // GPU only: IndexerOptions::cold_sample
  BenchOptions bench;
};

// "cpu" or the GPU algorithm's name, as requested.
std::string indexer_run_name(const IndexerRunOptions& options);

struct IndexerRun {
  std::string algo;                   // what ran ("auto" resolved to its dispatch)
  std::vector<int32_t> indices;       // [T, k], host: the first run's
  std::vector<int32_t> warm_indices;  // with state and bench: the last timed run's
  Timing timing;                      // when benchmarked
  std::size_t workspace_bytes = 0;    // GPU only
  std::size_t state_bytes = 0;        // GPU only, with state
  // The fused kernel's first run (with a state: its second, the first warm one), per query:
  // candidates admitted into its lists (IndexerOptions::candidate_counters) and list reductions,
  // and the query blocks it re-ran; -1 for the other paths.
  double candidates_per_query = -1;
  double reductions_per_query = -1;
  int64_t retried_blocks = -1;
};

// Uploads `w` (GPU), runs it once and, with options.bench.enabled, times more runs.
Status run_indexer(const IndexerWorkload& w, const IndexerRunOptions& options, IndexerRun* run);

}  // namespace litetopk::tools
