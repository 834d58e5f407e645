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


def _append_launch(plan, device, cache_tensors, new_keys, new_values):
    lib = library()
    cache = lib.SparseKvCache(plan)
    (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table) = cache_tensors
    cache.key_codes, cache.key_scales = key_codes.data_ptr(), key_scales.data_ptr()
    cache.key_residuals, cache.values = key_residuals.data_ptr(), values.data_ptr()
    cache.tail_keys, cache.lengths = tail_keys.data_ptr(), lengths.data_ptr()
    cache.block_table = _ptr(block_table)
    lib.sparse_kv_append(cache, new_keys.data_ptr(), new_values.data_ptr(), _stream(device))


def _append(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table,
            new_keys, new_values):
    tensors = (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table)
    device = tail_keys.get_device()
    key = ("sparse_kv_append",) + tuple(_meta(t) for t in tensors) + (_meta(new_keys),
                                                                       _meta(new_values))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        cache = _cache(*tensors)
        shape, dtype = (cache.batch, cache.num_kv_heads, cache.head_dim), tail_keys.dtype
        for name, t in (("new_keys", new_keys), ("new_values", new_values)):
            P.check(name, _view(t), shape, (_NAMES.get(dtype),), device=device)
        if device < 0:
            library().sparse_kv_append_cpu(cache, new_keys.data_ptr(), new_values.data_ptr())
            return
        plan = _remember(key, cache)
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


def _sparse_decode_launch(plan, device, q, cache_tensors, out, lse, kept_mask):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table) = cache_tensors
    library().sparse_decode_launch(plan, q.data_ptr(), out.data_ptr(), _ptr(lse), _ptr(kept_mask),
                                   _ptr(block_table), lengths.data_ptr(), key_codes.data_ptr(),
                                   key_scales.data_ptr(), key_residuals.data_ptr(),
                                   values.data_ptr(), tail_keys.data_ptr(), workspace, stream)


def _sparse_decode_select(q, tensors, out, lse, kept_mask, delta, softmax_scale,
                          blocks_per_split, outputs, mass_target=-1.0, read_all_when_small=True):
    """sparse_decode into out/lse (kept_mask); `outputs` is their part of the signature ("new"
    and the dtype for outputs _decode_fake made). mass_target >= 0 selects by bounded mass
    (SparseSelection.mass), else by delta; read_all_when_small is DecodeOptions' (GPU only)."""
    device = q.get_device()
    key = (("sparse_decode", _meta(q)) + tuple(_meta(t) for t in tensors)
           + (outputs, _meta(kept_mask), delta, softmax_scale, blocks_per_split, mass_target,
              read_all_when_small))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = P.decode_problem(_cache(*tensors), _view(q), device, _view(out), _opt(lse),
                                   softmax_scale, delta, _opt(kept_mask))
        lib = library()
        if mass_target >= 0:
            problem.selection, problem.mass_target = lib.SparseSelection.mass, float(mass_target)
        if device < 0:
            lib.sparse_decode_cpu(problem)
            return
        plan = _remember(key, _launch(device, lib.sparse_decode_plan, problem, blocks_per_split,
                                      read_all_when_small))
    _launch(device, _sparse_decode_launch, plan, device, q, tensors, out, lse, kept_mask)


def _sparse_decode_out(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                       block_table, out, lse=None, kept_mask=None, delta=5.0, softmax_scale=0.0,
                       blocks_per_split=0, mass_target=-1.0, read_all_when_small=True):
    _sparse_decode_select(
        q, (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table), out,
        lse, kept_mask, delta, softmax_scale, blocks_per_split, (_meta(out), _meta(lse)),
        mass_target, read_all_when_small)


def _decode_fake(q, *args, out_dtype=None, **kwargs):
    return (q.new_empty(q.shape, dtype=out_dtype or q.dtype),
            q.new_empty(q.shape[:2], dtype=torch.float32))


def _sparse_decode(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                   block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None,
                   blocks_per_split=0, mass_target=-1.0, read_all_when_small=True):
    out, lse = _decode_fake(q, out_dtype=out_dtype)
    _sparse_decode_select(
        q, (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table), out,
        lse, None, delta, softmax_scale, blocks_per_split, ("new", out_dtype), mass_target,
        read_all_when_small)
    return out, lse


def _sparse_decode_fake(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                        block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None,
                        blocks_per_split=0, mass_target=-1.0, read_all_when_small=True):
    return _decode_fake(q, out_dtype=out_dtype)


