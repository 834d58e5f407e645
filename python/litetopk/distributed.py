"""litetopk.distributed: exact top-k over a context sharded across the ranks of a
torch.distributed process group (context parallelism).

Each rank runs the local op on its own shard of the keys (or score columns) with values, shifts
its indices to global ones, and the group exchanges one all_gather_into_tensor of the [T, k]
(value, index) pairs, T * k * 8 bytes per rank; every rank then merges the gathered lists with
merge_topk. The exact top-k of a row is the top-k of the union of its shards' top-k, so the
result equals the single-process call's (ties aside: the merge gives ties to the smallest global
indices among the candidates the shards offered) and is identical on every rank. A shard with
no key in a query's range contributes -1 padding; shards may be uneven. Works with any backend
that has all_gather_into_tensor (NCCL for CUDA tensors, gloo for CPU ones).

  topk_sharded(scores_shard, k, column_offset, group=None, ...)
      scores [B, N] split by columns: this rank holds columns [column_offset, column_offset +
      scores_shard.shape[1]).
  fp8_mqa_topk_sharded(q, kv_shard, weights, ks, ke, k, shard_offset, group=None, ...)
      the prefill indexer (DeepGEMM's fp8_mqa_logits arguments): this rank holds keys
      [shard_offset, shard_offset + S_local) in kv_shard = (kv, kv_scale); ks/ke are the global
      key ranges.
  fp8_paged_mqa_topk_sharded(q, kv_cache, weights, context_lens, block_table, max_context_len,
                             k, shard_offset, shard_lens, group=None, ...)
      the decode indexer over a paged cache: this rank's cache holds tokens [shard_offset[b],
      shard_offset[b] + shard_lens[b]) of request b at its local positions 0, 1, ...
"""
import torch
import torch.distributed as dist

from . import ops
from .ops.paged import _paged_context_lens, _paged_q


def _as_rows(x, rows, device, name):
    """An int or a [rows] tensor as a [rows] int32 tensor on `device`."""
    if isinstance(x, torch.Tensor):
        if x.shape != (rows,):
            raise ValueError(f"{name} must be an int or of shape [{rows}], got shape "
                             f"{tuple(x.shape)}")
        return x.to(device=device, dtype=torch.int32)
    return torch.full((rows,), int(x), dtype=torch.int32, device=device)


def _to_global(indices, shift):
    """Local indices [T, k] (-1 padded) plus a per-row shift [T]: -1 stays -1."""
    return torch.where(indices >= 0, indices + shift.view(-1, 1), indices)


def gather_merge(values, indices, k, group=None, largest=True, sorted=False):
    """The exact top-k over the group of each rank's [T, k_in] lists (values fp32, global
    indices, -1 padded): one all_gather_into_tensor of the (value, index) pairs, then
    merge_topk. Returns (indices [T, k] int32, values [T, k] fp32), identical on every rank."""
    world = dist.get_world_size(group)
    T, k_in = indices.shape
    pairs = torch.stack((values.to(torch.float32).view(torch.int32), indices.to(torch.int32)))
    # The concatenated output form [world * 2, T, k_in], which every backend takes.
    gathered = pairs.new_empty((world * 2, T, k_in))
    dist.all_gather_into_tensor(gathered, pairs, group=group)
    gathered = gathered.view(world, 2, T, k_in)
    # [world, 2, T, k_in] -> values and indices [T, world, k_in] views with unit stride along
    # k_in: the merge reads the all-gather layout through strides, nothing is copied.
    all_values = gathered[:, 0].view(torch.float32).permute(1, 0, 2)
    all_indices = gathered[:, 1].permute(1, 0, 2)
    return ops.merge_topk(all_values, all_indices, k, largest=largest, sorted=sorted)


