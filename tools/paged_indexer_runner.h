// Runs indexer_topk_paged (one GPU algorithm) or the CPU reference indexer_topk_paged_cpu on a
// PagedIndexerWorkload, keeping the first run's indices for verification and, when benchmarking,
// timing more runs and the logits alone (indexer_logits_paged / indexer_logits_paged_cpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/indexer.h"
#include "testkit/paged_indexer_workload.h"
#include "testkit/timing.h"

namespace litetopk::tools {

using namespace litetopk::testkit;

struct PagedIndexerRunOptions {
  bool on_cpu = false;                    // indexer_topk_paged_cpu; else indexer_topk_paged
  IndexerAlgo algo = IndexerAlgo::kAuto;  // GPU only
  BenchOptions bench;
  bool time_logits = false;  // with bench: also time the logits alone
};

// "cpu" or the GPU algorithm's name, as requested.
std::string paged_indexer_run_name(const PagedIndexerRunOptions& options);

struct PagedIndexerRun {
  std::string algo;              // what ran ("auto" resolved to its dispatch)
  std::vector<int32_t> indices;  // [B * next_n, k], host: the first run's
  Timing timing;                 // when benchmarked
  Timing logits_timing;          // when benchmarked with time_logits
  bool logits_timed = false;
  std::size_t workspace_bytes = 0;  // GPU only
  std::size_t logits_bytes = 0;     // the [B * next_n, max_context] fp32 logits (time_logits)
};

// Uploads `w` (GPU), runs it once and, with options.bench.enabled, times more runs.
Status run_paged_indexer(const PagedIndexerWorkload& w, const PagedIndexerRunOptions& options,
                         PagedIndexerRun* run);

// The bytes a decode step must read at least: every key and scale a request's last query sees
// (each once per request), plus q and the weights.
double paged_indexer_bytes_read(const PagedIndexerWorkload& w);

}  // namespace litetopk::tools
