// The C API: converts the C structs to the C++ ones, keeps the last error per thread, and stops
// every exception at the boundary.
#include "litetopk/c_api.h"

#include <exception>
#include <string>

#include "litetopk/attention.h"
#include "litetopk/device.h"
#include "litetopk/dsa.h"
#include "litetopk/indexer.h"
#include "litetopk/merge.h"
#include "litetopk/retrieval.h"
#include "litetopk/select.h"
#include "litetopk/sparse_decode.h"

namespace {

thread_local std::string g_last_error;

int record(const litetopk::Status& status) {
  g_last_error = status.is_ok() ? std::string() : status.to_string();
  return static_cast<int>(status.code());
}

int record_exception(const char* what) {
  g_last_error = std::string("Internal: unexpected exception: ") + what;
  return LITETOPK_INTERNAL;
}

litetopk::SelectProblem to_cpp(const litetopk_select_problem& c) {
  litetopk::SelectProblem p;
  p.scores = c.scores;
  p.dtype = static_cast<litetopk::DType>(c.dtype);
  p.batch = c.batch;
  p.n = c.n;
  p.row_stride = c.row_stride;
  p.row_starts = c.row_starts;
  p.row_ends = c.row_ends;
  p.k = c.k;
  p.largest = (c.flags & LITETOPK_SMALLEST) == 0;
  p.sorted = (c.flags & LITETOPK_SORTED) != 0;
  p.deterministic = (c.flags & LITETOPK_DETERMINISTIC) != 0;
  p.indices = c.indices;
  p.values = c.values;
  return p;
}

litetopk::SelectOptions options_of(const litetopk_select_problem& c, int32_t algo) {
  litetopk::SelectOptions o;
  o.algo = static_cast<litetopk::SelectAlgo>(algo);
  o.validate_ranges = (c.flags & LITETOPK_VALIDATE_RANGES) != 0;
  return o;
}

litetopk::Status null_problem() {
  return {litetopk::StatusCode::kInvalidArgument, "problem must not be null"};
}

static_assert(LITETOPK_ALGO_AUTO == static_cast<int>(litetopk::SelectAlgo::kAuto));
static_assert(LITETOPK_ALGO_RADIX == static_cast<int>(litetopk::SelectAlgo::kRadix));
static_assert(LITETOPK_ALGO_SAMPLE_FILTER == static_cast<int>(litetopk::SelectAlgo::kSampleFilter));
static_assert(LITETOPK_ALGO_GRID_RADIX == static_cast<int>(litetopk::SelectAlgo::kGridRadix));
static_assert(LITETOPK_ALGO_SIEVE == static_cast<int>(litetopk::SelectAlgo::kSieve));
static_assert(LITETOPK_ALGO_CLUSTER == static_cast<int>(litetopk::SelectAlgo::kCluster));
static_assert(LITETOPK_ALGO_REGISTER == static_cast<int>(litetopk::SelectAlgo::kRegister));
static_assert(LITETOPK_INDEXER_AUTO == static_cast<int>(litetopk::IndexerAlgo::kAuto));
static_assert(LITETOPK_INDEXER_UNFUSED == static_cast<int>(litetopk::IndexerAlgo::kUnfused));
static_assert(LITETOPK_INDEXER_FUSED == static_cast<int>(litetopk::IndexerAlgo::kFused));
static_assert(LITETOPK_ATTENTION_AUTO == static_cast<int>(litetopk::SparseAttentionAlgo::kAuto));
static_assert(LITETOPK_ATTENTION_PER_QUERY ==
              static_cast<int>(litetopk::SparseAttentionAlgo::kPerQuery));
static_assert(LITETOPK_ATTENTION_UNION_PACKED ==
              static_cast<int>(litetopk::SparseAttentionAlgo::kUnionPacked));
static_assert(LITETOPK_ATTENTION_PLAIN == static_cast<int>(litetopk::SparseAttentionAlgo::kPlain));

litetopk::IndexerProblem to_cpp(const litetopk_indexer_problem& c) {
  litetopk::IndexerProblem p;
  p.q = c.q;
  p.kv = c.kv;
  p.kv_scale = c.kv_scale;
  p.weights = c.weights;
  p.ks = c.ks;
  p.ke = c.ke;
  p.num_queries = c.num_queries;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.num_keys = c.num_keys;
  p.k = c.k;
  p.indices = c.indices;
  p.values = c.values;
  return p;
}

// The options of an indexer call; an algo outside the enum is an error, not a cast.
litetopk::Status indexer_options(int32_t algo, int64_t candidate_capacity,
                                 const litetopk::IndexerState* state,
                                 litetopk::IndexerOptions* options) {
  if (algo != LITETOPK_INDEXER_AUTO && algo != LITETOPK_INDEXER_UNFUSED &&
      algo != LITETOPK_INDEXER_FUSED) {
    return {litetopk::StatusCode::kInvalidArgument,
            "algo must be 0 (auto), 1 (unfused) or 2 (fused), got " + std::to_string(algo)};
  }
  if (candidate_capacity < 0) {
    return {litetopk::StatusCode::kInvalidArgument,
            "candidate_capacity must be >= 0 (0: the default), got " +
                std::to_string(candidate_capacity)};
  }
  options->algo = static_cast<litetopk::IndexerAlgo>(algo);
  options->candidate_capacity = candidate_capacity;
  options->state = state;
  return litetopk::Status::ok();
}

litetopk::PagedIndexerProblem to_cpp(const litetopk_paged_indexer_problem& c) {
  litetopk::PagedIndexerProblem p;
  p.q = c.q;
  p.kv_cache = c.kv_cache;
  p.weights = c.weights;
  p.context_lens = c.context_lens;
  p.block_table = c.block_table;
  p.batch = c.batch;
  p.next_n = c.next_n;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.num_blocks = c.num_blocks;
  p.block_size = c.block_size;
  p.max_blocks = c.max_blocks;
  p.max_context = c.max_context;
  p.k = c.k;
  p.indices = c.indices;
  p.values = c.values;
  return p;
}

litetopk::SparseAttentionProblem to_cpp(const litetopk_sparse_attention_problem& c) {
  litetopk::SparseAttentionProblem p;
  p.q = c.q;
  p.kv = c.kv;
  p.indices = c.indices;
  p.s_q = c.s_q;
  p.s_kv = c.s_kv;
  p.h_q = c.h_q;
  p.d_qk = c.d_qk;
  p.d_v = c.d_v;
  p.topk = c.topk;
  p.sm_scale = c.sm_scale;
  p.out = c.out;
  p.max_logits = c.max_logits;
  p.lse = c.lse;
  p.algo = static_cast<litetopk::SparseAttentionAlgo>(c.algo);
  return p;
}

litetopk::DsaPrefillProblem to_cpp(const litetopk_dsa_prefill_problem& c) {
  litetopk::DsaPrefillProblem p;
  p.index_q = c.index_q;
  p.index_kv = c.index_kv;
  p.index_kv_scale = c.index_kv_scale;
  p.index_weights = c.index_weights;
  p.ks = c.ks;
  p.ke = c.ke;
  p.num_queries = c.num_queries;
  p.num_keys = c.num_keys;
  p.index_heads = c.index_heads;
  p.index_head_dim = c.index_head_dim;
  p.k = c.k;
  p.q = c.q;
  p.kv = c.kv;
  p.h_q = c.h_q;
  p.d_qk = c.d_qk;
  p.d_v = c.d_v;
  p.sm_scale = c.sm_scale;
  p.out = c.out;
  p.max_logits = c.max_logits;
  p.lse = c.lse;
  p.indices = c.indices;
  return p;
}

litetopk::SparseKvCache to_cpp(const litetopk_sparse_kv_cache& c) {
  litetopk::SparseKvCache p;
  p.dtype = static_cast<litetopk::DType>(c.dtype);
  p.batch = c.batch;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.block_size = c.block_size;
  p.max_blocks = c.max_blocks;
  p.block_table = c.block_table;
  p.num_pages = c.num_pages;
  p.lengths = c.lengths;
  p.key_codes = c.key_codes;
  p.key_scales = c.key_scales;
  p.key_residuals = c.key_residuals;
  p.values = c.values;
  p.tail_keys = c.tail_keys;
  return p;
}

litetopk::DenseKvCache to_cpp(const litetopk_dense_kv_cache& c) {
  litetopk::DenseKvCache p;
  p.dtype = static_cast<litetopk::DType>(c.dtype);
  p.batch = c.batch;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.capacity = c.capacity;
  p.keys = c.keys;
  p.values = c.values;
  p.batch_stride = c.batch_stride;
  p.head_stride = c.head_stride;
  p.token_stride = c.token_stride;
  p.lengths = c.lengths;
  return p;
}

litetopk::SparseDecodeProblem to_cpp(const litetopk_sparse_decode_problem& c) {
  litetopk::SparseDecodeProblem p;
  p.cache = to_cpp(c.cache);
  p.q = c.q;
  p.num_q_heads = c.num_q_heads;
  p.softmax_scale = c.softmax_scale;
  p.delta = c.delta;
  p.out = c.out;
  p.out_dtype = static_cast<litetopk::DType>(c.out_dtype);
  p.lse = c.lse;
  p.kept_mask = c.kept_mask;
  p.selection = static_cast<litetopk::SparseSelection>(c.selection);
  p.mass_target = c.mass_target;
  return p;
}

litetopk::DenseDecodeProblem to_cpp(const litetopk_dense_decode_problem& c) {
  litetopk::DenseDecodeProblem p;
  p.cache = to_cpp(c.cache);
  p.q = c.q;
  p.num_q_heads = c.num_q_heads;
  p.softmax_scale = c.softmax_scale;
  p.out = c.out;
  p.out_dtype = static_cast<litetopk::DType>(c.out_dtype);
  p.lse = c.lse;
  return p;
}

litetopk::DecodeFidelityProblem to_cpp(const litetopk_decode_fidelity_problem& c) {
  litetopk::DecodeFidelityProblem p;
  p.reference = to_cpp(c.reference);
  p.out = c.out;
  p.out_dtype = static_cast<litetopk::DType>(c.out_dtype);
  p.kept_mask = c.kept_mask;
  p.block_size = c.block_size;
  p.mask_blocks = c.mask_blocks;
  return p;
}

// NULL options mean the defaults.
litetopk::DecodeOptions to_cpp(const litetopk_decode_options* c) {
  litetopk::DecodeOptions o;
  if (c != nullptr) {
    o.blocks_per_split = c->blocks_per_split;
    o.read_all_when_small = c->select_at_every_size == 0;
  }
  return o;
}

litetopk::Status null_argument(const char* name) {
  return {litetopk::StatusCode::kInvalidArgument, std::string(name) + " must not be null"};
}

// Runs `body` (returning a Status) with exceptions turned into codes.
template <typename Body>
int guarded(Body&& body) {
  try {
    return record(body());
  } catch (const std::exception& e) {
    return record_exception(e.what());
  } catch (...) {
    return record_exception("unknown");
  }
}

// A state passed as (data, bytes): none is (null, 0).
litetopk::Status check_state_args(const void* state_data, size_t state_bytes) {
  if (state_data == nullptr && state_bytes != 0) {
    return {litetopk::StatusCode::kInvalidArgument,
            "state_data is null but state_bytes is " + std::to_string(state_bytes) +
                " (no state: pass 0)"};
  }
  return litetopk::Status::ok();
}

// guarded(call(C++ form of *problem)), with kInvalidArgument for a null problem.
template <typename CProblem, typename Call>
int on_problem(const CProblem* problem, Call&& call) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return call(to_cpp(*problem));
  });
}

