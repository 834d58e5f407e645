// `litetopk indexer --paged`: the decode-phase indexer (indexer_topk_paged) over a generated
// paged fp8 cache. indexer_command.cpp registers the options (shared with the prefill indexer)
// and calls run_paged_indexer_command.
#pragma once

#include <cstdint>
#include <string>

#include "testkit/timing.h"

namespace litetopk::tools {

// The batch when --batch and --context are not given: on the GPU the demo's (8 requests of 32768
// tokens), on the CPU one the reference runs and checks in well under a second on two cores.
constexpr int64_t kPagedGpuBatch = 8;
constexpr int64_t kPagedGpuContext = 32768;
constexpr int64_t kPagedCpuBatch = 4;
constexpr int64_t kPagedCpuContext = 8192;

struct PagedIndexerArgs {
  int64_t batch = 0;               // 0: not given (the device's default, or a --contexts list's)
  int64_t context = 0;             // 0: not given (the device's default)
  std::string contexts = "fixed";  // fixed | ragged | a comma-separated list of lengths
  int64_t next_n = 1;
  int64_t max_context = 0;  // 0: the longest context
  bool graphs = false;      // --bench on the GPU: CUDA graph replays
  int64_t H = 64;
  int64_t k = 2048;
  std::string algo = "auto";    // auto | unfused | fused | cpu
  std::string device = "auto";  // auto | gpu | cpu
  uint64_t seed = 42;
  bool verify = false;
  double tol_rel = 0;
  testkit::BenchOptions bench;
  std::string json_path;
};

// Runs the command; throws CLI::ValidationError on bad usage. Returns the exit code.
int run_paged_indexer_command(const PagedIndexerArgs& args);

}  // namespace litetopk::tools
