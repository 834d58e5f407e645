/* C mirror of the litetopk API, for ctypes and other bindings. Every call returns a
 * litetopk_status code (0 = ok); litetopk_last_error() returns the message of the calling
 * thread's last failed call. No C++ exception crosses this boundary. */
#ifndef LITETOPK_C_API_H_
#define LITETOPK_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values match litetopk::StatusCode, litetopk::DType, litetopk::SelectAlgo, CpuSelectAlgo,
 * litetopk::IndexerAlgo. */
enum litetopk_status {
  LITETOPK_OK = 0,
  LITETOPK_INVALID_ARGUMENT = 1,
  LITETOPK_UNSUPPORTED = 2,
  LITETOPK_WORKSPACE_TOO_SMALL = 3,
  LITETOPK_CUDA_ERROR = 4,
  LITETOPK_NOT_COMPILED = 5,
  LITETOPK_INTERNAL = 6
};
enum litetopk_dtype { LITETOPK_FLOAT32 = 0, LITETOPK_BFLOAT16 = 1, LITETOPK_FLOAT16 = 2 };
enum litetopk_select_algo {
  LITETOPK_ALGO_AUTO = 0,
  LITETOPK_ALGO_RADIX = 1,
  LITETOPK_ALGO_SAMPLE_FILTER = 2,
  LITETOPK_ALGO_GRID_RADIX = 3,
  LITETOPK_ALGO_SIEVE = 4,
  LITETOPK_ALGO_CLUSTER = 5,
  LITETOPK_ALGO_REGISTER = 6
};
enum litetopk_cpu_algo { LITETOPK_CPU_REFERENCE = 0, LITETOPK_CPU_FAST = 1 };
enum litetopk_indexer_algo {
  LITETOPK_INDEXER_AUTO = 0,
  LITETOPK_INDEXER_UNFUSED = 1, /* logits [T, S] fp32 in the workspace, then select_topk */
  LITETOPK_INDEXER_FUSED = 2    /* scores never leave the chip */
};
enum litetopk_sparse_attention_algo {
  LITETOPK_ATTENTION_AUTO = 0,
  LITETOPK_ATTENTION_PER_QUERY = 1,    /* each query gathers its own rows */
  LITETOPK_ATTENTION_UNION_PACKED = 2, /* LiteDSA: h_q 16/32, neighbouring queries' unions */
  LITETOPK_ATTENTION_PLAIN = 3         /* mma.sync, no pipelining: a cross-check */
};

/* Flags for the `flags` argument (bitwise or). Default: largest, unsorted, any tie. */
enum litetopk_select_flags {
  LITETOPK_SMALLEST = 1,
  LITETOPK_SORTED = 2,
  LITETOPK_DETERMINISTIC = 4,
  LITETOPK_VALIDATE_RANGES = 8
};

/* Mirrors litetopk::SelectProblem (see select.h for the contract). */
typedef struct litetopk_select_problem {
  const void* scores;
  int32_t dtype; /* litetopk_dtype */
  int64_t batch;
  int64_t n;
  int64_t row_stride; /* elements; 0 means n */
  const int32_t* row_starts; /* may be NULL */
  const int32_t* row_ends;   /* may be NULL */
  int64_t k;
  uint32_t flags; /* litetopk_select_flags */
  int32_t* indices;
  void* values; /* may be NULL */
} litetopk_select_problem;

const char* litetopk_last_error(void);
const char* litetopk_version(void);

int litetopk_select_topk_workspace_size(const litetopk_select_problem* problem, int32_t algo,
                                        size_t* workspace_bytes);
/* stream is a cudaStream_t (NULL: the default stream). */
int litetopk_select_topk(const litetopk_select_problem* problem, int32_t algo, void* workspace,
                         size_t workspace_bytes, void* stream);