// The algorithm `dispatch` picks for *problem, as an int; `fallback` for a null problem or an
// exception (a dispatch query has no Status to report through).
template <typename CProblem, typename Dispatch>
int dispatched(const CProblem* problem, int fallback, Dispatch&& dispatch) {
  if (problem == nullptr) return fallback;
  try {
    return static_cast<int>(dispatch(to_cpp(*problem)));
  } catch (...) {
    return fallback;
  }
}

}  // namespace

extern "C" {

const char* litetopk_last_error(void) { return g_last_error.c_str(); }

const char* litetopk_version(void) {
  static const std::string version = litetopk::build_info().version;
  return version.c_str();
}

int litetopk_select_topk_workspace_size(const litetopk_select_problem* problem, int32_t algo,
                                        size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::select_topk_workspace_size(p, workspace_bytes,
                                                options_of(*problem, algo));
  });
}

int litetopk_select_topk(const litetopk_select_problem* problem, int32_t algo, void* workspace,
                         size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::select_topk(p, workspace, workspace_bytes,
                                 static_cast<cudaStream_t>(stream), options_of(*problem, algo));
  });
}

int litetopk_select_topk_dispatch(const litetopk_select_problem* problem) {
  return dispatched(problem, LITETOPK_ALGO_RADIX,
                    [](const auto& p) { return litetopk::select_topk_dispatch(p); });
}

