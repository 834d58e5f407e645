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


def _first_slots(indices, topk_length):
    """indices with every slot at or past its query's topk_length [s_q] set to -1 (skipped)."""
    if topk_length.dim() != 1 or topk_length.shape[0] != indices.shape[0]:
        raise ValueError(f"topk_length must be of shape [s_q = {indices.shape[0]}], got shape "
                         f"{tuple(topk_length.shape)}")
    if topk_length.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_length must be of dtype int32 or int64, got {topk_length.dtype}")
    topk = indices.shape[-1]
    slots = torch.arange(topk, device=indices.device, dtype=topk_length.dtype)
    past = slots >= topk_length.view(-1, *([1] * (indices.dim() - 1)))
    return indices.masked_fill(past, -1)


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None):
    """FlashMLA's flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None,
    topk_length=None) on litetopk's kernels (algo "auto"), returning what the current FlashMLA
    returns: (out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q], lse [s_q, h_q]) with max_logits
    and lse in natural-log units, lse +inf for a query with nothing to attend (its out 0).
    topk_length [s_q] (int32 or int64): query s attends only to its first topk_length[s] slots.
    attn_sink [h_q] fp32: a per-head logit that takes softmax mass without a value (out scaled by
    1 / (1 + exp(attn_sink - lse)); lse is returned without it, as FlashMLA does)."""
    if topk_length is not None:
        indices = _first_slots(indices, topk_length)
    out, max_logits, lse = sparse_attention(q, kv, indices, sm_scale, d_v, natural_log=True)
    if attn_sink is not None:
        if attn_sink.dim() != 1 or attn_sink.shape[0] != q.shape[1]:
            raise ValueError(f"attn_sink must be of shape [h_q = {q.shape[1]}], got shape "
                             f"{tuple(attn_sink.shape)}")
        kept = torch.sigmoid(lse - attn_sink.float())  # an empty query's out stays 0
        out = (out.float() * kept.unsqueeze(-1)).to(torch.bfloat16)
    return out, max_logits, lse

