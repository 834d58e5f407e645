"""litetopk's torch ops: torch.ops.litetopk.* and the Python functions engines call.

Every op has a schema, a fake (meta) implementation for torch.compile and fake tensors, and one
real implementation registered for CUDA and CPU: CUDA tensors run the GPU kernels on the current
stream with a workspace taken from torch's caching allocator (nothing else is allocated, nothing
synchronizes, so the ops can be captured in a CUDA graph); CPU tensors run the CPU backend (the
references). The `_out` variants write into tensors the caller preallocated.

  topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
       deterministic=False) -> (indices [B, k] int32, values [B, k])
      vLLM's top-k-per-row layout: scores [B, N] (fp32/bf16/fp16, any row stride), indices
      relative to the row start (row_starts[b], 0 when None), -1 padded, values NaN padded.
  fp8_mqa_logits(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke) -> logits [T, S] fp32
      DeepGEMM's fp8_mqa_logits with (kv, kv_scale) flattened; -inf outside [ks, ke).
  fp8_mqa_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, state=None,
               algo="auto") -> (indices [T, k] int32 relative to ks, values [T, k] fp32)
      the indexer fused with exact top-k: the logits never reach memory.
  sparse_kv_append, sparse_kv_from_dense: the sparse decoding cache writers.
  sparse_decode(q, <cache>, block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None)
      -> (out [B, Hq, D], lse [B, Hq]);  dense_decode(q, keys, values, lengths, ...) likewise.

The module-level functions `fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, ...)` and
`fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k, ...)` take DeepGEMM's Python arguments, so an
engine swaps one import (docs/integration.md).
"""
import contextlib

import torch

from . import _problems as P
from ._ext import ext

__all__ = [
    "topk", "topk_plan", "fp8_mqa_logits", "fp8_mqa_topk", "fp8_mqa_topk_plan", "IndexerState", "SparseKvCache",
    "sparse_kv_append", "sparse_kv_from_dense", "sparse_decode", "dense_decode",
]

_NAMES = {
    torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
    torch.int32: "int32", torch.uint8: "uint8", torch.bool: "bool",
    torch.float8_e4m3fn: "float8_e4m3fn",
}


def _view(t):
    return (t.data_ptr(), t.shape, t.stride(), _NAMES.get(t.dtype, str(t.dtype)), t.get_device(),
            t.is_contiguous())


def _opt(t):
    return None if t is None else _view(t)


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device):
    """The current stream of CUDA device `device` (an index) as an int."""
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def _on(device):
    """The library launches on the current device: switch to the tensors' device (an index) when
    needed."""
    if device == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


_workspace_sizes = {}


def _workspace(key, size_query, device):
    """A uint8 workspace from torch's caching allocator; sizes are cached per problem shape."""
    size = _workspace_sizes.get(key)
    if size is None:
        size = _workspace_sizes[key] = size_query()
    return torch.empty(max(size, 1), dtype=torch.uint8, device=device), size


_lib = torch.library.Library("litetopk", "FRAGMENT")


def _register(schema, impl, fake):
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    _lib.impl(name, impl, "CUDA")
    _lib.impl(name, impl, "CPU")
    torch.library.register_fake(f"litetopk::{name}", fake, lib=_lib)


# ---------------------------------------------------------------- topk

def _topk_out(scores, k, indices, values=None, row_starts=None, row_ends=None, largest=True,
              sorted=False, deterministic=False, algo="auto"):
    args = P.select_args(_view(scores), k, _opt(row_starts), _opt(row_ends), _view(indices),
                         _opt(values), largest, sorted, deterministic)
    code = P.algo_code(P.SELECT_ALGOS, algo, "algo")
    lib = ext()
    device = scores.get_device()
    if device < 0:
        lib.select_topk_cpu(*args, 1, 0)  # the CPU backend's fast path whatever algo says
        return
    key = ("select", device, args[1:5], bool(args[5]), bool(args[6]), k, args[8],
           bool(args[10]), code)
    with _on(device):
        workspace, size = _workspace(key, lambda: lib.select_topk_workspace_size(*args, code),
                                     device)
        lib.select_topk(*args, code, workspace.data_ptr(), size, _stream(device))


def _topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
          deterministic=False, algo="auto"):
    indices, values = _topk_fake(scores, k)
    _topk_out(scores, k, indices, values, row_starts, row_ends, largest, sorted, deterministic,
              algo)
    return indices, values


