// retrieval_topk: exact top-k nearest neighbours of each query over a corpus (brute force).
//
// Contract (see docs/retrieval.md):
// - queries [batch, dim] float16 or bfloat16 (`dtype`), corpus [n, dim], row-major and contiguous;
//   dim from kRetrievalMinDim to kRetrievalMaxDim in multiples of kRetrievalDimMultiple. The
//   corpus has the queries' dtype, or (corpus_format kFp8E4M3) is fp8 e4m3 bytes with a per-row
//   fp32 scale: row c is corpus_scales[c] * e4m3(corpus[c]).
// - metric kInnerProduct: score = q . c. kCosine: the same score (the caller passes normalised
//   rows). kL2: score = -||q - c||^2 = 2 q . c - ||c||^2 - ||q||^2; corpus_norms [n] fp32 holds
//   the squared norms ||c||^2 (optional: computed at each call when null; retrieval_corpus_norms
//   computes them once).
// - Optional half-open ranges [range_starts[b], range_ends[b]) of corpus rows for query b (either
//   array may be null: start 0, end n), and an optional corpus bitmap shared by every query:
//   bit (c & 7) of byte corpus_bitmap[c >> 3] set means row c may be selected. Indices are corpus
//   row numbers, whatever the range.
// - indices [batch, k] int32; a query with fewer than k selectable rows returns all of them, then
//   -1. scores [batch, k] fp32 (optional); padded slots hold NaN.
// - A NaN score is never selected; +-inf are ordinary values.
// - Order is unspecified unless `sorted` (best first, ties by ascending index). Among ties at the
//   k-th score any member may be chosen, unless `deterministic`: then the smallest indices win.
// - The GPU computes the dot products in fp32 (cuBLAS on the unfused path, wgmma on the fused
//   one; fp32 accumulate); the CPU reference in fp64, rounded to fp32. The selection is exact on
//   the scores of the backend and path that ran.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/select.h"
#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

constexpr int64_t kRetrievalMinDim = 64;
constexpr int64_t kRetrievalMaxDim = 1024;
constexpr int64_t kRetrievalDimMultiple = 16;
constexpr int64_t kRetrievalMaxK = 8192;

enum class RetrievalMetric : int {
  kInnerProduct = 0,
  kCosine = 1,  // inner product of rows the caller has normalised
  kL2 = 2,      // -||q - c||^2
};

enum class RetrievalCorpusFormat : int {
  kSameAsQueries = 0,  // float16 or bfloat16, as the queries
  kFp8E4M3 = 1,        // fp8 e4m3 bytes, row c scaled by corpus_scales[c]
};

// "ip", "cosine", "l2", or "invalid".
const char* retrieval_metric_name(RetrievalMetric metric);
// Parses "ip"/"inner_product", "cosine", "l2"; false when unknown.
bool parse_retrieval_metric(const char* name, RetrievalMetric* metric);
// "same_as_queries", "fp8_e4m3", or "invalid".
const char* retrieval_corpus_format_name(RetrievalCorpusFormat format);

// Which GPU path runs (docs/retrieval.md). kAuto lets the cost model choose.
enum class RetrievalPath : int {
  kAuto = 0,
  kUnfused = 1,  // cuBLAS per corpus chunk into fp32 scores, select_topk, exact merges
  kFused = 2,    // sm_90 only, fp16 / bf16 corpus: the gate in the GEMM's epilogue, no scores
};
// "auto", "unfused", "fused", or "invalid".
const char* retrieval_path_name(RetrievalPath path);
// Parses "auto", "unfused", "fused"; false when unknown.
bool parse_retrieval_path(const char* name, RetrievalPath* path);

// Bytes of a corpus bitmap over n rows: ceil(n / 8).
constexpr int64_t retrieval_bitmap_bytes(int64_t n) { return (n + 7) / 8; }