/* Which algorithm LITETOPK_ALGO_AUTO picks for this problem (a litetopk_select_algo). */
int litetopk_select_topk_dispatch(const litetopk_select_problem* problem);
/* Host pointers. num_threads 0: all hardware threads. */
int litetopk_select_topk_cpu(const litetopk_select_problem* problem, int32_t cpu_algo,
                             int32_t num_threads);

/* ---- indexer_topk: the DSA lightning indexer fused with exact top-k (see indexer.h) ---- */

/* Mirrors litetopk::IndexerProblem. For query t and key s in [ks[t], ke[t]):
 *   score[t, s] = kv_scale[s] * sum_h weights[t, h] * max(0, dot(q[t, h, :], kv[s, :]))
 * indices [T, k] int32 relative to ks[t], -1 padded; values [T, k] fp32 optional. */
typedef struct litetopk_indexer_problem {
  const void* q;         /* [T, H, D] fp8 e4m3 */
  const void* kv;        /* [S, D] fp8 e4m3 */
  const float* kv_scale; /* [S] */
  const float* weights;  /* [T, H] */
  const int32_t* ks;     /* [T] first key of each query's range */
  const int32_t* ke;     /* [T] one past its last key */
  int64_t num_queries;   /* T */
  int64_t num_heads;     /* H: 32 or 64 */
  int64_t head_dim;      /* D: 128 */
  int64_t num_keys;      /* S */
  int64_t k;             /* 1 .. 8192 */
  int32_t* indices;      /* [T, k], required */
  float* values;         /* [T, k], may be NULL */
} litetopk_indexer_problem;

/* Bytes of the per-layer state for this k (the hot sample carried from one prefill chunk to the
 * next; see indexer.h); 0 only on an internal error. */
size_t litetopk_indexer_state_bytes(int64_t k);
/* Zeroes a state before the first chunk of a sequence (device memory; stream as below). */
int litetopk_indexer_state_reset(void* state_data, size_t state_bytes, void* stream);

/* algo: a litetopk_indexer_algo. candidate_capacity: IndexerOptions::candidate_capacity (>= 0;
 * 0 the default). The other IndexerOptions keep their defaults. */
int litetopk_indexer_topk_workspace_size(const litetopk_indexer_problem* problem, int32_t algo,
                                         int64_t candidate_capacity, size_t* workspace_bytes);
/* Device pointers. state_data NULL (with state_bytes 0): no state, still exact. stream is a
 * cudaStream_t (NULL: the default stream). */
int litetopk_indexer_topk(const litetopk_indexer_problem* problem, int32_t algo,
                          int64_t candidate_capacity, void* state_data, size_t state_bytes,
                          void* workspace, size_t workspace_bytes, void* stream);
/* Which algorithm LITETOPK_INDEXER_AUTO picks for this problem (a litetopk_indexer_algo). */
int litetopk_indexer_topk_dispatch(const litetopk_indexer_problem* problem);
/* The unfused path's first half: logits[t * logits_stride + s] for s in [0, S), the score inside
 * [ks[t], ke[t]) and -inf outside. problem->k and problem->indices are not used. */
int litetopk_indexer_logits(const litetopk_indexer_problem* problem, float* logits,
                            int64_t logits_stride, void* stream);
/* Host pointers: the CPU reference (fp64 scores rounded to fp32, then exact selection). */
int litetopk_indexer_topk_cpu(const litetopk_indexer_problem* problem);
int litetopk_indexer_logits_cpu(const litetopk_indexer_problem* problem, float* logits,
                                int64_t logits_stride);

/* ---- indexer_topk_paged: the decode-phase indexer over a paged cache (see indexer.h) ---- */

