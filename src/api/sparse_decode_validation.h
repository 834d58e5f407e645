// Internal argument checks and resolved defaults for sparse_decode (public entry points:
// validate_* in litetopk/sparse_decode.h). Every failure is kInvalidArgument naming the argument,
// the expected and the actual value.
#pragma once

#include <cstdint>

#include "litetopk/sparse_decode.h"

namespace litetopk::detail {

// The shape checks of validate_sparse_kv_cache without the pointer checks.
Status validate_sparse_kv_shape(const SparseKvCache& cache);

// The shape checks of validate_sparse_decode_problem / validate_dense_decode_problem alone (what a
// plan checks once; a paged cache is one whose block_table is not null).
Status validate_sparse_decode_shapes(const SparseDecodeProblem& problem);
Status validate_dense_decode_shapes(const DenseDecodeProblem& problem);

// The pointer checks of validate_sparse_decode_problem / validate_dense_decode_problem alone
// (every array set when there is work, aligned): what each launch of a plan checks.
Status validate_sparse_decode_addresses(const SparseDecodeProblem& problem);
Status validate_dense_decode_addresses(const DenseDecodeProblem& problem);

// A paged cache's writers need pages of their own for the blocks they write (two sequences
// writing one page would race, and a page another block reads would change under it): the
// append writes each sequence's block at its length, the conversion every block in use. A page
// that no one writes may be shared (a prefix). Host copies of the lengths and the table, already
// validated by validate_sparse_kv_lengths.
Status validate_written_pages_unshared(const SparseKvCache& cache, const int32_t* host_lengths,
                                       const int32_t* host_block_table, bool append);

// validate_dense_kv_cache naming the fields with `prefix` ("dense.", "out.") instead of "cache.".
Status validate_dense_kv_cache_as(const DenseKvCache& cache, const char* prefix);

// Element strides of a dense cache with the 0 defaults resolved.
struct DenseStrides {
  int64_t batch = 0, head = 0, token = 0;
};
DenseStrides dense_strides(const DenseKvCache& cache);

// softmax_scale with 0 resolved to 1/sqrt(head_dim), in double.
double resolved_softmax_scale(float softmax_scale, int64_t head_dim);

// Host lengths of a dense cache: 0 <= lengths[b] <= capacity.
Status validate_dense_kv_lengths(const DenseKvCache& cache, const int32_t* host_lengths);

// A conversion's two caches agree: same dtype, batch, num_kv_heads and head_dim.
Status validate_dense_matches_sparse(const DenseKvCache& dense, const SparseKvCache& cache,
                                     const char* dense_name);

// The inputs of a fidelity check: the reference problem (its out/lse are not needed), the result
// and its dtype, the mask and its shape.
Status validate_fidelity_problem(const DecodeFidelityProblem& problem);

}  // namespace litetopk::detail