struct RetrievalProblem {
  const void* queries = nullptr;  // [batch, dim] of dtype
  const void* corpus = nullptr;   // [n, dim] of dtype, or of e4m3 bytes (kFp8E4M3)
  DType dtype = DType::kFloat16;  // the queries' type: kFloat16 or kBFloat16
  RetrievalCorpusFormat corpus_format = RetrievalCorpusFormat::kSameAsQueries;
  const float* corpus_scales = nullptr;  // [n], required with kFp8E4M3, else null
  int64_t batch = 0;
  int64_t n = 0;
  int64_t dim = 0;
  RetrievalMetric metric = RetrievalMetric::kInnerProduct;
  const float* corpus_norms = nullptr;    // [n] squared norms, kL2 only, optional
  const int32_t* range_starts = nullptr;  // [batch] or null
  const int32_t* range_ends = nullptr;    // [batch] or null
  const uint8_t* corpus_bitmap = nullptr;  // [retrieval_bitmap_bytes(n)] or null (every row)
  int64_t k = 0;
  bool sorted = false;
  bool deterministic = false;
  int32_t* indices = nullptr;  // [batch, k], required
  float* scores = nullptr;     // [batch, k], optional
};

struct RetrievalOptions {
  // Corpus rows scored per chunk (the unfused path writes [batch, chunk] fp32 scores to the
  // workspace, then selects and merges). 0: as many as keep one chunk's scores within
  // kRetrievalChunkScoreBytes and, for an fp8 corpus above kRetrievalFp8DirectMaxBatch queries,
  // its rows widened to the queries' dtype within kRetrievalChunkWidenBytes.
  int64_t chunk_rows = 0;
  // kFused on a device or corpus it cannot serve fails to plan (kUnsupported).
  RetrievalPath path = RetrievalPath::kAuto;
};
constexpr std::size_t kRetrievalChunkScoreBytes = std::size_t{512} << 20;
constexpr std::size_t kRetrievalChunkWidenBytes = std::size_t{256} << 20;
// Up to this batch the unfused path scores an fp8 corpus straight from its bytes (a memory-bound
// kernel); above it, each chunk is widened to the queries' dtype for cuBLAS.
constexpr int64_t kRetrievalFp8DirectMaxBatch = 4;

// ---- GPU (all pointers are device pointers) ----

// One retrieval planned once (retrieval_topk_plan): sizes and flags validated, the chunking
// chosen, the workspace sized and the device's cuBLAS handle created, for launches with any
// addresses (retrieval_topk_launch). Plan on the device the launches run on. Read-only once
// planned; launches of plans on one device share that device's cuBLAS handle, so run them from one
// host thread at a time.
struct RetrievalPlan {
  RetrievalProblem problem{};  // sizes and flags of the planned call (its pointers are not used)
  std::size_t workspace_bytes = 0;  // caller-owned device workspace each launch needs
  int64_t chunk_rows = 0;           // corpus rows per chunk
  int64_t chunks = 0;               // ceil(n / chunk_rows)
  SelectPlan chunk_select{};        // the selection of a chunk of chunk_rows rows
  SelectPlan last_select{};         // of the last chunk (n - (chunks - 1) chunk_rows rows)
  RetrievalPath path = RetrievalPath::kUnfused;  // the path the launches run (never kAuto)
  // The fused path: blocks of 64 queries x fused_splits corpus splits, two candidate lists of
  // fused_list_capacity slots per block and query, a ring of fused_stages corpus slices per block;
  // its gates come from every fused_sample_stride-th corpus tile of 128 rows (fused_sample_tiles
  // of them; 0: none), selected by sample_select; at the end the lists move to each query's pool
  // of fused_pool_capacity slots.
  int64_t fused_splits = 0;
  int64_t fused_list_capacity = 0;
  int64_t fused_pool_capacity = 0;
  int64_t fused_stages = 0;
  int64_t fused_sample_stride = 0;
  int64_t fused_sample_tiles = 0;
  SelectPlan sample_select{};
  bool has_norms = false;           // the launches pass corpus_norms or not
  bool has_range_starts = false;    // the launches pass range_starts (range_ends) or not
  bool has_range_ends = false;
  bool has_bitmap = false;          // the launches pass corpus_bitmap or not
  bool has_scores = false;          // the launches write scores or not
  int device = -1;                  // the device planned on
  bool planned = false;             // made by retrieval_topk_plan
};