int litetopk_select_topk_cpu(const litetopk_select_problem* problem, int32_t cpu_algo,
                             int32_t num_threads) {
  return on_problem(problem, [&](const auto& p) {
    if (cpu_algo != LITETOPK_CPU_REFERENCE && cpu_algo != LITETOPK_CPU_FAST) {
      return litetopk::Status(litetopk::StatusCode::kInvalidArgument,
                              "cpu_algo must be 0 (reference) or 1 (fast), got " +
                                  std::to_string(cpu_algo));
    }
    return litetopk::select_topk_cpu(p,
                                     static_cast<litetopk::CpuSelectAlgo>(cpu_algo), num_threads);
  });
}

size_t litetopk_indexer_state_bytes(int64_t k) {
  try {
    return litetopk::indexer_state_bytes(k);
  } catch (...) {
    return 0;
  }
}

int litetopk_indexer_state_reset(void* state_data, size_t state_bytes, void* stream) {
  return guarded([&] {
    litetopk::IndexerState state;
    state.data = state_data;
    state.bytes = state_bytes;
    return litetopk::indexer_state_reset(state, static_cast<cudaStream_t>(stream));
  });
}

int litetopk_indexer_topk_workspace_size(const litetopk_indexer_problem* problem, int32_t algo,
                                         int64_t candidate_capacity, size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, candidate_capacity, nullptr, &options); !s) {
      return s;
    }
    return litetopk::indexer_topk_workspace_size(p, workspace_bytes, options);
  });
}