/* Mirrors litetopk::PagedIndexerProblem. Query j (0 .. next_n - 1) of request b sees its first
 * min(max_context, clamp(context_lens[b] - next_n + j + 1, 0, context_lens[b])) tokens; token p
 * lives in block block_table[b * max_blocks + p / block_size], slot p % block_size, of kv_cache
 * (DeepGEMM's fp8_paged_mqa_logits layout: per block, block_size x D fp8 keys then block_size
 * fp32 scales). indices [B * next_n, k] int32 token positions, -1 padded; values optional.
 * Tokens of a block-table entry outside [0, num_blocks) are never selected. */
typedef struct litetopk_paged_indexer_problem {
  const void* q;               /* [B, next_n, H, D] fp8 e4m3 */
  const void* kv_cache;        /* [num_blocks, block_size, 1, D + 4] bytes */
  const float* weights;        /* [B * next_n, H] */
  const int32_t* context_lens; /* [B] */
  const int32_t* block_table;  /* [B, max_blocks] */
  int64_t batch;               /* B */
  int64_t next_n;              /* 1 .. 4 */
  int64_t num_heads;           /* H: 32 or 64 */
  int64_t head_dim;            /* D: 128 */
  int64_t num_blocks;
  int64_t block_size;          /* 64 */
  int64_t max_blocks;
  int64_t max_context;         /* the largest context passed; <= max_blocks * block_size */
  int64_t k;                   /* 1 .. 8192 */
  int32_t* indices;            /* [B * next_n, k], required */
  float* values;               /* [B * next_n, k], may be NULL */
} litetopk_paged_indexer_problem;

/* algo: a litetopk_indexer_algo (no other options: no candidate capacity, and no decode state,
 * which only the C++ and Python doors pass; auto never needs one). The workspace is sized by problem->max_context, never by the device context_lens,
 * so one workspace (and one captured CUDA graph) serves every decode step up to max_context. */
int litetopk_indexer_topk_paged_workspace_size(const litetopk_paged_indexer_problem* problem,
                                               int32_t algo, size_t* workspace_bytes);
/* Device pointers; stream is a cudaStream_t (NULL: the default stream). No allocation, no
 * synchronization, context_lens and block_table never read on the host: graph-capturable. */
int litetopk_indexer_topk_paged(const litetopk_paged_indexer_problem* problem, int32_t algo,
                                void* workspace, size_t workspace_bytes, void* stream);
/* Which algorithm LITETOPK_INDEXER_AUTO picks for this problem (a litetopk_indexer_algo). */
int litetopk_indexer_topk_paged_dispatch(const litetopk_paged_indexer_problem* problem);
/* The unfused path's first half (DeepGEMM's fp8_paged_mqa_logits): logits[r * logits_stride + p]
 * for row r = b * next_n + j and p in [0, max_context): the score of each visible token (NaN for
 * a token of an out-of-range block), -inf past the row's visible tokens. logits_stride >=
 * max_context; problem->k, indices and values are not used. */
int litetopk_indexer_logits_paged(const litetopk_paged_indexer_problem* problem, float* logits,
                                  int64_t logits_stride, void* stream);
/* Host pointers: the CPU reference (fp64 scores rounded to fp32, then exact selection). */
int litetopk_indexer_topk_paged_cpu(const litetopk_paged_indexer_problem* problem);
int litetopk_indexer_logits_paged_cpu(const litetopk_paged_indexer_problem* problem,
                                      float* logits, int64_t logits_stride);

/* ---- sparse_decode: the sparse KV cache and decoding attention (see sparse_decode.h) ---- */

/* Mirrors litetopk::SparseKvCache. Arrays are [slots, ...] (see sparse_decode.h for the layout
 * and the bit-exact quantization rule); block_table NULL means contiguous. */
