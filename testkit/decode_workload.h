// Synthetic decode workloads for sparse_decode (host side): the tests' inputs, the delta trade-off
// table, and the inputs a CLI demo or benchmark can generate without a model. Internal (not in
// include/): tools and tests include it from src/.
//
// A workload is a dense fp16/bf16 cache [batch, kv_heads, capacity, D] (keys, values, lengths), one
// query token per sequence [batch, num_q_heads, D] and its softmax scale (1/sqrt(128)). Patterns:
//
//   kNeedles  (a) realistic peaked attention. Per (sequence, KV head) a unit direction u; query
//             head g is q_g = beta_g * normalize(u + 0.25 eps_g) (the heads of a group agree on
//             what matters, their noise differs). Keys are k_t = c (.) n_t + a_t u with n_t ~
//             N(0, I), per-channel scales c (log-normal, sigma 0.5, and 4 outlier channels x5),
//             and a_t set so that token t's logit is offset by l_t above the bulk (beta_g makes
//             the bulk logits N(0, 1.5^2) for every head). Offsets l_t:
//               sinks    tokens 0..3: 16, 15, 14, 13.5 (the pseudo-max sits here)
//               local    the last 64 tokens: 14 (newest) down to 9
//               needles  6 tokens (fewer in short sequences) at random positions: 14.5 .. 16.5,
//                        possibly above the sinks
//               heavy    1 bulk token in 32: Exp(mean 2.5) capped at 13 (a heavy upper tail of
//                        scattered, moderately relevant tokens)
//               bulk     0
//             Values ~ N(0, 1). Measured at 32K tokens (mass_by_token_kind): sinks 11%, local
//             window 20%, needles 67%, heavy tail 1.5%, bulk 0.07% of the softmax mass. A block
//             holding a heavy token with offset >= 9 is within delta = 7 of the sinks.
//   kFlat     (b) the worst case for sparsity: no structure, every logit ~ N(0, 1) (random q and
//             keys with the same channel scales), values ~ N(0, 1). Every block is close to the
//             maximum, so nearly every block is kept at any useful delta.
//   kExtremes NaN-free fp16 extremes: key channels cycle through huge (|k| in [30000, 65504], some
//             exactly +-65504), subnormal (|k| in [2^-24, 2^-14]), zero (+0 and -0) and N(0, 1);
//             values mix +-65504, subnormals and N(0, 1000); q ~ N(0, 1.2e-4^2) (partly
//             subnormal) so that the logits (dominated by the huge channels) spread over a few
//             units. With bf16 the same values rounded to bf16.
//   kSpread   (c) spread attention mass: the kNeedles construction with offsets that put the
//             mass on many tokens: 1 token in 4 "warm" with an offset uniform in [2, 6], sinks
//             8, 7.5, 7, 6.5, the local window 6 (newest) down to 3, no needles. No block stands
//             out: the softmax mass is spread over about a quarter of the context.
//   kPassages (d) a few hot passages (retrieval-augmented prompts): 8 contiguous passages of 512
//             tokens (len / 32 when shorter) at random positions, each token's offset ~ N(8, 1);
//             sinks 11, 10, 9, 9; the local window 10 down to 6; no heavy tail. The mass sits in
//             a few dozen contiguous blocks.
//   kRope     (e) RoPE-rotated keys: kNeedles with the relevance direction u confined to the 16
//             lowest-frequency rotary pairs, then every key rotated at its position t and the
//             query at position len (Llama-3.1 convention: channel pairs (i, i + 64), theta_i =
//             500000^(-2i/128)). The designed offsets hold up to cos((len - t) theta_i) (>= 0.79
//             at 256K); the rotated noise channels change magnitude along the context, which the
//             per-block channel scales see.
// With identical_heads every KV head of a sequence holds the same keys and values and every query
// head the same query (the sequences still differ).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "litetopk/sparse_decode.h"

namespace litetopk::testkit {

enum class DecodePattern : int {
  kNeedles = 0,
  kFlat = 1,
  kExtremes = 2,
  kSpread = 3,
  kPassages = 4,
  kRope = 5,
};
const char* decode_pattern_name(DecodePattern pattern);

// Token categories of kNeedles and kRope (kSpread: warm tokens are kHeavy; kPassages: passage
// tokens are kNeedle; every token of kFlat and kExtremes is kBulk).
enum class TokenKind : uint8_t { kBulk = 0, kSink = 1, kLocal = 2, kNeedle = 3, kHeavy = 4 };
constexpr int kNumTokenKinds = 5;

struct DecodeWorkloadSpec {
  DecodePattern pattern = DecodePattern::kNeedles;
  DType dtype = DType::kFloat16;  // fp16 or bf16
  int64_t num_kv_heads = 2;
  int64_t group_size = 4;              // query heads per KV head, 1..16
  std::vector<int32_t> lengths{4096};  // one per sequence (batch = lengths.size())
  int64_t capacity = 0;                // tokens per sequence; 0: the longest length (at least 1)
  bool identical_heads = false;
  uint64_t seed = 1;
};

struct DecodeWorkload {
  DType dtype = DType::kFloat16;
  int64_t batch = 0, num_kv_heads = 0, num_q_heads = 0, head_dim = kSparseDecodeHeadDim;
  int64_t capacity = 0;
  float softmax_scale = 0;
  std::vector<uint16_t> q;             // [batch, num_q_heads, D] raw dtype bits
  std::vector<uint16_t> keys, values;  // [batch, num_kv_heads, capacity, D] raw dtype bits
  std::vector<int32_t> lengths;        // [batch]
  std::vector<TokenKind> kinds;        // [batch, num_kv_heads, capacity]