int litetopk_indexer_topk(const litetopk_indexer_problem* problem, int32_t algo,
                          int64_t candidate_capacity, void* state_data, size_t state_bytes,
                          void* workspace, size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    if (litetopk::Status s = check_state_args(state_data, state_bytes); !s) return s;
    litetopk::IndexerState state;
    state.data = state_data;
    state.bytes = state_bytes;
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, candidate_capacity,
                                             state_data != nullptr ? &state : nullptr, &options);
        !s) {
      return s;
    }
    return litetopk::indexer_topk(p, workspace, workspace_bytes,
                                  static_cast<cudaStream_t>(stream), options);
  });
}

int litetopk_indexer_topk_dispatch(const litetopk_indexer_problem* problem) {
  return dispatched(problem, LITETOPK_INDEXER_UNFUSED,
                    [](const auto& p) { return litetopk::indexer_topk_dispatch(p); });
}

int litetopk_indexer_logits(const litetopk_indexer_problem* problem, float* logits,
                            int64_t logits_stride, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_logits(p, logits, logits_stride,
                                    static_cast<cudaStream_t>(stream));
  });
}

int litetopk_indexer_topk_cpu(const litetopk_indexer_problem* problem) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_topk_cpu(p);
  });
}

int litetopk_indexer_logits_cpu(const litetopk_indexer_problem* problem, float* logits,
                                int64_t logits_stride) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_logits_cpu(p, logits, logits_stride);
  });
}

