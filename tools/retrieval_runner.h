// Runs one retrieval problem on the GPU (upload, plan, launches, download) or on the CPU
// reference, timing more runs when benchmarking.
#pragma once

#include <cstdint>
#include <vector>

#include "litetopk/retrieval.h"
#include "testkit/timing.h"

namespace litetopk::tools {

struct RetrievalRun {
  std::vector<int32_t> indices;  // [batch, k], host
  std::vector<float> scores;     // [batch, k], host
  int64_t chunks = 0;            // corpus chunks of the GPU plan (0 on the CPU)
  RetrievalPath path = RetrievalPath::kAuto;  // the GPU plan's path (kAuto on the CPU)
  testkit::Timing timing;        // when benchmarked
};

// `host_problem`: host queries, corpus, norms and ranges with k and the flags set (its outputs
// are ignored).
Status run_retrieval_gpu(const RetrievalProblem& host_problem, const testkit::BenchOptions& bench,
                         RetrievalRun* run, RetrievalPath path = RetrievalPath::kAuto);
Status run_retrieval_cpu(const RetrievalProblem& host_problem, const testkit::BenchOptions& bench,
                         RetrievalRun* run);

}  // namespace litetopk::tools