  // Contiguous views over the vectors (valid while the workload lives and is not resized).
  DenseKvCache dense();
  DenseDecodeProblem dense_problem(void* out, DType out_dtype);
  // Sparse decode of these queries over `cache` (fp32 output; kept_mask may be null), top-delta.
  SparseDecodeProblem sparse_problem(const SparseKvCache& cache, float delta, float* out,
                                     uint8_t* kept_mask);
  // Fidelity of an fp32 output against fp64 dense attention over these keys (kept_mask, when
  // given, has mask_blocks blocks per sequence and head).
  DecodeFidelityProblem fidelity_problem(const float* out, const uint8_t* kept_mask,
                                         int64_t block_size, int64_t mask_blocks);
  // Dense attention of these queries over the keys rebuilt from `cache` (code + residual), in
  // fp32: the baseline that isolates the error of block selection from that of quantization.
  Status dense_over_rebuilt(const SparseKvCache& cache, std::vector<float>* out) const;
};

// Deterministic in the spec. Throws std::invalid_argument on a bad spec (a length < 0 or above
// the capacity, a dtype other than fp16/bf16, group_size outside 1..16).
DecodeWorkload make_decode_workload(const DecodeWorkloadSpec& spec);

// Host storage for a sparse cache (contiguous, or paged with a shuffled block table).
struct HostSparseCache {
  SparseKvCache shape;  // the pointers are set by view()
  std::vector<uint8_t> key_codes, key_residuals;
  std::vector<uint16_t> key_scales, values, tail_keys;
  std::vector<int32_t> lengths, block_table;

  // Allocates every array for this shape (paged: num_pages = batch * max_blocks + spare pages,
  // block_table a permutation of pages drawn from `seed`); lengths 0.
  HostSparseCache(DType dtype, int64_t batch, int64_t num_kv_heads, int64_t block_size,
                  int64_t max_blocks, bool paged, uint64_t seed = 7);
  SparseKvCache view();
};

// The workload quantized into a new host cache with max_blocks = ceil(capacity / BS) (+ 1 when
// `append_headroom`), through sparse_decode_quantize_cpu.
Status quantize_workload(DecodeWorkload* workload, int64_t block_size, bool paged,
                         HostSparseCache* out, bool append_headroom = false);

// One row of the delta trade-off: the sparse CPU reference at `delta` judged against the fp64
// dense reference over the original keys (`vs_original`), and the rel L2 against dense attention
// over the rebuilt keys (the selection's own error, without the quantization's).
// A selection rule and its parameter (delta, or mass_target for kMass).
struct DecodeSelection {
  SparseSelection rule = SparseSelection::kDelta;
  float value = 5.0f;
};
struct TradeoffRow {
  float delta = 0;  // the selection's value (delta or mass_target)
  SparseSelection rule = SparseSelection::kDelta;
  DecodeFidelity vs_original;
  double rel_l2_vs_rebuilt = 0;
};
Status sparse_decode_tradeoff_cpu(const DecodeWorkloadSpec& spec, int64_t block_size,
                                  const std::vector<float>& deltas,
                                  std::vector<TradeoffRow>* rows);
// The same over selections of either rule.
Status sparse_decode_tradeoff_cpu(const DecodeWorkloadSpec& spec, int64_t block_size,
                                  const std::vector<DecodeSelection>& selections,
                                  std::vector<TradeoffRow>* rows);
// A markdown table of the rows under a one-line title.
std::string format_tradeoff_table(const std::string& title, const std::vector<TradeoffRow>& rows);

// Mean share of the fp64 reference softmax mass per TokenKind over every (sequence, query head).
Status mass_by_token_kind(DecodeWorkload* workload, std::vector<double>* shares);

// Runs fn() and turns any exception into kInternal naming `what`, as the CPU backend's calls do.
Status run_guarded(const char* what, const std::function<Status()>& fn);

}  // namespace litetopk::testkit
