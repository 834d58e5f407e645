// dsa_prefill's halves and their messages in the DSA problem's names (api/dsa_halves.h).
#include "api/dsa_halves.h"

#include <cctype>
#include <string>

namespace litetopk::detail {

namespace {

struct Rename {
  const char* half;
  const char* dsa;
};

constexpr Rename kIndexerNames[] = {
    {"q", "index_q"},           {"kv", "index_kv"},          {"kv_scale", "index_kv_scale"},
    {"weights", "index_weights"}, {"num_heads", "index_heads"}, {"head_dim", "index_head_dim"},
    {"options", "options.indexer"},
};
constexpr Rename kAttentionNames[] = {
    {"s_q", "num_queries"}, {"s_kv", "num_keys"}, {"topk", "k"}, {"algo", "attention_algo"},
};

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// `message` with each whole identifier found in `names` replaced.
template <std::size_t N>
std::string renamed(const std::string& message, const Rename (&names)[N]) {
  std::string result;
  for (std::size_t i = 0; i < message.size();) {
    if (!identifier_char(message[i])) {
      result += message[i++];
      continue;
    }
    std::size_t end = i;
    while (end < message.size() && identifier_char(message[end])) ++end;
    std::string word = message.substr(i, end - i);
    for (const Rename& name : names) {
      if (word == name.half) word = name.dsa;
    }
    result += word;
    i = end;
  }
  return result;
}

template <std::size_t N>
Status renamed_status(const Status& status, const Rename (&names)[N]) {
  if (status.is_ok()) return status;
  return Status(status.code(), renamed(status.message(), names));
}

}  // namespace

IndexerProblem dsa_indexer_half(const DsaPrefillProblem& p, int32_t* indices) {
  IndexerProblem half;
  half.q = p.index_q;
  half.kv = p.index_kv;
  half.kv_scale = p.index_kv_scale;
  half.weights = p.index_weights;
  half.ks = p.ks;
  half.ke = p.ke;
  half.num_queries = p.num_queries;
  half.num_heads = p.index_heads;
  half.head_dim = p.index_head_dim;
  half.num_keys = p.num_keys;
  half.k = p.k;
  half.indices = indices;
  return half;
}

SparseAttentionProblem dsa_attention_half(const DsaPrefillProblem& p, const int32_t* indices,
                                          SparseAttentionAlgo algo) {
  SparseAttentionProblem half;
  half.q = p.q;
  half.kv = p.kv;
  half.indices = indices;
  half.s_q = p.num_queries;
  half.s_kv = p.num_keys;
  half.h_q = p.h_q;
  half.d_qk = p.d_qk;
  half.d_v = p.d_v;
  half.topk = p.k;
  half.sm_scale = p.sm_scale;
  half.out = p.out;
  half.max_logits = p.max_logits;
  half.lse = p.lse;
  half.algo = algo;
  return half;
}

Status dsa_indexer_status(const Status& status) { return renamed_status(status, kIndexerNames); }

Status dsa_attention_status(const Status& status) {
  return renamed_status(status, kAttentionNames);
}

}  // namespace litetopk::detail
