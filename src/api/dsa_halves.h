// dsa_prefill's two halves (litetopk/dsa.h) as the calls they run: the indexer's problem and the
// attention's over the same T queries and S positions (indexer key s is kv row s), and the
// halves' messages in the DSA problem's names.
#pragma once

#include <cstdint>

#include "litetopk/attention.h"
#include "litetopk/dsa.h"
#include "litetopk/indexer.h"

namespace litetopk::detail {

// The indexer half: index_q, index_kv, index_kv_scale, index_weights, ks, ke, T, S, H, D and k,
// writing `indices` (no values).
IndexerProblem dsa_indexer_half(const DsaPrefillProblem& problem, int32_t* indices);
// The attention half: q, kv, h_q, d_qk, d_v, sm_scale and the outputs over `indices` (absolute
// kv rows): s_q = T, s_kv = S, topk = k, with `algo`.
SparseAttentionProblem dsa_attention_half(const DsaPrefillProblem& problem,
                                          const int32_t* indices, SparseAttentionAlgo algo);

// A failed Status of a half with every field name of that half in its message replaced by the
// DSA problem's (the indexer's q becomes index_q, num_heads index_heads, options options.indexer;
// the attention's s_q num_queries, topk k, algo attention_algo ...); other Statuses as they are.
Status dsa_indexer_status(const Status& status);
Status dsa_attention_status(const Status& status);

}  // namespace litetopk::detail