def _topk_fake(scores, k, *args, **kwargs):
    shape = (scores.shape[0], max(k, 0))
    return (scores.new_empty(shape, dtype=torch.int32), scores.new_empty(shape))


_register("topk(Tensor scores, int k, Tensor? row_starts=None, Tensor? row_ends=None, "
          "bool largest=True, bool sorted=False, bool deterministic=False, str algo=\"auto\") "
          "-> (Tensor indices, Tensor values)", _topk, _topk_fake)
_register("topk_out(Tensor scores, int k, Tensor(a!) indices, Tensor(b!)? values=None, "
          "Tensor? row_starts=None, Tensor? row_ends=None, bool largest=True, "
          "bool sorted=False, bool deterministic=False, str algo=\"auto\") -> ()",
          _topk_out, lambda *args, **kwargs: None)


# ---------------------------------------------------------------- indexer

def _indexer_problem(q, kv, kv_scale, weights, ks, ke, k, indices=None, values=None):
    return P.indexer_args(_view(q), _view(kv), _view(kv_scale), _view(weights), _view(ks),
                          _view(ke), k, _opt(indices), _opt(values))


def _logits_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, logits):
    problem = _indexer_problem(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, 1)
    T, S = problem[6], problem[9]
    device = q.get_device()
    stride = P.logits_stride(_view(logits), T, S, device)
    lib = ext()
    if device < 0:
        lib.indexer_logits_cpu(problem, logits.data_ptr(), stride)
        return
    with _on(device):
        lib.indexer_logits(problem, logits.data_ptr(), stride, _stream(device))


def _logits_fake(q, kv, *args):
    return q.new_empty((q.shape[0], kv.shape[0]), dtype=torch.float32)


def _logits(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke):
    logits = _logits_fake(q, kv)
    _logits_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, logits)
    return logits


_register("fp8_mqa_logits(Tensor q, Tensor kv, Tensor kv_scale, Tensor weights, "
          "Tensor cu_seqlen_ks, Tensor cu_seqlen_ke) -> Tensor", _logits, _logits_fake)
_register("fp8_mqa_logits_out(Tensor q, Tensor kv, Tensor kv_scale, Tensor weights, "
          "Tensor cu_seqlen_ks, Tensor cu_seqlen_ke, Tensor(a!) logits) -> ()",
          _logits_out, lambda *args, **kwargs: None)


def _mqa_topk_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices,
                  values=None, state=None, algo="auto"):
    problem = _indexer_problem(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices,
                               values)
    code = P.algo_code(P.INDEXER_ALGOS, algo, "algo")
    lib = ext()
    device = q.get_device()
    if state is not None:
        P.check("state", _view(state), (None,), ("uint8",), device=device)
    if device < 0:
        lib.indexer_topk_cpu(problem)  # the reference needs no state (its result is the same)
        return
    key = ("indexer", device, problem[6:11], bool(problem[12]), code)
    with _on(device):
        workspace, size = _workspace(
            key, lambda: lib.indexer_topk_workspace_size(problem, code, 0, True), device)
        state_ptr, state_bytes = (0, 0) if state is None else (state.data_ptr(), state.numel())
        lib.indexer_topk(problem, code, 0, True, state_ptr, state_bytes, workspace.data_ptr(),
                         size, _stream(device))


def _mqa_topk_fake(q, kv, kv_scale, weights, ks, ke, k, *args, **kwargs):
    shape = (q.shape[0], max(k, 0))
    return (q.new_empty(shape, dtype=torch.int32), q.new_empty(shape, dtype=torch.float32))


def _mqa_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, state=None, algo="auto"):
    indices, values = _mqa_topk_fake(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k)
    _mqa_topk_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices, values,
                  state, algo)
    return indices, values


_INDEXER_ARGS = ("Tensor q, Tensor kv, Tensor kv_scale, Tensor weights, Tensor cu_seqlen_ks, "
                 "Tensor cu_seqlen_ke, int k")
_register(f"fp8_mqa_topk({_INDEXER_ARGS}, Tensor(a!)? state=None, str algo=\"auto\") "
          "-> (Tensor indices, Tensor values)", _mqa_topk, _mqa_topk_fake)
_register(f"fp8_mqa_topk_out({_INDEXER_ARGS}, Tensor(a!) indices, Tensor(b!)? values=None, "
          "Tensor(c!)? state=None, str algo=\"auto\") -> ()",
          _mqa_topk_out, lambda *args, **kwargs: None)


