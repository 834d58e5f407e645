"""The peers' own Python functions on litetopk's ops, in their argument order, so that an engine
swaps one import (docs/integration.md): DeepGEMM's fp8_mqa_logits and fp8_paged_mqa_logits, and
FlashMLA's flash_mla_sparse_fwd."""
import torch

from ._runtime import _direct
from .attention import sparse_attention
from .indexer import _logits, _split_kv
from .paged import _paged_logits, _paged_logits_out, _paged_q, _paged_tail


def fp8_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits=True,
                   max_seqlen_k=0):
    """DeepGEMM's fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, clean_logits, max_seqlen_k):
    logits [T, S] fp32, -inf outside [ks, ke) whatever clean_logits says (cleaning is free here).
    max_seqlen_k > 0 (DeepGEMM's compressed logits) is not supported."""
    if max_seqlen_k:
        raise ValueError(f"max_seqlen_k must be 0 (compressed logits are not supported), "
                         f"got {max_seqlen_k}")
    kv_fp8, kv_scale = _split_kv(kv)
    op = _logits if _direct(q, kv_fp8) else torch.ops.litetopk.fp8_mqa_logits
    return op(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, *args, out=None,
                         **kwargs):
    """DeepGEMM's fp8_paged_mqa_logits: logits [B * next_n, max_context_len] fp32 of the decode
    indexer over a paged cache. Takes litetopk's arguments

        fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, max_context_len)

    or DeepGEMM's, unchanged: (q, kv_cache, weights, context_lens, block_table, schedule_meta,
    max_context_len, clean_logits=...), schedule_meta ignored. q [B, next_n, H, D]
    float8_e4m3fn (or (q, None)); kv_cache [num_blocks, 64, 1, D + 4] uint8 (per block: 64 x D
    key bytes, then 64 fp32 scales); weights [B * next_n, H] fp32; context_lens [B] or
    [B, next_n] int32 (see below); block_table [B, max_blocks] int32. Row b * next_n + j sees
    the first context_lens[b] - next_n + j + 1 tokens (with a [B, next_n] context_lens, its last
    column is context_lens[b]: the same numbers when the 2-D form is causal, as vLLM's and
    DeepGEMM's tests make it); the logits are -inf past a row's tokens whatever clean_logits says
    (cleaning is free here), NaN for a token whose block-table entry is outside the cache.
    out=logits ([rows, max_context_len] fp32, unit column stride) writes there."""
    max_context = int(_paged_tail(args, kwargs, ("max_context_len",),
                                  ("clean_logits",))["max_context_len"])
    q = _paged_q(q)
    if out is None:
        op = _paged_logits if _direct(q, kv_cache) else torch.ops.litetopk.fp8_paged_mqa_logits
        return op(q, kv_cache, weights, context_lens, block_table, max_context)
    op = (_paged_logits_out if _direct(q, kv_cache, out)
          else torch.ops.litetopk.fp8_paged_mqa_logits_out)
    op(q, kv_cache, weights, context_lens, block_table, max_context, out)
    return out


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None):
    """FlashMLA's flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512) on litetopk's kernels
    (algo "auto"): sparse_attention's (out, max_logits, lse), base 2. The later FlashMLA
    arguments attn_sink and topk_length are not supported (ValueError unless None; topk_length's
    effect is had by -1 past each row's length)."""
    if attn_sink is not None:
        raise ValueError("attn_sink is not supported by litetopk's sparse_attention (pass None)")
    if topk_length is not None:
        raise ValueError("topk_length is not supported by litetopk's sparse_attention (pass None "
                         "and pad each row of indices with -1 past its length)")
    return sparse_attention(q, kv, indices, sm_scale, d_v)

