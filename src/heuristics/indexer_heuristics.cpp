// The indexer's dispatch rule and fitted models (indexer_heuristics.h).
#include "heuristics/indexer_heuristics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace litetopk::heuristics {

IndexerAlgo choose_indexer_algo(const IndexerProblem& problem) {
  // The fused path (the gated kernels) against unfused, measured on the H200 (docs/indexer.md):
  // unfused costs the logits kernel, the [T, S] store and a selection over S keys per row; fused
  // the same scoring without the store, a cold sample of 0.6-3.6% of the tiles, and a selection
  // over a few k candidates per row (fixed costs of about 0.6 ms at T = 8192). Fused was faster
  // on every measured shape: k = 2048 from S = 32K (3-16%) and k = 8192 at S = 256K (13%), that
  // is from 16 keys per selected key; below 32K keys its fixed costs are unmeasured against the
  // store and selection it saves, so shorter ranges stay unfused whatever k is.
  // ks and ke are device memory, so S stands for the ranges' lengths.
  constexpr int64_t kFusedFromKeysPerK = 16;
  constexpr int64_t kFusedFromKeys = 32768;
  return problem.num_keys >= kFusedFromKeysPerK * problem.k && problem.num_keys >= kFusedFromKeys
             ? IndexerAlgo::kFused
             : IndexerAlgo::kUnfused;
}

FusedKernel choose_fused_kernel(const IndexerProblem& problem, const IndexerOptions& options) {
  constexpr int kTileKeys = 64;
  const bool cold =
      options.cold_sample && cold_sample_tiles(problem, kTileKeys, options.cold_sample_tiles) > 0;
  return cold && options.state == nullptr ? FusedKernel::kGated : FusedKernel::kLists;
}

IndexerAlgo choose_paged_indexer_algo(const PagedIndexerProblem& problem, bool has_state) {
  // docs/BENCHMARKS.md, "The fused paged indexer at one request" (graph replays, H = 64,
  // k = 2048). With a state (the gated path): slower than unfused on every shape of the decode
  // table, on coherent steps (1 x 128K 0.039 vs 0.024 ms, 128 x 128K 0.638 vs 0.589) and far
  // slower on iid ones, where auto must stay within 3% of unfused (1 x 128K 0.150, 128 x 128K
  // 2.88): a plan cannot tell the two apart, so a state means unfused.
  // Without one, the fused kernel (the batch's tiles balanced over the SMs, the selection in the
  // same launch; docs/BENCHMARKS.md, "The fused paged indexer balanced over a ragged batch")
  // beats unfused at next_n 1 for one request up to 256K (0.015 vs 0.020 ms at 32K, 0.018-0.019
  // vs 0.023 at 128K, 0.023 vs 0.027 at 256K) and for batches of up to 16 requests up to 2M
  // tokens in all (4 x 128K 0.030 vs 0.035, 8 x 128K 0.051 vs 0.054, 16 x 64K 0.052 vs 0.057,
  // 16 x 128K 0.087 vs 0.110; 8 x 32K ties at 0.025); unfused wins at 32 x 128K (0.146 vs 0.180:
  // every request's last block there is part full, a quarter of the grid idle) and at next_n 2
  // and 4 (1 x 128K: 0.027 vs 0.030, 0.033 vs 0.047).
  constexpr int64_t kFusedOneRequestContext = 262144;
  constexpr int64_t kFusedBatch = 16;
  constexpr int64_t kFusedBatchTokens = 2097152;
  if (has_state || problem.next_n != 1) return IndexerAlgo::kUnfused;
  const bool fused = problem.batch == 1
                         ? problem.max_context <= kFusedOneRequestContext
                         : problem.batch <= kFusedBatch &&
                               problem.batch * problem.max_context <= kFusedBatchTokens;
  return fused ? IndexerAlgo::kFused : IndexerAlgo::kUnfused;
}

int32_t cold_sample_tiles(const IndexerProblem& problem, int tile_keys, int32_t requested) {
  if (requested > 0) return requested;
  // c tiles admit about tile_keys c candidates per query, and after them a query admits about
  // k (1 + z / sqrt(c k / n)) more for ranges of n tiles (z = 6, the speculative gate's margin).
  // The model's optimum, (1.5 k sqrt(2 n / k) / tile_keys)^(2/3), times 2.8 (the sweep's best),
  // within [8, 512] tiles.
  const double k = static_cast<double>(problem.k);
  const double tiles = static_cast<double>(problem.num_keys) / tile_keys;
  const double best = std::pow(1.5 * k * std::sqrt(2.0 * tiles / k) / tile_keys, 2.0 / 3.0);
  return static_cast<int32_t>(std::clamp(2.8 * best, 8.0, 512.0));
}

int64_t fused_list_capacity(const IndexerProblem& problem, int64_t requested,
                            int32_t cold_tiles, int tile_keys, int64_t lists, int64_t slack) {
  // 2k is the least a list gets (a reduction to the k best then frees at least k slots). The
  // default aims at 4k, or more when the cold sample's candidates would fill that (they are all
  // admitted; at its end the list keeps the sample rank, so 2k more leave room for the rest).
  const int64_t least = 2 * problem.k;
  int64_t capacity = requested;
  if (capacity == 0) {
    const double budget = 0.02 * static_cast<double>(problem.num_queries) *
                          static_cast<double>(problem.num_keys) * sizeof(float);
    const auto fitting =
        static_cast<int64_t>(budget / (static_cast<double>(lists) * 8)) - slack;
    const int64_t aim =
        std::max<int64_t>(4 * problem.k, int64_t{cold_tiles} * tile_keys + 2 * problem.k);
    capacity = std::min<int64_t>(aim, fitting) / 64 * 64;
  }
  // A list that holds the whole range never fills; the kernel's int32 slot counts bound it too.
  const int64_t most = std::min<int64_t>((problem.num_keys + 63) / 64 * 64,
                                         (std::numeric_limits<int32_t>::max() - slack) / 64 * 64);
  return std::max(std::min(capacity, most), least);
}

int64_t gated_list_capacity(const IndexerProblem& problem, int64_t requested, int32_t cold_tiles,
                            int tile_keys) {
  const int64_t least = 2 * problem.k;
  const int64_t most = std::max<int64_t>((problem.num_keys + 63) / 64 * 64, 64);
  double capacity = static_cast<double>(requested);
  if (requested == 0 && cold_tiles > 0) {
    // The sample's share of a query's k best, mu, and the gate's rank r (speculative_rank.cuh);
    // the gate then admits about k r / mu scores of the row.
    const double k = static_cast<double>(problem.k);
    const double tiles =
        std::max(1.0, std::ceil(static_cast<double>(problem.num_keys) / tile_keys));
    const double mu = cold_tiles * k / tiles;
    const double rank = std::ceil(mu + 6.0 * std::sqrt(mu)) + 2.0;
    const double expected = k * rank / mu;
    capacity = expected * (1.0 + 8.0 / std::sqrt(rank)) + 256.0;
  }
  const auto rounded = static_cast<int64_t>(std::ceil(capacity / 64.0)) * 64;
  return std::min(std::max(rounded, least), most);
}

}  // namespace litetopk::heuristics