int litetopk_indexer_topk_paged_workspace_size(const litetopk_paged_indexer_problem* problem,
                                               int32_t algo, size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, 0, nullptr, &options); !s) return s;
    return litetopk::indexer_topk_paged_workspace_size(p, workspace_bytes,
                                                       options);
  });
}

int litetopk_indexer_topk_paged(const litetopk_paged_indexer_problem* problem, int32_t algo,
                                void* workspace, size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, 0, nullptr, &options); !s) return s;
    return litetopk::indexer_topk_paged(p, workspace, workspace_bytes,
                                        static_cast<cudaStream_t>(stream), options);
  });
}

int litetopk_indexer_topk_paged_dispatch(const litetopk_paged_indexer_problem* problem) {
  return dispatched(problem, LITETOPK_INDEXER_UNFUSED,
                    [](const auto& p) { return litetopk::indexer_topk_paged_dispatch(p); });
}

int litetopk_indexer_logits_paged(const litetopk_paged_indexer_problem* problem, float* logits,
                                  int64_t logits_stride, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_logits_paged(p, logits, logits_stride,
                                          static_cast<cudaStream_t>(stream));
  });
}

int litetopk_indexer_topk_paged_cpu(const litetopk_paged_indexer_problem* problem) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_topk_paged_cpu(p);
  });
}

int litetopk_indexer_logits_paged_cpu(const litetopk_paged_indexer_problem* problem,
                                      float* logits, int64_t logits_stride) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::indexer_logits_paged_cpu(p, logits, logits_stride);
  });
}

int litetopk_sparse_kv_cache_bytes(const litetopk_sparse_kv_cache* shape,
                                   litetopk_sparse_kv_bytes* bytes) {
  return guarded([&] {
    if (shape == nullptr) return null_argument("shape");
    if (bytes == nullptr) return null_argument("bytes");
    litetopk::SparseKvCacheBytes b;
    if (litetopk::Status s = litetopk::sparse_kv_cache_bytes(to_cpp(*shape), &b); !s) return s;
    bytes->key_codes = b.key_codes;
    bytes->key_scales = b.key_scales;
    bytes->key_residuals = b.key_residuals;
    bytes->values = b.values;
    bytes->tail_keys = b.tail_keys;
    bytes->lengths = b.lengths;
    bytes->block_table = b.block_table;
    bytes->total = b.total();
    return litetopk::Status::ok();
  });
}

int64_t litetopk_sparse_kv_num_slots(const litetopk_sparse_kv_cache* shape) {
  if (shape == nullptr) return 0;
  try {
    return litetopk::sparse_kv_num_slots(to_cpp(*shape));
  } catch (...) {
    return 0;
  }
}

double litetopk_sparse_kv_bytes_per_token(int64_t block_size, int64_t head_dim) {
  try {
    return litetopk::sparse_kv_bytes_per_token(block_size, head_dim);
  } catch (...) {
    return 0;
  }
}

int litetopk_sparse_kv_append(const litetopk_sparse_kv_cache* cache, const void* new_keys,
                              const void* new_values, void* stream) {
  return guarded([&] {
    if (cache == nullptr) return null_argument("cache");
    return litetopk::sparse_kv_append(to_cpp(*cache), new_keys, new_values,
                                      static_cast<cudaStream_t>(stream));
  });
}

int litetopk_sparse_kv_from_dense(const litetopk_dense_kv_cache* dense,
                                  const litetopk_sparse_kv_cache* cache, void* stream) {
  return guarded([&] {
    if (dense == nullptr) return null_argument("dense");
    if (cache == nullptr) return null_argument("cache");
    return litetopk::sparse_kv_from_dense(to_cpp(*dense), to_cpp(*cache),
                                          static_cast<cudaStream_t>(stream));
  });
}

int litetopk_sparse_decode_workspace_size(const litetopk_sparse_decode_problem* problem,
                                          const litetopk_decode_options* options,
                                          size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::sparse_decode_workspace_size(p, workspace_bytes,
                                                  to_cpp(options));
  });
}