typedef struct litetopk_sparse_kv_cache {
  int32_t dtype; /* litetopk_dtype: fp16 or bf16 */
  int64_t batch;
  int64_t num_kv_heads;
  int64_t head_dim;   /* 128 */
  int64_t block_size; /* 128 or 256 */
  int64_t max_blocks;
  const int32_t* block_table; /* [batch, max_blocks] page ids, or NULL (contiguous) */
  int64_t num_pages;          /* paged only */
  int32_t* lengths;           /* [batch] */
  uint8_t* key_codes;         /* [slots, BS, D/4] */
  void* key_scales;           /* [slots, D] of dtype */
  uint8_t* key_residuals;     /* [slots, BS, D] int8 */
  void* values;               /* [slots, BS, D] of dtype */
  void* tail_keys;            /* [batch, num_kv_heads, BS, D] of dtype */
} litetopk_sparse_kv_cache;

/* Mirrors litetopk::DenseKvCache: element (b, h, t, c) at b*batch_stride + h*head_stride +
 * t*token_stride + c; strides 0 mean the contiguous [batch, kv_heads, capacity, D] values. */
typedef struct litetopk_dense_kv_cache {
  int32_t dtype; /* litetopk_dtype: fp16 or bf16 (fp32 on the CPU only) */
  int64_t batch;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t capacity;
  void* keys;
  void* values;
  int64_t batch_stride;
  int64_t head_stride;
  int64_t token_stride;
  int32_t* lengths; /* [batch] */
} litetopk_dense_kv_cache;

/* Mirrors litetopk::SparseDecodeProblem. */
typedef struct litetopk_sparse_decode_problem {
  litetopk_sparse_kv_cache cache;
  const void* q; /* [batch, num_q_heads, D] of cache.dtype */
  int64_t num_q_heads;
  float softmax_scale; /* 0: 1/sqrt(head_dim) */
  float delta;         /* natural-log units, >= 0; INFINITY keeps every block (C++ default 5) */
  void* out;           /* [batch, num_q_heads, D] of out_dtype */
  int32_t out_dtype;   /* litetopk_dtype */
  float* lse;          /* [batch, num_q_heads], may be NULL */
  uint8_t* kept_mask;  /* [batch, num_kv_heads, max_blocks], may be NULL */
  int32_t selection;   /* litetopk::SparseSelection: 0 top-delta (delta), 1 bounded mass */
  float mass_target;   /* selection 1: in [0, 1), 0 keeps every block */
} litetopk_sparse_decode_problem;

/* Mirrors litetopk::DenseDecodeProblem. */
typedef struct litetopk_dense_decode_problem {
  litetopk_dense_kv_cache cache;
  const void* q;
  int64_t num_q_heads;
  float softmax_scale;
  void* out;
  int32_t out_dtype;
  float* lse; /* may be NULL */
} litetopk_dense_decode_problem;

/* Mirrors litetopk::DecodeOptions. Every decode call takes a pointer to it; NULL means the
 * defaults (the same as a zeroed struct). */
typedef struct litetopk_decode_options {
  int64_t blocks_per_split; /* 0: the kernel chooses */
  int32_t select_at_every_size; /* 0: DecodeOptions::read_all_when_small (the dispatch from
                                   sizes); nonzero: always select as asked */
} litetopk_decode_options;

/* Mirrors litetopk::SparseKvCacheBytes (total: the sum of the others). */
typedef struct litetopk_sparse_kv_bytes {
  size_t key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table, total;
} litetopk_sparse_kv_bytes;

/* Bytes of each array of a cache of this shape; the pointers are not looked at. */
int litetopk_sparse_kv_cache_bytes(const litetopk_sparse_kv_cache* shape,
                                   litetopk_sparse_kv_bytes* bytes);
/* Slots of the cache's arrays (0 for a NULL shape). */
int64_t litetopk_sparse_kv_num_slots(const litetopk_sparse_kv_cache* shape);
/* Bytes per token per KV head in a full block; 0 for an unsupported block_size or head_dim. */
double litetopk_sparse_kv_bytes_per_token(int64_t block_size, int64_t head_dim);

/* Device pointers; stream is a cudaStream_t (NULL: the default stream). No allocation and no
 * synchronization: each can be captured in a CUDA graph. */