# ---------------------------------------------------------------- sparse decoding

_CACHE_ARGS = ("Tensor key_codes, Tensor key_scales, Tensor key_residuals, Tensor values, "
               "Tensor tail_keys, Tensor lengths, Tensor? block_table")
_CACHE_MUT = ("Tensor(a!) key_codes, Tensor(b!) key_scales, Tensor(c!) key_residuals, "
              "Tensor(d!) values, Tensor(e!) tail_keys, Tensor(f!) lengths, Tensor? block_table")


def _cache(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table):
    return P.sparse_cache_args(_view(key_codes), _view(key_scales), _view(key_residuals),
                               _view(values), _view(tail_keys), _view(lengths), _opt(block_table))


def _append(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table,
            new_keys, new_values):
    cache = _cache(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table)
    shape, dtype, device = cache[1:4], tail_keys.dtype, tail_keys.get_device()
    for name, t in (("new_keys", new_keys), ("new_values", new_values)):
        P.check(name, _view(t), shape, (_NAMES.get(dtype),), device=device)
    lib = ext()
    if device < 0:
        lib.sparse_kv_append_cpu(cache, new_keys.data_ptr(), new_values.data_ptr())
        return
    with _on(device):
        lib.sparse_kv_append(cache, new_keys.data_ptr(), new_values.data_ptr(), _stream(device))


def _from_dense(keys, values, dense_lengths, key_codes, key_scales, key_residuals, cache_values,
                tail_keys, lengths, block_table=None):
    dense = P.dense_cache_args(_view(keys), _view(values), _view(dense_lengths))
    cache = _cache(key_codes, key_scales, key_residuals, cache_values, tail_keys, lengths,
                   block_table)
    lib = ext()
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


def _sparse_decode_out(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                       block_table, out, lse=None, kept_mask=None, delta=5.0, softmax_scale=0.0,
                       blocks_per_split=0):
    cache = _cache(key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table)
    device = q.get_device()
    attention = P.attention_args(_view(q), _NAMES.get(tail_keys.dtype), device, _view(out),
                                 _opt(lse), softmax_scale)
    mask = P.kept_mask_address(_opt(kept_mask), cache, device)
    lib = ext()
    if device < 0:
        lib.sparse_decode_cpu(cache, attention, float(delta), mask)
        return
    key = ("sparse_decode", device, cache[:8], attention[1], attention[4], bool(mask),
           blocks_per_split)
    with _on(device):
        workspace, size = _workspace(
            key, lambda: lib.sparse_decode_workspace_size(cache, attention, float(delta), mask,
                                                          blocks_per_split), device)
        lib.sparse_decode(cache, attention, float(delta), mask, blocks_per_split,
                          workspace.data_ptr(), size, _stream(device))


def _decode_fake(q, *args, out_dtype=None, **kwargs):
    return (q.new_empty(q.shape, dtype=out_dtype or q.dtype),
            q.new_empty(q.shape[:2], dtype=torch.float32))


def _sparse_decode(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                   block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None,
                   blocks_per_split=0):
    out, lse = _decode_fake(q, out_dtype=out_dtype)
    _sparse_decode_out(q, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                       block_table, out, lse, None, delta, softmax_scale, blocks_per_split)
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


def _dense_decode_out(q, keys, values, lengths, out, lse=None, softmax_scale=0.0,
                      blocks_per_split=0):
    dense = P.dense_cache_args(_view(keys), _view(values), _view(lengths), P.SCORE_DTYPES)
    device = q.get_device()
    attention = P.attention_args(_view(q), _NAMES.get(keys.dtype), device, _view(out),
                                 _opt(lse), softmax_scale)
    lib = ext()
    if device < 0:
        lib.dense_decode_cpu(dense, attention)
        return
    key = ("dense_decode", device, dense[:5], dense[7:10], attention[1], attention[4],
           blocks_per_split)
    with _on(device):
        workspace, size = _workspace(
            key, lambda: lib.dense_decode_workspace_size(dense, attention, blocks_per_split),
            device)
        lib.dense_decode(dense, attention, blocks_per_split, workspace.data_ptr(), size,
                         _stream(device))


def _dense_decode(q, keys, values, lengths, softmax_scale=0.0, out_dtype=None,
                  blocks_per_split=0):
    out, lse = _decode_fake(q, out_dtype=out_dtype)
    _dense_decode_out(q, keys, values, lengths, out, lse, softmax_scale, blocks_per_split)
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