int litetopk_sparse_decode(const litetopk_sparse_decode_problem* problem,
                           const litetopk_decode_options* options, void* workspace,
                           size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::sparse_decode(p, workspace, workspace_bytes,
                                   static_cast<cudaStream_t>(stream), to_cpp(options));
  });
}

int litetopk_dense_decode_workspace_size(const litetopk_dense_decode_problem* problem,
                                         const litetopk_decode_options* options,
                                         size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::dense_decode_workspace_size(p, workspace_bytes,
                                                 to_cpp(options));
  });
}

int litetopk_dense_decode(const litetopk_dense_decode_problem* problem,
                          const litetopk_decode_options* options, void* workspace,
                          size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::dense_decode(p, workspace, workspace_bytes,
                                  static_cast<cudaStream_t>(stream), to_cpp(options));
  });
}

int litetopk_sparse_kv_append_cpu(const litetopk_sparse_kv_cache* cache, const void* new_keys,
                                  const void* new_values) {
  return guarded([&] {
    if (cache == nullptr) return null_argument("cache");
    return litetopk::sparse_kv_append_cpu(to_cpp(*cache), new_keys, new_values);
  });
}

int litetopk_sparse_kv_rebuild_cpu(const litetopk_sparse_kv_cache* cache,
                                   const litetopk_dense_kv_cache* out) {
  return guarded([&] {
    if (cache == nullptr) return null_argument("cache");
    if (out == nullptr) return null_argument("out");
    return litetopk::sparse_kv_rebuild_cpu(to_cpp(*cache), to_cpp(*out));
  });
}

int litetopk_sparse_decode_cpu(const litetopk_sparse_decode_problem* problem, double* pseudo_max,
                               double* block_estimate, double* kept_fraction) {
  return on_problem(problem, [&](const auto& p) {
    litetopk::SparseDecodeCpuDiagnostics diagnostics;
    diagnostics.pseudo_max = pseudo_max;
    diagnostics.block_estimate = block_estimate;
    diagnostics.kept_fraction = kept_fraction;
    return litetopk::sparse_decode_cpu(p, diagnostics);
  });
}

int litetopk_dense_decode_cpu(const litetopk_dense_decode_problem* problem) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::dense_decode_cpu(p);
  });
}

int litetopk_decode_fidelity_cpu(const litetopk_decode_fidelity_problem* problem,
                                 litetopk_decode_fidelity* fidelity) {
  return on_problem(problem, [&](const auto& p) {
    if (fidelity == nullptr) return null_argument("fidelity");
    litetopk::DecodeFidelity f;
    if (litetopk::Status s = litetopk::decode_fidelity_cpu(p, &f); !s) return s;
    fidelity->rel_l2 = f.rel_l2;
    fidelity->max_head_rel_l2 = f.max_head_rel_l2;
    fidelity->kept_fraction = f.kept_fraction;
    fidelity->kept_mass_mean = f.kept_mass_mean;
    fidelity->kept_mass_min = f.kept_mass_min;
    fidelity->top1_recall = f.top1_recall;
    fidelity->top1_recall_min = f.top1_recall_min;
    fidelity->top1_block_recall = f.top1_block_recall;
    fidelity->top1_block_recall_min = f.top1_block_recall_min;
    fidelity->read_fraction = f.read_fraction;
    return litetopk::Status::ok();
  });
}

int litetopk_sparse_attention_workspace_size(const litetopk_sparse_attention_problem* problem,
                                             size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::sparse_attention_workspace_size(p, workspace_bytes);
  });
}

int litetopk_sparse_attention(const litetopk_sparse_attention_problem* problem, void* workspace,
                              size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::sparse_attention(p, workspace, workspace_bytes,
                                      static_cast<cudaStream_t>(stream));
  });
}

int litetopk_sparse_attention_cpu(const litetopk_sparse_attention_problem* problem) {
  return on_problem(problem, [&](const auto& p) {
    return litetopk::sparse_attention_cpu(p);
  });
}

}  // extern "C"

// ---- merge_topk ----

