// Inputs for one DeepSeek sparse attention (DSA) layer on a causal prefill chunk, the end-to-end
// run of `litetopk dsa` and of the demo's DSA step: indexer_topk (litetopk/indexer.h) picks each
// query's k tokens, then sparse_attention (litetopk/attention.h) attends over them.
//
// The chunk: T queries, the last T of S tokens, so query t sees tokens [0, S - T + t] (the
// indexer's causal ranges, ks = 0, ke = S - T + t + 1; its indices are relative to ks, hence token
// positions, and its -1 padding of a row with fewer than k visible tokens is the attention's
// padding). Generated on the host from a seed (the same spec always gives the same bytes):
// - the indexer's half as testkit/indexer_workload.h draws it (fp8 e4m3 q [T, H, D] and keys
//   [S, D] of N(0, 1), key scales U(0.5, 1.5), weights N(0, 1) / sqrt(H)), from `seed`;
// - MLA's half as testkit/sparse_attention_workload.h draws it (bf16 q [T, h_q, d_qk] and kv
//   [S, 1, d_qk] of N(0, 1), sm_scale 1 / sqrt(d_qk)), from seed + 1.
// The halves are independent: on random inputs the indexer's choice says nothing about the
// attention's logits (in a model both come from the same hidden states). What the layer measures
// is the time of both stages and their hand-off; what it checks is each stage against its CPU
// reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/attention.h"
#include "litetopk/indexer.h"
#include "testkit/indexer_workload.h"
#include "testkit/sparse_attention_workload.h"

namespace litetopk::testkit {

struct DsaSpec {
  int64_t T = 0;       // queries: the chunk
  int64_t S = 0;       // tokens of the context, the chunk included (S >= T)
  int64_t h_q = 16;    // MLA query heads: 16, 32, 64 or 128
  int64_t d_qk = 576;  // 512 latent + 64 rope columns
  int64_t d_v = 512;
  int64_t H = 64;      // indexer heads: 32 or 64
  int64_t D = 128;     // indexer head dim
  int64_t k = 2048;    // tokens selected per query: 1 .. 8192
  uint64_t seed = 42;
};

// "" when the spec can be generated and run by both stages, else why not (T >= 1, S >= T and
// within int32, h_q, d_qk, H, D and k among the values the two calls take).
std::string dsa_spec_error(const DsaSpec& spec);
// "T=1024 S=32768 h_q=16 k=2048"
std::string dsa_shape_label(const DsaSpec& spec);

// The two halves' specs (causal ranges; the attention's topk = k).
IndexerSpec dsa_indexer_spec(const DsaSpec& spec);
SparseAttentionSpec dsa_attention_spec(const DsaSpec& spec);

// The (query, token) pairs the attention attends when the indexer is right: sum over t of
// min(k, S - T + t + 1) (every visible token has a finite score, so a row is short of k only
// when fewer than k tokens are visible).
int64_t dsa_attention_pairs(const DsaSpec& spec);

struct DsaWorkload {
  DsaSpec spec;
  IndexerWorkload indexer;            // causal ranges
  SparseAttentionWorkload attention;  // q, kv and sm_scale; its indices are empty

  // The indexer's scores: 2 * (scored pairs) * H * D.
  double indexer_flops() const;
  // Both attention products over the attended pairs: 2 * pairs * h_q * (d_qk + d_v).
  double attention_flops() const;
  // Host problems over these arrays; the caller sets the indexer's indices and the attention's
  // out (and max_logits, lse).
  IndexerProblem indexer_problem() const;
  SparseAttentionProblem attention_problem(const int32_t* indices) const;
};

// Generates both halves (in parallel over all hardware threads). The spec must pass
// dsa_spec_error.
DsaWorkload make_dsa_workload(const DsaSpec& spec);

}  // namespace litetopk::testkit