# ---------------------------------------------------------------- the Python front
# The functions below call the ops' implementation directly when nothing traces them (real
# tensors, no torch.compile, no dispatch mode such as FakeTensorMode): the same code the op runs,
# without the dispatcher's round trip into Python (about 10 us of host time per call). Anything
# else goes through torch.ops.litetopk.

_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_Tensor = torch.Tensor


def _direct(*tensors):
    if _is_compiling() or _dispatch_modes():
        return False
    for t in tensors:
        if t is not None and type(t) is not _Tensor:
            return False
    return True


def topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
         deterministic=False, out=None, algo="auto"):
    """Exact top-k per row (torch.ops.litetopk.topk). With out=(indices, values or None) it writes
    there (topk_out) and returns out. algo: "auto", "radix" or "sample-filter" (GPU)."""
    op = (_topk, _topk_out) if _direct(scores, row_starts, row_ends, *(out or ())) else (
        torch.ops.litetopk.topk, torch.ops.litetopk.topk_out)
    if out is None:
        return op[0](scores, k, row_starts, row_ends, largest, sorted, deterministic, algo)
    op[1](scores, k, out[0], out[1], row_starts, row_ends, largest, sorted, deterministic, algo)
    return out


def topk_plan(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
              deterministic=False, algo="auto"):
    """What topk does on these CUDA inputs: {"algo": the algorithm auto picks, "workspace_bytes":
    the workspace of `algo`}."""
    indices = torch.empty((scores.shape[0], max(k, 0)), dtype=torch.int32, device=scores.device)
    args = P.select_args(_view(scores), k, _opt(row_starts), _opt(row_ends), _view(indices),
                         None, largest, sorted, deterministic)
    lib = ext()
    with _on(scores.get_device()):
        return {"algo": lib.select_topk_dispatch(*args),
                "workspace_bytes": lib.select_topk_workspace_size(
                    *args, P.algo_code(P.SELECT_ALGOS, algo, "algo"))}


def _split_kv(kv):
    kv_fp8, kv_scale = kv
    if kv_scale.dim() == 2 and kv_scale.shape[1] == 1:  # [S, 1] as some engines keep it
        kv_scale = kv_scale.view(-1)
    return kv_fp8, kv_scale


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


def fp8_mqa_topk(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, k, state=None, algo="auto",
                 out=None):
    """fp8_mqa_logits fused with top-k, in DeepGEMM's argument order plus k: returns (indices
    [T, k] int32 relative to ks, -1 padded; values [T, k] fp32). state: an IndexerState (or its
    uint8 buffer) carried from one prefill chunk to the next. out=(indices, values or None)
    writes there."""
    kv_fp8, kv_scale = _split_kv(kv)
    buffer = state.buffer if isinstance(state, IndexerState) else state
    direct = _direct(q, kv_fp8, buffer, *(out or ()))
    if out is None:
        op = _mqa_topk if direct else torch.ops.litetopk.fp8_mqa_topk
        return op(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, buffer, algo)
    op = _mqa_topk_out if direct else torch.ops.litetopk.fp8_mqa_topk_out
    op(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, out[0], out[1], buffer, algo)
    return out


def fp8_mqa_topk_plan(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, k, algo="auto"):
    """What fp8_mqa_topk does on these CUDA inputs: {"algo": the path auto picks,
    "workspace_bytes": the workspace of `algo`}."""
    kv_fp8, kv_scale = _split_kv(kv)
    indices = torch.empty((q.shape[0], max(k, 0)), dtype=torch.int32, device=q.device)
    problem = _indexer_problem(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k,
                               indices)
    lib = ext()
    with _on(q.get_device()):
        return {"algo": lib.indexer_topk_dispatch(problem),
                "workspace_bytes": lib.indexer_topk_workspace_size(
                    problem, P.algo_code(P.INDEXER_ALGOS, algo, "algo"), 0, True)}


class IndexerState:
    """The per-layer hot sample carried between prefill chunks of one sequence: it owns a zeroed
    uint8 buffer of indexer_state_bytes(k) (torch's allocator). Pass it with the same k to every
    chunk of the sequence; reset() (graph-capturable) before a new sequence."""

    def __init__(self, k, device=None):
        self.k = int(k)
        self.buffer = torch.zeros(ext().indexer_state_bytes(self.k), dtype=torch.uint8,
                                  device=device)

    def reset(self):
        self.buffer.zero_()
        return self


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