namespace {

litetopk::MergeProblem merge_problem_of(const litetopk_merge_problem& c) {
  litetopk::MergeProblem p;
  p.values = c.values;
  p.indices = c.indices;
  p.counts = c.counts;
  p.batch = c.batch;
  p.shards = c.shards;
  p.k_in = c.k_in;
  p.row_stride = c.row_stride;
  p.shard_stride = c.shard_stride;
  p.k = c.k;
  p.largest = (c.flags & LITETOPK_SMALLEST) == 0;
  p.sorted = (c.flags & LITETOPK_SORTED) != 0;
  p.deterministic = (c.flags & LITETOPK_DETERMINISTIC) != 0;
  p.out_indices = c.out_indices;
  p.out_values = c.out_values;
  return p;
}

// on_problem for the merge problem (whose conversion is declared after on_problem's lookup).
template <typename Call>
int on_merge_problem(const litetopk_merge_problem* problem, Call&& call) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return call(merge_problem_of(*problem));
  });
}

}  // namespace

extern "C" {

int litetopk_merge_topk_workspace_size(const litetopk_merge_problem* problem,
                                       size_t* workspace_bytes) {
  return on_merge_problem(problem, [&](const auto& p) {
    return litetopk::merge_topk_workspace_size(p, workspace_bytes);
  });
}

int litetopk_merge_topk(const litetopk_merge_problem* problem, void* workspace,
                        size_t workspace_bytes, void* stream) {
  return on_merge_problem(problem, [&](const auto& p) {
    return litetopk::merge_topk(p, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  });
}

int litetopk_merge_topk_cpu(const litetopk_merge_problem* problem) {
  return on_merge_problem(problem, [&](const auto& p) { return litetopk::merge_topk_cpu(p); });
}

}  // extern "C"

// ---- dsa_prefill ----

namespace {

// The options of a dsa_prefill call: the indexer's as indexer_options checks them, the
// attention's kernel as the plan checks it (an algo outside the enum is named there).
litetopk::Status dsa_options(int32_t indexer_algo, int32_t attention_algo,
                             const litetopk::IndexerState* state,
                             litetopk::DsaPrefillOptions* options) {
  options->attention_algo = static_cast<litetopk::SparseAttentionAlgo>(attention_algo);
  return indexer_options(indexer_algo, 0, state, &options->indexer);
}

}  // namespace

extern "C" {

int litetopk_dsa_prefill_workspace_size(const litetopk_dsa_prefill_problem* problem,
                                        int32_t indexer_algo, int32_t attention_algo,
                                        size_t* workspace_bytes) {
  return on_problem(problem, [&](const auto& p) {
    litetopk::DsaPrefillOptions options;
    if (litetopk::Status s = dsa_options(indexer_algo, attention_algo, nullptr, &options); !s) {
      return s;
    }
    return litetopk::dsa_prefill_workspace_size(p, workspace_bytes, options);
  });
}

int litetopk_dsa_prefill(const litetopk_dsa_prefill_problem* problem, int32_t indexer_algo,
                         int32_t attention_algo, void* state_data, size_t state_bytes,
                         void* workspace, size_t workspace_bytes, void* stream) {
  return on_problem(problem, [&](const auto& p) {
    if (litetopk::Status s = check_state_args(state_data, state_bytes); !s) return s;
    const litetopk::IndexerState state{state_data, state_bytes};
    litetopk::DsaPrefillOptions options;
    if (litetopk::Status s = dsa_options(indexer_algo, attention_algo,
                                         state_data != nullptr ? &state : nullptr, &options);
        !s) {
      return s;
    }
    return litetopk::dsa_prefill(p, workspace, workspace_bytes,
                                 static_cast<cudaStream_t>(stream), options);
  });
}

int litetopk_dsa_prefill_cpu(const litetopk_dsa_prefill_problem* problem) {
  return on_problem(problem, [&](const auto& p) { return litetopk::dsa_prefill_cpu(p); });
}

}  // extern "C"

// ---- retrieval_topk ----

namespace {

litetopk::RetrievalProblem retrieval_problem_of(const litetopk_retrieval_problem& c) {
  litetopk::RetrievalProblem p;
  p.queries = c.queries;
  p.corpus = c.corpus;
  p.dtype = static_cast<litetopk::DType>(c.dtype);
  p.corpus_format = static_cast<litetopk::RetrievalCorpusFormat>(c.corpus_format);
  p.corpus_scales = c.corpus_scales;
  p.batch = c.batch;
  p.n = c.n;
  p.dim = c.dim;
  p.metric = static_cast<litetopk::RetrievalMetric>(c.metric);
  p.corpus_norms = c.corpus_norms;
  p.range_starts = c.range_starts;
  p.range_ends = c.range_ends;
  p.corpus_bitmap = c.corpus_bitmap;
  p.k = c.k;
  p.sorted = (c.flags & LITETOPK_SORTED) != 0;
  p.deterministic = (c.flags & LITETOPK_DETERMINISTIC) != 0;
  p.indices = c.indices;
  p.scores = c.scores;
  return p;
}

// on_problem for the retrieval problem (whose conversion is declared after on_problem's lookup).
template <typename Call>
int on_retrieval_problem(const litetopk_retrieval_problem* problem, Call&& call) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return call(retrieval_problem_of(*problem));
  });
}

