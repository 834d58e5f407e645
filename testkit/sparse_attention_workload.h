// Inputs for sparse attention (sparse_attention, litetopk/attention.h): bf16 q and kv and int32
// index rows with a controlled overlap between neighbouring queries, generated on the host from a
// seed (the same spec always gives the same bytes, for any thread count); and the overlap study's
// metric, the union of the selections of G neighbouring queries.
//
// Values: q and kv are bf16 of N(0, q_std^2) and N(0, kv_std^2) (FlashMLA's sparse prefill test
// uses N(0, 1) / 10 for both; the default 1 gives logits of standard deviation about 1 at
// sm_scale = 1 / sqrt(d_qk), a softmax neither flat nor one-hot).
//
// Index rows. Each query's topk slots hold n_valid = topk - n_pad - n_out distinct tokens of
// [0, s_kv), n_out out-of-range entries and n_pad trailing -1 (padding, as the indexer writes it
// for a short row), with n_pad = round(padding_fraction * topk) and n_out =
// round(out_of_range_fraction * topk). The valid tokens and the out-of-range entries are shuffled
// together in front of the padding. An out-of-range entry is one of s_kv, a random value in
// (s_kv, INT32_MAX], INT32_MAX, -2, a random negative or INT32_MIN.
// - kRandom: each query draws its valid tokens on its own, uniformly (neighbours overlap only by
//   chance): the worst case for packing.
// - kGroupShared: queries [g * G, (g + 1) * G) form group g (the last one is shorter when G does
//   not divide s_q: the chunk's edge). The group shares n_shared = round(shared_fraction *
//   n_valid) tokens that every member holds; each member's other n_valid - n_shared tokens are its
//   own, distinct from every other member's. A full group's union is exactly n_shared +
//   G * (n_valid - n_shared): shared_fraction 1 gives G identical sets, 0 disjoint ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/attention.h"

namespace litetopk::testkit {

enum class IndexPattern {
  kRandom,
  kGroupShared,
};

struct SparseAttentionSpec {
  int64_t s_q = 0;
  int64_t s_kv = 0;
  int64_t h_q = 64;
  int64_t d_qk = 576;
  int64_t d_v = 512;
  int64_t topk = 0;
  float sm_scale = 0.0f;  // 0: 1 / sqrt(d_qk)
  IndexPattern pattern = IndexPattern::kRandom;
  int64_t group = 8;                   // G, kGroupShared only
  double shared_fraction = 0.0;        // in [0, 1], kGroupShared only
  double padding_fraction = 0.0;       // in [0, 1]: trailing -1 per row
  double out_of_range_fraction = 0.0;  // in [0, 1]: entries outside [0, s_kv) other than -1
  double q_std = 1.0;
  double kv_std = 1.0;
  uint64_t seed = 0;
};

// "" when the spec can be generated, else why not (negative sizes, fractions outside [0, 1],
// padding + out-of-range > topk, fewer than the needed distinct tokens in s_kv: n_valid for
// kRandom, a full group's union for kGroupShared).
std::string sparse_attention_spec_error(const SparseAttentionSpec& spec);
// "s_q=4096 s_kv=131072 h_q=64 d_qk=576 topk=2048 groups of 8, 50% shared"
std::string sparse_attention_shape_label(const SparseAttentionSpec& spec);

struct SparseAttentionWorkload {
  SparseAttentionSpec spec;
  float sm_scale = 0.0f;         // resolved
  std::vector<uint16_t> q;       // [s_q, h_q, d_qk] bf16 bits
  std::vector<uint16_t> kv;      // [s_kv, 1, d_qk] bf16 bits
  std::vector<int32_t> indices;  // [s_q, 1, topk]

  // Slots whose index is in [0, s_kv): the (query, key) pairs attended.
  int64_t valid_pairs() const;
  // 2 * valid_pairs * h_q * (d_qk + d_v): both matrix products over the valid slots. (FlashMLA's
  // test counts every slot, valid or not.)
  double flops() const;
  // A problem over these host arrays; the caller sets out (and max_logits, lse).
  SparseAttentionProblem host_problem() const;
};

// Generates the inputs (in parallel over all hardware threads). The spec must pass
// sparse_attention_spec_error.
SparseAttentionWorkload make_sparse_attention_workload(const SparseAttentionSpec& spec);
// The index rows alone, [s_q, topk]: the workload's indices (for an overlap study that needs no
// q or kv).
std::vector<int32_t> make_sparse_attention_indices(const SparseAttentionSpec& spec);

// The overlap study's metric over groups of `group` neighbouring queries ([g * G, (g + 1) * G),
// the last one possibly shorter): per group, U = the number of distinct valid tokens (in
// [0, s_kv)) over its members' rows, what a packed kernel loads once per group; and n_q = the
// distinct valid tokens of member q. overlap = (sum n_q - U) / (sum n_q - max n_q): 1 when every
// member holds the same set, 0 when the sets are disjoint (a full kGroupShared group gives
// n_shared / n_valid, shared_fraction up to rounding); undefined (not averaged) for a group whose
// sum n_q equals max n_q, e.g. a single query or a single non-empty member.
struct GroupUnionStats {
  int64_t group = 0;
  std::vector<int64_t> unions;  // U per group
  int64_t total_union = 0;      // sum of U over groups
  int64_t total_distinct = 0;   // sum of n_q over queries
  double mean_union = 0.0;      // over groups
  double mean_overlap = 0.0;    // over groups where it is defined
  int64_t overlap_groups = 0;   // groups where it is defined
  // Rows loaded one query at a time over rows loaded once per group: total_distinct /
  // total_union (1 without sharing, G when the G members hold the same set).
  double reuse() const;
};

// indices [s_q, topk] (row stride topk), group >= 1, s_kv >= 0.
GroupUnionStats measure_group_unions(const int32_t* indices, int64_t s_q, int64_t topk,
                                     int64_t s_kv, int64_t group);

}  // namespace litetopk::testkit