// The addresses of one launch of a plan (device pointers).
struct RetrievalAddresses {
  const void* queries = nullptr;
  const void* corpus = nullptr;
  const float* corpus_scales = nullptr;   // required with an fp8 corpus, else ignored
  const float* corpus_norms = nullptr;    // required when the plan has norms, else ignored
  const int32_t* range_starts = nullptr;  // required when the plan has range starts, else ignored
  const int32_t* range_ends = nullptr;    // likewise
  const uint8_t* corpus_bitmap = nullptr;  // required when the plan has a bitmap, else ignored
  int32_t* indices = nullptr;
  float* scores = nullptr;                // required when the plan has scores, else ignored
};

// The addresses of a problem (its pointers).
RetrievalAddresses retrieval_addresses(const RetrievalProblem& problem);

// Validates the problem's sizes and flags (its pointers may be null: only whether corpus_norms,
// the range arrays and scores are null is kept), chooses the chunking, sizes the workspace and
// creates the current device's cuBLAS handle if it has none (that first plan on a device
// allocates: plan before capturing a graph).
Status retrieval_topk_plan(const RetrievalProblem& problem, const RetrievalOptions& options,
                           RetrievalPlan* plan);

// Launches a plan on `stream` with `workspace` (plan.workspace_bytes of device memory). Checks only
// what the plan could not: that the addresses are set and aligned. No allocation, no
// synchronization, so it can be captured in a CUDA graph. Device range bounds outside [0, n] are
// clamped into it and an inverted range is empty: nothing is read or written out of bounds.
Status retrieval_topk_launch(const RetrievalPlan& plan, const RetrievalAddresses& addresses,
                             void* workspace, cudaStream_t stream);

// The one-shot calls below plan and launch in one go.

// Bytes of caller-owned device workspace retrieval_topk needs for this problem and options.
Status retrieval_topk_workspace_size(const RetrievalProblem& problem,
                                     std::size_t* workspace_bytes,
                                     const RetrievalOptions& options = {});

// Launches the retrieval on `stream`. No allocation, no synchronization once the device's cuBLAS
// handle exists (the first call on a device creates it).
Status retrieval_topk(const RetrievalProblem& problem, void* workspace,
                      std::size_t workspace_bytes, cudaStream_t stream,
                      const RetrievalOptions& options = {});

// ---- CPU (all pointers are host pointers) ----

// The plain reference: fp64 dot products rounded to fp32, then the exact selection of each
// query's scores (its output is always sorted and deterministic). Host ranges must satisfy
// 0 <= start <= end <= n. num_threads = 0 uses every hardware thread.
Status retrieval_topk_cpu(const RetrievalProblem& problem, int num_threads = 0);

// Checks shapes, pointers, flags and alignment (not the contents of device range arrays).
Status validate_retrieval_problem(const RetrievalProblem& problem);

// ---- Corpus norms for kL2, computed once ----
// norms[c] = ||row c||^2 in fp32 for c < n (fp8: corpus_scales[c]^2 times the sum of the squared
// e4m3 values), reading problem.corpus, dtype, corpus_format, corpus_scales, n and dim only.
// The GPU sums in fp32 (device pointers, no workspace, no allocation, graph-capturable); the CPU
// in fp64, rounded to fp32 (host pointers).
Status retrieval_corpus_norms(const RetrievalProblem& problem, float* norms, cudaStream_t stream);
Status retrieval_corpus_norms_cpu(const RetrievalProblem& problem, float* norms);

}  // namespace litetopk