/* Appends one token per sequence: new_keys, new_values [batch, num_kv_heads, D] of cache.dtype. */
int litetopk_sparse_kv_append(const litetopk_sparse_kv_cache* cache, const void* new_keys,
                              const void* new_values, void* stream);
/* Builds the sparse cache from tokens [0, dense.lengths[b]) of a dense one. */
int litetopk_sparse_kv_from_dense(const litetopk_dense_kv_cache* dense,
                                  const litetopk_sparse_kv_cache* cache, void* stream);
int litetopk_sparse_decode_workspace_size(const litetopk_sparse_decode_problem* problem,
                                          const litetopk_decode_options* options,
                                          size_t* workspace_bytes);
int litetopk_sparse_decode(const litetopk_sparse_decode_problem* problem,
                           const litetopk_decode_options* options, void* workspace,
                           size_t workspace_bytes, void* stream);
int litetopk_dense_decode_workspace_size(const litetopk_dense_decode_problem* problem,
                                         const litetopk_decode_options* options,
                                         size_t* workspace_bytes);
int litetopk_dense_decode(const litetopk_dense_decode_problem* problem,
                          const litetopk_decode_options* options, void* workspace,
                          size_t workspace_bytes, void* stream);

/* Host pointers: the CPU references (fp64). */
int litetopk_sparse_kv_append_cpu(const litetopk_sparse_kv_cache* cache, const void* new_keys,
                                  const void* new_values);
/* out: an fp32 dense cache with capacity >= max_blocks * BS (rebuilt keys, values, lengths). */
int litetopk_sparse_kv_rebuild_cpu(const litetopk_sparse_kv_cache* cache,
                                   const litetopk_dense_kv_cache* out);
/* Diagnostics (each may be NULL): pseudo_max [batch, num_q_heads], block_estimate [batch,
 * num_q_heads, max_blocks], kept_fraction [1]. */
int litetopk_sparse_decode_cpu(const litetopk_sparse_decode_problem* problem, double* pseudo_max,
                               double* block_estimate, double* kept_fraction);
int litetopk_dense_decode_cpu(const litetopk_dense_decode_problem* problem);

/* Mirrors litetopk::DecodeFidelityProblem. */
typedef struct litetopk_decode_fidelity_problem {
  litetopk_dense_decode_problem reference; /* original keys; its out and lse are not used */
  const void* out;                         /* [batch, num_q_heads, D] of out_dtype */
  int32_t out_dtype;
  const uint8_t* kept_mask; /* [batch, num_kv_heads, mask_blocks], or NULL (all read) */
  int64_t block_size;
  int64_t mask_blocks;
} litetopk_decode_fidelity_problem;

/* Mirrors litetopk::DecodeFidelity (see sparse_decode.h for each field). */
typedef struct litetopk_decode_fidelity {
  double rel_l2, max_head_rel_l2, kept_fraction, kept_mass_mean, kept_mass_min;
  double top1_recall, top1_recall_min, top1_block_recall, top1_block_recall_min, read_fraction;
} litetopk_decode_fidelity;

int litetopk_decode_fidelity_cpu(const litetopk_decode_fidelity_problem* problem,
                                 litetopk_decode_fidelity* fidelity);

/* ---- sparse_attention: MLA attention over each query's selected tokens (see attention.h) ---- */

/* Mirrors litetopk::SparseAttentionProblem (FlashMLA's flash_mla_sparse_fwd interface). For query
 * s, head h and every slot j whose token t = indices[s * topk + j] is in [0, s_kv) (any other value
 * is skipped; a token repeated in a row counts once per slot):
 *   l2_j = sm_scale * log2(e) * dot(q[s, h, :], kv[t, :]) over d_qk columns,
 *   max_logits = max l2_j, lse = log2(sum 2^l2_j) (base 2), out = sum 2^(l2_j - lse) kv[t, :d_v].
 * A query with no valid slot: out 0, max_logits and lse -inf. All arrays contiguous. */