_register(f"sparse_decode(Tensor q, {_CACHE_ARGS}=None, float delta=5.0, "
          "float softmax_scale=0.0, ScalarType? out_dtype=None, int blocks_per_split=0, "
          "float mass_target=-1.0, bool read_all_when_small=True) "
          "-> (Tensor out, Tensor lse)", _sparse_decode, _sparse_decode_fake)
_register(f"sparse_decode_out(Tensor q, {_CACHE_ARGS}, Tensor(a!) out, Tensor(b!)? lse=None, "
          "Tensor(c!)? kept_mask=None, float delta=5.0, float softmax_scale=0.0, "
          "int blocks_per_split=0, float mass_target=-1.0, bool read_all_when_small=True) -> ()",
          _sparse_decode_out, lambda *args, **kwargs: None)


def _dense_decode_launch(plan, device, q, keys, values, lengths, out, lse):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().dense_decode_launch(plan, q.data_ptr(), out.data_ptr(), _ptr(lse), keys.data_ptr(),
                                  values.data_ptr(), lengths.data_ptr(), workspace, stream)


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
        problem = P.decode_problem(dense, _view(q), device, _view(out), _opt(lse), softmax_scale)
        lib = library()
        if device < 0:
            lib.dense_decode_cpu(problem)
            return
        plan = _remember(key, _launch(device, lib.dense_decode_plan, problem, blocks_per_split))
    _launch(device, _dense_decode_launch, plan, device, q, keys, values, lengths, out, lse)


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
    key_scales, key_residuals (int8), values, tail_keys, lengths and, when paged,
    block_table. `empty` allocates a zeroed contiguous one (or paged, with num_pages and a
    block_table)."""

    @classmethod
    def empty(cls, batch, kv_heads, max_blocks, block_size=128, dtype=torch.float16,
              device=None, num_pages=None, block_table=None):
        shapes = P.sparse_cache_shapes(batch, kv_heads, max_blocks, block_size, num_pages)
        dtypes = (torch.uint8, dtype, torch.int8, dtype, dtype, torch.int32)
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
               blocks_per_split=0, mass_target=None, read_all_when_small=True):
        """Sparse decoding of q [B, Hq, D]: (out, lse); out=(out, lse or None, kept_mask or
        None) writes there. Blocks by top-delta, or by bounded mass when mass_target (in
        [0, 1)) is given. blocks_per_split: KV blocks per split on the GPU (0: the kernel's
        choice); read_all_when_small: DecodeOptions' dispatch from sizes (GPU)."""
        direct = _direct(q, self.key_codes, *(out or ()))
        mass = -1.0 if mass_target is None else float(mass_target)
        if mass_target is not None and not 0.0 <= mass < 1.0:
            raise ValueError(f"mass_target must be in [0, 1) (0 keeps every block), got {mass}")
        if out is None:
            op = _sparse_decode if direct else torch.ops.litetopk.sparse_decode
            return op(q, *self.arrays(), delta, softmax_scale, out_dtype, blocks_per_split, mass,
                      read_all_when_small)
        op = _sparse_decode_out if direct else torch.ops.litetopk.sparse_decode_out
        op(q, *self.arrays(), *out, delta, softmax_scale, blocks_per_split, mass,
           read_all_when_small)
        return out


    def reads_all(self, q, delta=5.0, mass_target=None, read_all_when_small=True):
        """Whether decode(q, ...) on the GPU reads every block without selecting: delta = inf,
        mass_target 0, or the plan's dispatch from sizes (DecodeOptions::read_all_when_small)."""
        problem = P.decode_problem(_cache(*self.arrays()), _view(q), q.get_device(),
                                   _view(torch.empty(q.shape, dtype=torch.float32,
                                                     device=q.device)),
                                   None, 0.0, delta, None)
        lib = library()
        if mass_target is not None:
            problem.selection, problem.mass_target = lib.SparseSelection.mass, float(mass_target)
        device = q.get_device()
        if device < 0:  # the plan needs shapes only
            return lib.sparse_decode_plan(problem, 0, read_all_when_small).reads_all
        return _launch(device, lib.sparse_decode_plan, problem, 0, read_all_when_small).reads_all


def sparse_kv_append(cache, new_keys, new_values):
    cache.append(new_keys, new_values)


def sparse_kv_from_dense(keys, values, lengths, cache):
    cache.fill_from_dense(keys, values, lengths)
    return cache


def sparse_decode(cache, q, delta=5.0, softmax_scale=0.0, out_dtype=None, out=None,
                  blocks_per_split=0, mass_target=None, read_all_when_small=True):
    return cache.decode(q, delta, softmax_scale, out_dtype, out, blocks_per_split, mass_target,
                        read_all_when_small)


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

