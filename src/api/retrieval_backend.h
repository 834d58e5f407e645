// The CUDA retrieval backend as seen from src/api. Implemented in src/cuda/retrieval/ when the
// build has CUDA, else by src/api/retrieval_cuda_unavailable.cpp (every call returns
// kNotCompiled). Callers have validated the problem, chosen the chunking and planned the
// chunks' selections.
#pragma once

#include "litetopk/retrieval.h"

namespace litetopk::detail {

// Whether the unfused path scores an fp8 corpus straight from its bytes (up to
// kRetrievalFp8DirectMaxBatch queries) rather than widening each chunk for cuBLAS: the chunking
// and the launch decide it alike.
inline bool fp8_corpus_scored_directly(const RetrievalProblem& p) {
  return p.corpus_format == RetrievalCorpusFormat::kFp8E4M3 &&
         p.batch <= kRetrievalFp8DirectMaxBatch;
}

// Chooses plan->path from `requested` (kAuto: the cost model), plans the fused path when it
// runs, fills plan->workspace_bytes and plan->device for a plan whose problem, chunk_rows, chunks
// and flags are set, and creates the current device's cuBLAS handle if it has none.
Status cuda_retrieval_plan(RetrievalPath requested, RetrievalPlan* plan);
// Launches a plan; `problem` is the plan's problem with the launch's addresses.
Status cuda_retrieval_launch(const RetrievalPlan& plan, const RetrievalProblem& problem,
                             void* workspace, cudaStream_t stream);
// retrieval_corpus_norms on a validated corpus of n > 0 rows.
Status cuda_retrieval_corpus_norms(const RetrievalProblem& problem, float* norms,
                                   cudaStream_t stream);

}  // namespace litetopk::detail