def topk_sharded(scores_shard, k, column_offset, group=None, largest=True, sorted=False,
                 deterministic=False):
    """litetopk.ops.topk over rows whose columns are split across the group: this rank's
    scores_shard [B, N_local] holds columns [column_offset, column_offset + N_local). Returns
    (indices [B, k] int32 global column indices, -1 padded; values [B, k] of the scores' dtype,
    NaN padded). With deterministic=True the local selections and so the result take the
    smallest indices among ties, equal to the single-process deterministic call."""
    local_indices, local_values = ops.topk(scores_shard, k, largest=largest,
                                           deterministic=deterministic)
    shift = _as_rows(column_offset, scores_shard.shape[0], scores_shard.device, "column_offset")
    indices, values = gather_merge(local_values, _to_global(local_indices, shift), k, group,
                                   largest, sorted)
    return indices, values.to(scores_shard.dtype)


def fp8_mqa_topk_sharded(q, kv_shard, weights, ks, ke, k, shard_offset, group=None,
                         state=None, algo="auto", sorted=False):
    """litetopk.ops.fp8_mqa_topk over keys split across the group: this rank holds keys
    [shard_offset, shard_offset + S_local) as kv_shard = (kv [S_local, D], kv_scale [S_local]);
    q, weights and the global ranges ks/ke [T] are the same on every rank. Each rank clips the
    ranges to its shard, runs the fused indexer with values, and the lists are merged. Returns
    (indices [T, k] int32 relative to ks, -1 padded; values [T, k] fp32), as the single-process
    call over all keys. state: this rank's IndexerState for its shard."""
    kv, kv_scale = kv_shard
    local_keys = kv.shape[0]
    offset = int(shard_offset)
    local_ks = torch.clamp(ks - offset, 0, local_keys)
    local_ke = torch.maximum(torch.clamp(ke - offset, 0, local_keys), local_ks)
    local_indices, local_values = ops.fp8_mqa_topk(q, kv_shard, weights, local_ks, local_ke, k,
                                                   state=state, algo=algo)
    # Relative to the local start, to relative to the global one.
    shift = (local_ks + offset - ks).to(torch.int32)
    return gather_merge(local_values, _to_global(local_indices, shift), k, group, True, sorted)


def fp8_paged_mqa_topk_sharded(q, kv_cache, weights, context_lens, block_table,
                               max_context_len, k, shard_offset, shard_lens, group=None,
                               algo="auto", sorted=False):
    """litetopk.ops.fp8_paged_mqa_topk over tokens split across the group: this rank's paged
    cache (kv_cache, block_table [B, max_blocks], max_context_len its local capacity in tokens)
    holds tokens [shard_offset[b], shard_offset[b] + shard_lens[b]) of request b at local
    positions 0, 1, ...; shard_offset and shard_lens are ints or [B] int32 tensors. q
    [B, next_n, H, D], weights and context_lens ([B] or [B, next_n], the global context
    lengths) are the same on every rank. Row b * next_n + j sees global tokens
    [0, context_lens[b] - next_n + j + 1), as the single-process call. Returns (indices
    [B * next_n, k] int32 global token positions, -1 padded; values fp32)."""
    q = _paged_q(q)
    batch, next_n = q.shape[0], q.shape[1]
    rows = batch * next_n
    device = q.device
    contexts = _paged_context_lens(context_lens, next_n).to(torch.int32)
    offsets = _as_rows(shard_offset, batch, device, "shard_offset")
    lens = _as_rows(shard_lens, batch, device, "shard_lens")
    # The global tokens row (b, j) sees, then the part of them this shard holds: every row is
    # its own request of one query (next_n 1), since the library's causal rule applies to the
    # shard that holds a context's tail only.
    step = torch.arange(next_n, dtype=torch.int32, device=device) - (next_n - 1)
    visible = torch.clamp(contexts.view(-1, 1) + step, min=0)
    local = torch.minimum(torch.clamp(visible - offsets.view(-1, 1), min=0), lens.view(-1, 1))
    row_q = q.reshape(rows, 1, q.shape[2], q.shape[3])
    row_table = block_table if next_n == 1 else block_table.repeat_interleave(next_n, dim=0)
    local_indices, local_values = ops.fp8_paged_mqa_topk(
        row_q, kv_cache, weights, local.reshape(rows).to(torch.int32).contiguous(), row_table,
        int(max_context_len), k, algo=algo)
    shift = offsets.repeat_interleave(next_n) if next_n > 1 else offsets
    return gather_merge(local_values, _to_global(local_indices, shift), k, group, True, sorted)