typedef struct litetopk_sparse_attention_problem {
  const void* q;          /* [s_q, h_q, d_qk] bf16, 16-byte aligned */
  const void* kv;         /* [s_kv, 1, d_qk] bf16, 16-byte aligned; values: its first d_v columns */
  const int32_t* indices; /* [s_q, 1, topk] */
  int64_t s_q;
  int64_t s_kv;
  int64_t h_q;        /* 16, 32, 64 or 128 */
  int64_t d_qk;       /* 576 or 512 */
  int64_t d_v;        /* 512 (set it: a zeroed struct holds 0) */
  int64_t topk;       /* >= 1 */
  float sm_scale;     /* finite, e.g. 1 / sqrt(d_qk) */
  void* out;          /* [s_q, h_q, d_v] bf16, 16-byte aligned */
  float* max_logits;  /* [s_q, h_q], may be NULL */
  float* lse;         /* [s_q, h_q], may be NULL */
  int32_t algo;       /* enum litetopk_sparse_attention_algo; 0 (auto) in a zeroed struct */
} litetopk_sparse_attention_problem;

/* The workspace of litetopk_sparse_attention: the unions for the union-packed algorithm (what auto
 * resolves to at h_q 16 and 32), else 0 bytes; the problem is checked as the call checks it
 * (pointers are not dereferenced). */
int litetopk_sparse_attention_workspace_size(const litetopk_sparse_attention_problem* problem,
                                             size_t* workspace_bytes);
/* Device pointers; stream is a cudaStream_t (NULL: the default stream). No allocation, no
 * synchronization, indices never read on the host: graph-capturable. LITETOPK_NOT_COMPILED in a
 * build without CUDA (after the problem's checks). */
int litetopk_sparse_attention(const litetopk_sparse_attention_problem* problem, void* workspace,
                              size_t workspace_bytes, void* stream);
/* Host pointers: the CPU reference (fp64, out rounded to bf16), the GPU call's test oracle. */
int litetopk_sparse_attention_cpu(const litetopk_sparse_attention_problem* problem);

/* ---- merge_topk: the exact global top-k of per-shard top-k lists (see merge.h) ---- */

/* Mirrors litetopk::MergeProblem. Candidate (b, s, j) is values[off] / indices[off] at off =
 * b * row_stride + s * shard_stride + j (strides 0: the contiguous [batch, shards, k_in] layout;
 * torch.distributed's all-gather result [shards, batch, k_in] is row_stride = k_in, shard_stride
 * = batch * k_in). A candidate with a negative index, a NaN value or j >= counts[b * shards + s]
 * is never selected. out_indices [batch, k] global indices, -1 padded; out_values NaN padded.
 * Ties: the smallest global indices win. */
typedef struct litetopk_merge_problem {
  const float* values;
  const int32_t* indices;
  const int32_t* counts; /* [batch, shards], may be NULL */
  int64_t batch;
  int64_t shards;
  int64_t k_in;
  int64_t row_stride;   /* elements; 0 means shards * k_in */
  int64_t shard_stride; /* elements; 0 means k_in */
  int64_t k;
  uint32_t flags;       /* LITETOPK_SMALLEST, LITETOPK_SORTED, LITETOPK_DETERMINISTIC */
  int32_t* out_indices; /* [batch, k], required */
  float* out_values;    /* [batch, k], may be NULL */
} litetopk_merge_problem;

int litetopk_merge_topk_workspace_size(const litetopk_merge_problem* problem,
                                       size_t* workspace_bytes);
/* Device pointers; stream is a cudaStream_t (NULL: the default stream). No allocation, no
 * synchronization: graph-capturable. */
int litetopk_merge_topk(const litetopk_merge_problem* problem, void* workspace,
                        size_t workspace_bytes, void* stream);
