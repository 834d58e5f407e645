"""litetopk's torch ops: torch.ops.litetopk.* and the Python functions engines call.

One module per feature registers its ops on import: select, indexer (prefill), paged (decode
indexer), decode (sparse decoding), attention (sparse MLA), dsa (the layer: indexer then
attention), merge, retrieval (brute-force nearest neighbours); compat holds the peers' own
function names (DeepGEMM, FlashMLA); _runtime the eager path they share.

Every op has a schema, a fake (meta) implementation for torch.compile and fake tensors, and one
real implementation registered for CUDA and CPU: CUDA tensors run the GPU kernels on the current
stream with a workspace taken from torch's caching allocator (nothing else is allocated, nothing
synchronizes, so the ops can be captured in a CUDA graph; eager calls on the default stream keep
one workspace of up to 16 MiB per device and thread instead of allocating one per call); CPU
tensors run the CPU backend (the references). The `_out` variants write into tensors the caller
preallocated. A CUDA call checks its arguments and sizes its workspace once per signature (shapes,
strides, dtypes, devices, scalars); later calls of the signature only read addresses and launch.

  topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
       deterministic=False) -> (indices [B, k] int32, values [B, k])
      vLLM's top-k-per-row layout: scores [B, N] (fp32/bf16/fp16, any row stride), indices
      relative to the row start (row_starts[b], 0 when None), -1 padded, values NaN padded.
  fp8_mqa_logits(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke) -> logits [T, S] fp32
      DeepGEMM's fp8_mqa_logits with (kv, kv_scale) flattened; -inf outside [ks, ke).
  fp8_mqa_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, state=None,
               algo="auto") -> (indices [T, k] int32 relative to ks, values [T, k] fp32)
      the indexer fused with exact top-k: the logits never reach memory.
  fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, max_context_len)
      -> logits [B * next_n, max_context_len] fp32: DeepGEMM's fp8_paged_mqa_logits (decode over
      a paged cache), -inf past each row's tokens.
  fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                     algo="auto", state=None) -> (indices [B * next_n, k] int32 token positions,
      values): the decode indexer with exact top-k; graph-safe as contexts grow. state (from
      paged_indexer_state) carries each row's top-k between steps for the gated fused path.
  sparse_kv_append, sparse_kv_from_dense: the sparse decoding cache writers.
  sparse_decode(q, <cache>, block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None)
      -> (out [B, Hq, D], lse [B, Hq]);  dense_decode(q, keys, values, lengths, ...) likewise.
  merge_topk(values, indices, k, counts=None, largest=True, sorted=False, deterministic=False)
      -> (indices [B, k] int32, values [B, k] fp32): the exact global top-k of per-shard lists
      values/indices [B, S, k_in] (global indices, -1 empty), e.g. all-gathered local top-k.
  sparse_attention(q, kv, indices, sm_scale, d_v=512, algo="auto")
      -> (out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q], lse [s_q, h_q]): FlashMLA's sparse
      prefill (flash_mla_sparse_fwd), base 2; algo "per-query", "union-packed" or "plain" picks
      the GPU kernel.
  dsa_prefill(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv, sm_scale,
              d_v=512, state=None, indexer_algo="auto", attention_algo="auto")
      -> (out, max_logits, lse, indices [T, k] kv rows): one DSA layer, the indexer's top-k then
      sparse_attention over the kv rows ks[t] + its positions (include/litetopk/dsa.h).
  retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                 range_ends=None, sorted=False, deterministic=False, out=None,
                 corpus_scales=None, corpus_bitmap=None)
      -> (indices [B, k] int32 corpus rows, scores [B, k] fp32): exact brute-force nearest
      neighbours (inner product, cosine or L2) of queries [B, d] over corpus [N, d] (fp16/bf16,
      or fp8 e4m3 with row scales), optionally filtered by a corpus bitmap;
      retrieval_corpus_norms(corpus, corpus_scales=None) and retrieval_pack_bitmap(allowed)
      make its optional inputs; retrieval_topk_plan(...) says how a CUDA call chunks the corpus.

The module-level functions `fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, ...)`,
`fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k, ...)`, `fp8_paged_mqa_logits(q, kv_cache,
weights, context_lens, block_table, [schedule_meta,] max_context_len)` and `fp8_paged_mqa_topk(...,
max_context_len, k)` take DeepGEMM's Python arguments, so an engine swaps one import
(docs/integration.md).
"""
from .attention import sparse_attention
from .compat import flash_mla_sparse_fwd, fp8_mqa_logits, fp8_paged_mqa_logits
from .decode import (SparseKvCache, dense_decode, sparse_decode, sparse_kv_append,
                     sparse_kv_from_dense)
from .dsa import dsa_prefill
from .indexer import IndexerState, fp8_mqa_topk, fp8_mqa_topk_plan
from .merge import merge_topk
from .paged import fp8_paged_mqa_topk, fp8_paged_mqa_topk_plan, paged_indexer_state
from .retrieval import (retrieval_corpus_norms, retrieval_pack_bitmap, retrieval_topk,
                        retrieval_topk_plan)
from .select import topk, topk_plan

__all__ = [
    "topk", "topk_plan", "fp8_mqa_logits", "fp8_mqa_topk", "fp8_mqa_topk_plan",
    "fp8_paged_mqa_logits", "fp8_paged_mqa_topk", "fp8_paged_mqa_topk_plan",
    "paged_indexer_state", "IndexerState",
    "SparseKvCache", "sparse_kv_append", "sparse_kv_from_dense", "sparse_decode", "dense_decode",
    "sparse_attention", "flash_mla_sparse_fwd", "dsa_prefill", "merge_topk", "retrieval_topk",
    "retrieval_topk_plan", "retrieval_corpus_norms", "retrieval_pack_bitmap",
]
