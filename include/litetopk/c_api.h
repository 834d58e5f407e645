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

/* Values match litetopk::StatusCode, litetopk::DType, litetopk::SelectAlgo, CpuSelectAlgo. */
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

#ifdef __cplusplus
}
#endif

#endif /* LITETOPK_C_API_H_ */