/* Host pointers: the CPU reference. */
int litetopk_merge_topk_cpu(const litetopk_merge_problem* problem);

/* ---- dsa_prefill: one DSA layer, the indexer then sparse attention (see dsa.h) ---- */

/* Mirrors litetopk::DsaPrefillProblem. The indexer's keys are the attention's kv rows (key s is
 * kv row s); query t attends the kv rows ks[t] + (its indexer's top-k positions), -1 padded.
 * indices, when given, receives those kv rows. All arrays contiguous. */
typedef struct litetopk_dsa_prefill_problem {
  const void* index_q;          /* [T, H, D] fp8 e4m3, 16-byte aligned */
  const void* index_kv;         /* [S, D] fp8 e4m3, 16-byte aligned */
  const float* index_kv_scale;  /* [S] */
  const float* index_weights;   /* [T, H] */
  const int32_t* ks;            /* [T] first key of each query's range */
  const int32_t* ke;            /* [T] one past its last key */
  int64_t num_queries;          /* T */
  int64_t num_keys;             /* S */
  int64_t index_heads;          /* H: 32 or 64 */
  int64_t index_head_dim;       /* D: 128 */
  int64_t k;                    /* 1 .. 8192 */
  const void* q;                /* [T, h_q, d_qk] bf16, 16-byte aligned */
  const void* kv;               /* [S, 1, d_qk] bf16, 16-byte aligned */
  int64_t h_q;                  /* 16, 32, 64 or 128 */
  int64_t d_qk;                 /* 576 or 512 */
  int64_t d_v;                  /* 512 (set it: a zeroed struct holds 0) */
  float sm_scale;               /* finite */
  void* out;                    /* [T, h_q, d_v] bf16, 16-byte aligned */
  float* max_logits;            /* [T, h_q], may be NULL (base 2) */
  float* lse;                   /* [T, h_q], may be NULL (base 2) */
  int32_t* indices;             /* [T, k] kv rows, may be NULL */
} litetopk_dsa_prefill_problem;

/* indexer_algo: a litetopk_indexer_algo; attention_algo: a litetopk_sparse_attention_algo. The
 * workspace holds the indexer's, the indices when problem->indices is NULL, and the attention's
 * (pointers are not dereferenced). */
int litetopk_dsa_prefill_workspace_size(const litetopk_dsa_prefill_problem* problem,
                                        int32_t indexer_algo, int32_t attention_algo,
                                        size_t* workspace_bytes);
/* Device pointers; stream is a cudaStream_t (NULL: the default stream). The indexer, the kv-row
 * kernel and the attention on that stream: no allocation, no synchronization, nothing read on
 * the host (graph-capturable). state_data NULL (with state_bytes 0): no indexer state. */
int litetopk_dsa_prefill(const litetopk_dsa_prefill_problem* problem, int32_t indexer_algo,
                         int32_t attention_algo, void* state_data, size_t state_bytes,
                         void* workspace, size_t workspace_bytes, void* stream);
/* Host pointers: indexer_topk_cpu, the same kv rows, then sparse_attention_cpu. */
int litetopk_dsa_prefill_cpu(const litetopk_dsa_prefill_problem* problem);

/* ---- retrieval_topk: exact top-k of queries x corpus (see retrieval.h) ---- */

enum litetopk_retrieval_metric {
  LITETOPK_METRIC_INNER_PRODUCT = 0,
  LITETOPK_METRIC_COSINE = 1, /* inner product of normalised rows */
  LITETOPK_METRIC_L2 = 2      /* -||q - c||^2 */
};
enum litetopk_retrieval_corpus_format {
  LITETOPK_CORPUS_SAME_AS_QUERIES = 0, /* fp16 or bf16, as the queries */
  LITETOPK_CORPUS_FP8_E4M3 = 1         /* e4m3 bytes, row c scaled by corpus_scales[c] */
};

