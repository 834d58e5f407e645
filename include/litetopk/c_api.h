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
  LITETOPK_ALGO_SAMPLE_FILTER = 2
};
enum litetopk_cpu_algo { LITETOPK_CPU_REFERENCE = 0, LITETOPK_CPU_FAST = 1 };
enum litetopk_indexer_algo {
  LITETOPK_INDEXER_AUTO = 0,
  LITETOPK_INDEXER_UNFUSED = 1, /* logits [T, S] fp32 in the workspace, then select_topk */
  LITETOPK_INDEXER_FUSED = 2    /* scores never leave the chip */
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

/* algo: a litetopk_indexer_algo. candidate_capacity: must be 0 in this build (the fused kernel
 * keeps k + 512 candidates per query); other values return LITETOPK_UNSUPPORTED. */
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

#ifdef __cplusplus
}
#endif

#endif /* LITETOPK_C_API_H_ */
