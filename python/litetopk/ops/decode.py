"""The sparse decoding ops: the cache writers, sparse_decode and dense_decode (with _out variants),
and litetopk.ops.SparseKvCache."""
import torch

from .. import _problems as P
from ._runtime import (_NAMES, _direct, _launch, _meta, _on, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


_CACHE_ARGS = ("Tensor key_codes, Tensor key_scales, Tensor key_residuals, Tensor values, "
               "Tensor tail_keys, Tensor lengths, Tensor? block_table")
_CACHE_MUT = ("Tensor(a!) key_codes, Tensor(b!) key_scales, Tensor(c!) key_residuals, "
              "Tensor(d!) values, Tensor(e!) tail_keys, Tensor(f!) lengths, Tensor? block_table")


def _cache(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table):
    return P.sparse_cache_args(_view(key_codes), _view(key_scales), _view(key_residuals),
                               _view(values), _view(tail_keys), _view(lengths), _opt(block_table))


def _cache_addresses(sizes, num_pages, key_codes, key_scales, key_residuals, values, tail_keys,
                     lengths, block_table):
    """The extension's sparse cache tuple from a plan's sizes and the tensors' addresses."""
    return sizes + (_ptr(block_table), num_pages, lengths.data_ptr(), key_codes.data_ptr(),
                    key_scales.data_ptr(), key_residuals.data_ptr(), values.data_ptr(),
                    tail_keys.data_ptr())


def _append_launch(plan, device, cache_tensors, new_keys, new_values):
    launch, sizes, num_pages = plan
    launch(_cache_addresses(sizes, num_pages, *cache_tensors), new_keys.data_ptr(),
           new_values.data_ptr(), _stream(device))


def _append(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table,
            new_keys, new_values):
    tensors = (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table)
    device = tail_keys.get_device()
    key = ("sparse_kv_append",) + tuple(_meta(t) for t in tensors) + (_meta(new_keys),
                                                                       _meta(new_values))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        cache = _cache(*tensors)
        shape, dtype = cache[1:4], tail_keys.dtype
        for name, t in (("new_keys", new_keys), ("new_values", new_values)):
            P.check(name, _view(t), shape, (_NAMES.get(dtype),), device=device)
        if device < 0:
            library().sparse_kv_append_cpu(cache, new_keys.data_ptr(), new_values.data_ptr())
            return
        plan = _remember(key, (library().sparse_kv_append, cache[:6], cache[7]))
    _launch(device, _append_launch, plan, device, tensors, new_keys, new_values)


def _from_dense(keys, values, dense_lengths, key_codes, key_scales, key_residuals, cache_values,
                tail_keys, lengths, block_table=None):
    dense = P.dense_cache_args(_view(keys), _view(values), _view(dense_lengths))
    cache = _cache(key_codes, key_scales, key_residuals, cache_values, tail_keys, lengths,
                   block_table)
    lib = library()
    device = keys.get_device()
    if device < 0:
        lib.sparse_kv_from_dense_cpu(dense, cache)
        return
    with _on(device):
        lib.sparse_kv_from_dense(dense, cache, _stream(device))


_register(f"sparse_kv_append({_CACHE_MUT}, Tensor new_keys, Tensor new_values) -> ()",
          _append, lambda *args, **kwargs: None)
_register("sparse_kv_from_dense(Tensor keys, Tensor values, Tensor dense_lengths, "
          + _CACHE_MUT.replace("Tensor(d!) values", "Tensor(d!) cache_values")
          .replace("Tensor? block_table", "Tensor? block_table=None") + ") -> ()",
          _from_dense, lambda *args, **kwargs: None)


def _attention_addresses(sizes, q, out, lse):
    """The extension's attention tuple from a plan's (Hq, softmax_scale, out dtype) and the
    tensors' addresses."""
    return (q.data_ptr(), sizes[0], sizes[1], out.data_ptr(), sizes[2], _ptr(lse))


def _sparse_decode_launch(plan, device, q, cache_tensors, out, lse, kept_mask, delta,
                          blocks_per_split):
    launch, sizes, num_pages, attention, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    launch(_cache_addresses(sizes, num_pages, *cache_tensors),
           _attention_addresses(attention, q, out, lse), delta, _ptr(kept_mask),
           blocks_per_split, workspace, size, stream)


def _sparse_decode_select(q, tensors, out, lse, kept_mask, delta, softmax_scale,
                          blocks_per_split, outputs):
    """sparse_decode into out/lse (kept_mask); `outputs` is their part of the signature ("new"
    and the dtype for outputs _decode_fake made)."""
    device = q.get_device()
    key = (("sparse_decode", _meta(q)) + tuple(_meta(t) for t in tensors)
           + (outputs, _meta(kept_mask), delta, softmax_scale, blocks_per_split))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        cache = _cache(*tensors)
        attention = P.attention_args(_view(q), _NAMES.get(tensors[4].dtype), device, _view(out),
                                     _opt(lse), softmax_scale)
        mask = P.kept_mask_address(_opt(kept_mask), cache, device)
        lib = library()
        if device < 0:
            lib.sparse_decode_cpu(cache, attention, float(delta), mask)
            return
        size = _launch(device, lib.sparse_decode_workspace_size, cache, attention, float(delta),
                       mask, blocks_per_split)
        plan = _remember(key, (lib.sparse_decode, cache[:6], cache[7],
                               (attention[1], attention[2], attention[4]), size))
    _launch(device, _sparse_decode_launch, plan, device, q, tensors, out, lse, kept_mask,
            float(delta), blocks_per_split)


def _sparse_decode_out(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                       block_table, out, lse=None, kept_mask=None, delta=5.0, softmax_scale=0.0,
                       blocks_per_split=0):
    _sparse_decode_select(
        q, (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table), out,
        lse, kept_mask, delta, softmax_scale, blocks_per_split, (_meta(out), _meta(lse)))


def _decode_fake(q, *args, out_dtype=None, **kwargs):
    return (q.new_empty(q.shape, dtype=out_dtype or q.dtype),
            q.new_empty(q.shape[:2], dtype=torch.float32))


def _sparse_decode(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                   block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None,
                   blocks_per_split=0):
    out, lse = _decode_fake(q, out_dtype=out_dtype)
    _sparse_decode_select(
        q, (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table), out,
        lse, None, delta, softmax_scale, blocks_per_split, ("new", out_dtype))
    return out, lse


def _sparse_decode_fake(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                        block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None,
                        blocks_per_split=0):
    return _decode_fake(q, out_dtype=out_dtype)


_register(f"sparse_decode(Tensor q, {_CACHE_ARGS}=None, float delta=5.0, "
          "float softmax_scale=0.0, ScalarType? out_dtype=None, int blocks_per_split=0) "
          "-> (Tensor out, Tensor lse)", _sparse_decode, _sparse_decode_fake)
_register(f"sparse_decode_out(Tensor q, {_CACHE_ARGS}, Tensor(a!) out, Tensor(b!)? lse=None, "
          "Tensor(c!)? kept_mask=None, float delta=5.0, float softmax_scale=0.0, "
          "int blocks_per_split=0) -> ()",
          _sparse_decode_out, lambda *args, **kwargs: None)


def _dense_decode_launch(plan, device, q, keys, values, lengths, out, lse, blocks_per_split):
    launch, sizes, strides, attention, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    dense = sizes + (keys.data_ptr(), values.data_ptr()) + strides + (lengths.data_ptr(),)
    launch(dense, _attention_addresses(attention, q, out, lse), blocks_per_split, workspace,
           size, stream)


def _dense_decode_select(q, keys, values, lengths, out, lse, softmax_scale, blocks_per_split,
                         outputs):
    """dense_decode into out/lse; `outputs` is their part of the signature ("new" and the dtype
    for outputs _decode_fake made)."""
    device = q.get_device()
    key = ("dense_decode", _meta(q), _meta(keys), _meta(values), _meta(lengths), outputs,
           softmax_scale, blocks_per_split)
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        dense = P.dense_cache_args(_view(keys), _view(values), _view(lengths), P.SCORE_DTYPES)
        attention = P.attention_args(_view(q), _NAMES.get(keys.dtype), device, _view(out),
                                     _opt(lse), softmax_scale)
        lib = library()
        if device < 0:
            lib.dense_decode_cpu(dense, attention)
            return
        size = _launch(device, lib.dense_decode_workspace_size, dense, attention,
                       blocks_per_split)
        plan = _remember(key, (lib.dense_decode, dense[:5], dense[7:10],
                               (attention[1], attention[2], attention[4]), size))
    _launch(device, _dense_decode_launch, plan, device, q, keys, values, lengths, out, lse,
            blocks_per_split)


def _dense_decode_out(q, keys, values, lengths, out, lse=None, softmax_scale=0.0,
                      blocks_per_split=0):
    _dense_decode_select(q, keys, values, lengths, out, lse, softmax_scale, blocks_per_split,
                         (_meta(out), _meta(lse)))


def _dense_decode(q, keys, values, lengths, softmax_scale=0.0, out_dtype=None,
                  blocks_per_split=0):
    out, lse = _decode_fake(q, out_dtype=out_dtype)
    _dense_decode_select(q, keys, values, lengths, out, lse, softmax_scale, blocks_per_split,
                         ("new", out_dtype))
    return out, lse


def _dense_decode_fake(q, keys, values, lengths, softmax_scale=0.0, out_dtype=None,
                       blocks_per_split=0):
    return _decode_fake(q, out_dtype=out_dtype)


_register("dense_decode(Tensor q, Tensor keys, Tensor values, Tensor lengths, "
          "float softmax_scale=0.0, ScalarType? out_dtype=None, int blocks_per_split=0) "
          "-> (Tensor out, Tensor lse)", _dense_decode, _dense_decode_fake)
_register("dense_decode_out(Tensor q, Tensor keys, Tensor values, Tensor lengths, "
          "Tensor(a!) out, Tensor(b!)? lse=None, float softmax_scale=0.0, int blocks_per_split=0) "
          "-> ()",
          _dense_decode_out, lambda *args, **kwargs: None)


class SparseKvCache(P.SparseKvCacheArrays):
    """A sparse decoding cache of torch tensors (include/litetopk/sparse_decode.h): key_codes,
    key_scales, key_residuals (float8_e4m3fn), values, tail_keys, lengths and, when paged,
    block_table. `empty` allocates a zeroed contiguous one (or paged, with num_pages and a
    block_table)."""

    @classmethod
    def empty(cls, batch, kv_heads, max_blocks, block_size=128, dtype=torch.float16,
              device=None, num_pages=None, block_table=None):
        shapes = P.sparse_cache_shapes(batch, kv_heads, max_blocks, block_size, num_pages)
        dtypes = (torch.uint8, dtype, torch.float8_e4m3fn, dtype, dtype, torch.int32)
        tensors = [torch.zeros(shape, dtype=dt, device=device) for shape, dt in zip(shapes, dtypes)]
        if num_pages is not None and block_table is None:
            raise ValueError("a paged cache (num_pages given) needs its block_table")
        return cls(*tensors, block_table=block_table)

    def append(self, new_keys, new_values):
        """Appends one token per sequence: new_keys/new_values [B, Hkv, D]."""
        torch.ops.litetopk.sparse_kv_append(*self.arrays(), new_keys, new_values)

    def fill_from_dense(self, keys, values, lengths):
        """Quantizes tokens [0, lengths[b]) of a dense cache keys/values [B, Hkv, capacity, D]
        into this cache; self.lengths becomes lengths (a different tensor)."""
        torch.ops.litetopk.sparse_kv_from_dense(keys, values, lengths, *self.arrays())

    def decode(self, q, delta=5.0, softmax_scale=0.0, out_dtype=None, out=None,
               blocks_per_split=0):
        """Sparse decoding of q [B, Hq, D]: (out, lse); out=(out, lse or None, kept_mask or
        None) writes there. blocks_per_split: KV blocks per split on the GPU (0: the kernel's
        choice)."""
        direct = _direct(q, self.key_codes, *(out or ()))
        if out is None:
            op = _sparse_decode if direct else torch.ops.litetopk.sparse_decode
            return op(q, *self.arrays(), delta, softmax_scale, out_dtype, blocks_per_split)
        op = _sparse_decode_out if direct else torch.ops.litetopk.sparse_decode_out
        op(q, *self.arrays(), *out, delta, softmax_scale, blocks_per_split)
        return out


def sparse_kv_append(cache, new_keys, new_values):
    cache.append(new_keys, new_values)


def sparse_kv_from_dense(keys, values, lengths, cache):
    cache.fill_from_dense(keys, values, lengths)
    return cache


def sparse_decode(cache, q, delta=5.0, softmax_scale=0.0, out_dtype=None, out=None,
                  blocks_per_split=0):
    return cache.decode(q, delta, softmax_scale, out_dtype, out, blocks_per_split)


def dense_decode(q, keys, values, lengths, softmax_scale=0.0, out_dtype=None, out=None,
                 blocks_per_split=0):
    """Dense flash-decoding of q [B, Hq, D] over keys/values [B, Hkv, capacity, D] (strided, unit
    channel stride) and lengths [B]: (out, lse); out=(out, lse or None) writes there.
    blocks_per_split: 64-token tiles per split on the GPU (0: the kernel's choice)."""
    direct = _direct(q, keys, *(out or ()))
    if out is None:
        op = _dense_decode if direct else torch.ops.litetopk.dense_decode
        return op(q, keys, values, lengths, softmax_scale, out_dtype, blocks_per_split)
    op = _dense_decode_out if direct else torch.ops.litetopk.dense_decode_out
    op(q, keys, values, lengths, *out, softmax_scale, blocks_per_split)
    return out

