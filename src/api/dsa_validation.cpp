// Argument checks for dsa_prefill (validate_dsa_prefill_problem): the indexer's and the
// attention's own checks over the halves (api/dsa_halves.h), their messages in the DSA problem's
// names. Never reads ks, ke or any other array.
#include "api/dsa_validation.h"

#include <cstdint>

#include "api/argument_checks.h"
#include "api/dsa_halves.h"
#include "api/indexer_validation.h"
#include "api/sparse_attention_validation.h"

namespace litetopk {

Status detail::validate_dsa_prefill_sizes(const DsaPrefillProblem& p, SparseAttentionAlgo algo) {
  if (Status s = dsa_indexer_status(validate_indexer_sizes(dsa_indexer_half(p, nullptr))); !s) {
    return s;
  }
  return dsa_attention_status(
      validate_sparse_attention_shapes(dsa_attention_half(p, nullptr, algo)));
}

Status detail::validate_dsa_prefill_addresses(const DsaPrefillProblem& p) {
  if (p.num_queries == 0) return Status::ok();
  if (Status s = dsa_indexer_status(
          validate_indexer_input_addresses(dsa_indexer_half(p, p.indices)));
      !s) {
    return s;
  }
  if (Status s = check_alignment({{"indices", p.indices}}, alignof(int32_t)); !s) return s;
  // The attention's kv rows are the call's own (the caller's indices or the workspace's): any
  // aligned address stands for them here.
  alignas(int32_t) static const int32_t rows_placeholder = -1;
  const int32_t* rows = p.indices != nullptr ? p.indices : &rows_placeholder;
  return dsa_attention_status(validate_sparse_attention_addresses(
      dsa_attention_half(p, rows, SparseAttentionAlgo::kAuto)));
}

Status validate_dsa_prefill_problem(const DsaPrefillProblem& p) {
  if (Status s = detail::validate_dsa_prefill_sizes(p, SparseAttentionAlgo::kAuto); !s) return s;
  return detail::validate_dsa_prefill_addresses(p);
}

}  // namespace litetopk