static_assert(LITETOPK_RETRIEVAL_AUTO == static_cast<int>(litetopk::RetrievalPath::kAuto) &&
                  LITETOPK_RETRIEVAL_UNFUSED ==
                      static_cast<int>(litetopk::RetrievalPath::kUnfused) &&
                  LITETOPK_RETRIEVAL_FUSED == static_cast<int>(litetopk::RetrievalPath::kFused),
              "litetopk_retrieval_path mirrors litetopk::RetrievalPath");

litetopk::RetrievalOptions retrieval_options(int64_t chunk_rows,
                                             int32_t path = LITETOPK_RETRIEVAL_AUTO) {
  litetopk::RetrievalOptions options;
  options.chunk_rows = chunk_rows;
  options.path = static_cast<litetopk::RetrievalPath>(path);  // the plan rejects unknown paths
  return options;
}

}  // namespace

extern "C" {

int litetopk_retrieval_topk_workspace_size(const litetopk_retrieval_problem* problem,
                                           int64_t chunk_rows, size_t* workspace_bytes) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_topk_workspace_size(p, workspace_bytes,
                                                   retrieval_options(chunk_rows));
  });
}

int litetopk_retrieval_topk(const litetopk_retrieval_problem* problem, int64_t chunk_rows,
                            void* workspace, size_t workspace_bytes, void* stream) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_topk(p, workspace, workspace_bytes,
                                    static_cast<cudaStream_t>(stream),
                                    retrieval_options(chunk_rows));
  });
}

int litetopk_retrieval_topk_on_path_workspace_size(const litetopk_retrieval_problem* problem,
                                                   int32_t path, int64_t chunk_rows,
                                                   size_t* workspace_bytes) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_topk_workspace_size(p, workspace_bytes,
                                                   retrieval_options(chunk_rows, path));
  });
}

int litetopk_retrieval_topk_on_path(const litetopk_retrieval_problem* problem, int32_t path,
                                    int64_t chunk_rows, void* workspace, size_t workspace_bytes,
                                    void* stream) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_topk(p, workspace, workspace_bytes,
                                    static_cast<cudaStream_t>(stream),
                                    retrieval_options(chunk_rows, path));
  });
}

int litetopk_retrieval_topk_cpu(const litetopk_retrieval_problem* problem, int32_t num_threads) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_topk_cpu(p, num_threads);
  });
}

int litetopk_retrieval_corpus_norms(const litetopk_retrieval_problem* problem, float* norms,
                                    void* stream) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_corpus_norms(p, norms, static_cast<cudaStream_t>(stream));
  });
}

int litetopk_retrieval_corpus_norms_cpu(const litetopk_retrieval_problem* problem, float* norms) {
  return on_retrieval_problem(problem, [&](const auto& p) {
    return litetopk::retrieval_corpus_norms_cpu(p, norms);
  });
}

}  // extern "C"