/* litetopk::RetrievalPath: which GPU path runs. */
enum litetopk_retrieval_path {
  LITETOPK_RETRIEVAL_AUTO = 0,    /* the cost model */
  LITETOPK_RETRIEVAL_UNFUSED = 1, /* cuBLAS per corpus chunk, select, merge */
  LITETOPK_RETRIEVAL_FUSED = 2    /* sm_90, fp16/bf16 corpus: the gate in the GEMM's epilogue */
};

/* Mirrors litetopk::RetrievalProblem. queries [batch, dim] fp16 or bf16, corpus [n, dim] of the
 * same dtype or e4m3 bytes, row-major, 16-byte aligned; dim 64..1024 in multiples of 16; k
 * 1..8192. corpus_bitmap: bit (c & 7) of byte c >> 3 set = row c may be selected. indices
 * [batch, k] corpus rows, -1 padded; scores NaN padded. */
typedef struct litetopk_retrieval_problem {
  const void* queries;
  const void* corpus;
  int32_t dtype;         /* LITETOPK_FLOAT16 or LITETOPK_BFLOAT16: the queries' */
  int32_t corpus_format; /* litetopk_retrieval_corpus_format */
  const float* corpus_scales; /* [n], fp8 corpus only, else NULL */
  int64_t batch;
  int64_t n;
  int64_t dim;
  int32_t metric; /* litetopk_retrieval_metric */
  const float* corpus_norms;   /* [n] squared norms, l2 only, may be NULL */
  const int32_t* range_starts; /* [batch], may be NULL */
  const int32_t* range_ends;   /* [batch], may be NULL */
  const uint8_t* corpus_bitmap; /* [(n + 7) / 8], may be NULL */
  int64_t k;
  uint32_t flags;    /* LITETOPK_SORTED, LITETOPK_DETERMINISTIC */
  int32_t* indices;  /* [batch, k], required */
  float* scores;     /* [batch, k], may be NULL */
} litetopk_retrieval_problem;

/* chunk_rows: corpus rows scored per chunk (0: auto), as litetopk::RetrievalOptions. */
int litetopk_retrieval_topk_workspace_size(const litetopk_retrieval_problem* problem,
                                           int64_t chunk_rows, size_t* workspace_bytes);
/* Device pointers; stream is a cudaStream_t (NULL: the default stream). No allocation, no
 * synchronization once the device's cuBLAS handle exists (the size query creates it). */
int litetopk_retrieval_topk(const litetopk_retrieval_problem* problem, int64_t chunk_rows,
                            void* workspace, size_t workspace_bytes, void* stream);
/* The two calls above on a chosen path (litetopk_retrieval_path; the ones above run auto). */
int litetopk_retrieval_topk_on_path_workspace_size(const litetopk_retrieval_problem* problem,
                                                   int32_t path, int64_t chunk_rows,
                                                   size_t* workspace_bytes);
int litetopk_retrieval_topk_on_path(const litetopk_retrieval_problem* problem, int32_t path,
                                    int64_t chunk_rows, void* workspace, size_t workspace_bytes,
                                    void* stream);
/* Host pointers: the CPU reference (fp64 dot products rounded to fp32, exact selection).
 * num_threads 0: every hardware thread. */
int litetopk_retrieval_topk_cpu(const litetopk_retrieval_problem* problem, int32_t num_threads);
/* norms[c] = ||corpus row c||^2 (fp32) from problem's corpus, dtype, corpus_format,
 * corpus_scales, n and dim: on the GPU (device pointers, fp32 sums) or the CPU (host pointers,
 * fp64 sums rounded). */
int litetopk_retrieval_corpus_norms(const litetopk_retrieval_problem* problem, float* norms,
                                    void* stream);
int litetopk_retrieval_corpus_norms_cpu(const litetopk_retrieval_problem* problem, float* norms);

#ifdef __cplusplus
}
#endif

#endif /* LITETOPK_C_API_H_ */
