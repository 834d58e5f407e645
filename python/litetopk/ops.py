"""litetopk's torch ops: torch.ops.litetopk.* and the Python functions engines call.

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
                     algo="auto") -> (indices [B * next_n, k] int32 token positions, values)
      the decode indexer fused with exact top-k; graph-safe as contexts grow.
  sparse_kv_append, sparse_kv_from_dense: the sparse decoding cache writers.
  sparse_decode(q, <cache>, block_table=None, delta=5.0, softmax_scale=0.0, out_dtype=None)
      -> (out [B, Hq, D], lse [B, Hq]);  dense_decode(q, keys, values, lengths, ...) likewise.
  sparse_attention(q, kv, indices, sm_scale, d_v=512, algo="auto")
      -> (out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q], lse [s_q, h_q]): FlashMLA's sparse
      prefill (flash_mla_sparse_fwd), base 2; algo "per-query", "union-packed" or "plain" picks
      the GPU kernel.

The module-level functions `fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, ...)`,
`fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k, ...)`, `fp8_paged_mqa_logits(q, kv_cache,
weights, context_lens, block_table, [schedule_meta,] max_context_len)` and `fp8_paged_mqa_topk(...,
max_context_len, k)` take DeepGEMM's Python arguments, so an engine swaps one import
(docs/integration.md).
"""
import contextlib
import threading

import torch

from . import _problems as P
from ._ext import ext

__all__ = [
    "topk", "topk_plan", "fp8_mqa_logits", "fp8_mqa_topk", "fp8_mqa_topk_plan",
    "fp8_paged_mqa_logits", "fp8_paged_mqa_topk", "fp8_paged_mqa_topk_plan", "IndexerState",
    "SparseKvCache", "sparse_kv_append", "sparse_kv_from_dense", "sparse_decode", "dense_decode",
    "sparse_attention", "flash_mla_sparse_fwd",
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


# ---------------------------------------------------------------- the eager CUDA path
# Host time per call matters (the target is <= 5 us per op): a CUDA call validates its arguments
# and sizes its workspace once per signature (every tensor's shape, strides, dtype and device, and
# the scalar arguments: everything the checks and the size query read) and keeps the result as a
# plan; later calls with the same signature only read the addresses and launch.

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_capturing = (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
              or torch.cuda.is_current_stream_capturing)
_thread = threading.get_ident


def _stream(device):
    """The current stream of CUDA device `device` (an index) as an int."""
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def _on(device):
    """The library launches on the current device: switch to the tensors' device (an index) when
    needed."""
    if device == _current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def _meta(t):
    """What the argument checks read of a tensor (None stays None)."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


def _ptr(t):
    return 0 if t is None else t.data_ptr()


_PLANS_MAX = 4096
_plans = {}


def _remember(key, plan):
    if len(_plans) >= _PLANS_MAX:  # e.g. a new prefill chunk length per call: start over
        _plans.clear()
    _plans[key] = plan
    return plan


def _launch(device, launch, *args):
    """launch(*args) with CUDA device `device` current (the library launches on the current
    device)."""
    if device == _current_device():
        return launch(*args)
    with torch.cuda.device(device):
        return launch(*args)


def _empty_workspace(nbytes, device):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


# Eager calls on the default stream reuse one workspace per (device, thread): calls on one stream
# run in order, so a call's kernels start after the previous call's are done with it, and a thread
# enqueues all of a call's launches before its next call starts. Other streams (where CUDA graphs
# are captured, and where torch.compile's CUDA graph trees run with their private memory pool),
# calls under capture, and workspaces over the cap take one of their own from torch's caching
# allocator per call.
_SCRATCH_MAX_BYTES = 16 << 20
_SCRATCH_MIN_BYTES = 64 << 10
_SCRATCH_ENTRIES = 16
_scratch = {}


def _workspace(nbytes, device, stream):
    """(address, owner) of nbytes of workspace for a launch on `stream` of device `device` (the
    current device); keep the owner alive until the launch is enqueued."""
    if nbytes == 0:
        return 0, None
    if stream == 0 and nbytes <= _SCRATCH_MAX_BYTES and not _capturing():
        key = (device, _thread())
        entry = _scratch.get(key)
        if entry is None or entry[1] < nbytes:
            if entry is None and len(_scratch) >= _SCRATCH_ENTRIES:
                del _scratch[next(iter(_scratch))]
            owner = _empty_workspace(max(nbytes, _SCRATCH_MIN_BYTES), device)
            entry = _scratch[key] = (owner.data_ptr(), owner.numel(), owner)
        return entry[0], entry[2]
    owner = _empty_workspace(nbytes, device)
    return owner.data_ptr(), owner


_lib = torch.library.Library("litetopk", "FRAGMENT")


def _register(schema, impl, fake):
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    _lib.impl(name, impl, "CUDA")
    _lib.impl(name, impl, "CPU")
    torch.library.register_fake(f"litetopk::{name}", fake, lib=_lib)


# ---------------------------------------------------------------- topk

def _select_args(scores, k, indices, values, row_starts, row_ends, largest, sorted_,
                 deterministic):
    return P.select_args(_view(scores), k, _opt(row_starts), _opt(row_ends), _view(indices),
                         _opt(values), largest, sorted_, deterministic)


def _select_plan(args, algo):
    """(select_topk, the problem's sizes and flags, the algorithm, workspace bytes) of one CUDA
    signature; the size query validates the problem. "auto" is resolved here, so the call runs
    the algorithm its workspace was sized for."""
    code = P.algo_code(P.SELECT_ALGOS, algo, "algo")
    lib = ext()
    size = lib.select_topk_workspace_size(*args, code)
    if code == P.SELECT_ALGOS["auto"]:
        code = P.SELECT_ALGOS[lib.select_topk_dispatch(*args)]
    return lib.select_topk, args[1:5], args[8], code, size


def _select_launch(plan, device, scores, k, indices, values, row_starts, row_ends):
    select, (dtype, batch, n, row_stride), flags, code, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    select(scores.data_ptr(), dtype, batch, n, row_stride, _ptr(row_starts), _ptr(row_ends), k,
           flags, indices.data_ptr(), _ptr(values), code, workspace, size, stream)


def _select(scores, k, indices, values, row_starts, row_ends, largest, sorted_, deterministic,
            algo, outputs):
    """select_topk into indices/values; `outputs` is their part of the signature ("new" for
    outputs _topk_fake made)."""
    device = scores.get_device()
    if device < 0:
        args = _select_args(scores, k, indices, values, row_starts, row_ends, largest, sorted_,
                            deterministic)
        P.algo_code(P.SELECT_ALGOS, algo, "algo")
        ext().select_topk_cpu(*args, 1, 0)  # the CPU backend's fast path whatever algo says
        return
    key = ("select", _meta(scores), _meta(row_starts), _meta(row_ends), outputs, k, largest,
           sorted_, deterministic, algo)
    plan = _plans.get(key)
    if plan is None:
        args = _select_args(scores, k, indices, values, row_starts, row_ends, largest, sorted_,
                            deterministic)
        plan = _remember(key, _launch(device, _select_plan, args, algo))
    _launch(device, _select_launch, plan, device, scores, k, indices, values, row_starts,
            row_ends)


def _topk_out(scores, k, indices, values=None, row_starts=None, row_ends=None, largest=True,
              sorted=False, deterministic=False, algo="auto"):
    _select(scores, k, indices, values, row_starts, row_ends, largest, sorted, deterministic, algo,
            (_meta(indices), _meta(values)))


def _topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
          deterministic=False, algo="auto"):
    indices, values = _topk_fake(scores, k)
    _select(scores, k, indices, values, row_starts, row_ends, largest, sorted, deterministic, algo,
            "new")
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


def _indexer_inputs(q, kv, kv_scale, weights, ks, ke):
    return (q.data_ptr(), kv.data_ptr(), kv_scale.data_ptr(), weights.data_ptr(), ks.data_ptr(),
            ke.data_ptr())


def _logits_launch(plan, device, q, kv, kv_scale, weights, ks, ke, logits):
    launch, sizes, stride = plan
    launch(_indexer_inputs(q, kv, kv_scale, weights, ks, ke) + sizes + (0, 0), logits.data_ptr(),
           stride, _stream(device))


def _logits_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, logits):
    device = q.get_device()
    key = ("logits", _meta(q), _meta(kv), _meta(kv_scale), _meta(weights), _meta(cu_seqlen_ks),
           _meta(cu_seqlen_ke), _meta(logits))
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        problem = _indexer_problem(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, 1)
        T, S = problem[6], problem[9]
        stride = P.logits_stride(_view(logits), T, S, device)
        if device < 0:
            ext().indexer_logits_cpu(problem, logits.data_ptr(), stride)
            return
        plan = _remember(key, (ext().indexer_logits, problem[6:11], stride))
    _launch(device, _logits_launch, plan, device, q, kv, kv_scale, weights, cu_seqlen_ks,
            cu_seqlen_ke, logits)


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


def _state_args(state):
    return (0, 0) if state is None else (state.data_ptr(), state.numel())


def _indexer_plan(problem, code, state):
    """(indexer_topk, the problem's sizes, the algorithm, the state's bytes, workspace bytes) of
    one CUDA signature. The size query sees what the call will: the same problem and options,
    the state included (with one, the call also writes its hot sample, from more workspace), and
    "auto" resolved here, so the call runs the algorithm its workspace was sized for."""
    lib = ext()
    state_bytes = _state_args(state)[1]
    size = lib.indexer_topk_workspace_size(problem, code, 0, True, *_state_args(state))
    if code == P.INDEXER_ALGOS["auto"]:
        code = P.INDEXER_ALGOS[lib.indexer_topk_dispatch(problem)]
    return lib.indexer_topk, problem[6:11], code, state_bytes, size


def _indexer_launch(plan, device, q, kv, kv_scale, weights, ks, ke, indices, values, state):
    launch, sizes, code, state_bytes, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    launch(_indexer_inputs(q, kv, kv_scale, weights, ks, ke) + sizes
           + (indices.data_ptr(), _ptr(values)),
           code, 0, True, _ptr(state), state_bytes, workspace, size, stream)


def _indexer_select(q, kv, kv_scale, weights, ks, ke, k, indices, values, state, algo, outputs):
    """indexer_topk into indices/values; `outputs` is their part of the signature ("new" for
    outputs _mqa_topk_fake made)."""
    device = q.get_device()
    key = ("indexer", _meta(q), _meta(kv), _meta(kv_scale), _meta(weights), _meta(ks), _meta(ke),
           k, outputs, _meta(state), algo)
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        problem = _indexer_problem(q, kv, kv_scale, weights, ks, ke, k, indices, values)
        code = P.algo_code(P.INDEXER_ALGOS, algo, "algo")
        if state is not None:
            P.check("state", _view(state), (None,), ("uint8",), device=device)
        if device < 0:
            # The reference needs no state (its result is the same).
            ext().indexer_topk_cpu(problem)
            return
        plan = _remember(key, _launch(device, _indexer_plan, problem, code, state))
    _launch(device, _indexer_launch, plan, device, q, kv, kv_scale, weights, ks, ke, indices,
            values, state)


def _mqa_topk_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices,
                  values=None, state=None, algo="auto"):
    _indexer_select(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices, values,
                    state, algo, (_meta(indices), _meta(values)))


def _mqa_topk_fake(q, kv, kv_scale, weights, ks, ke, k, *args, **kwargs):
    shape = (q.shape[0], max(k, 0))
    return (q.new_empty(shape, dtype=torch.int32), q.new_empty(shape, dtype=torch.float32))


def _mqa_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, state=None, algo="auto"):
    indices, values = _mqa_topk_fake(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k)
    _indexer_select(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k, indices, values,
                    state, algo, "new")
    return indices, values


_INDEXER_ARGS = ("Tensor q, Tensor kv, Tensor kv_scale, Tensor weights, Tensor cu_seqlen_ks, "
                 "Tensor cu_seqlen_ke, int k")
_register(f"fp8_mqa_topk({_INDEXER_ARGS}, Tensor(a!)? state=None, str algo=\"auto\") "
          "-> (Tensor indices, Tensor values)", _mqa_topk, _mqa_topk_fake)
_register(f"fp8_mqa_topk_out({_INDEXER_ARGS}, Tensor(a!) indices, Tensor(b!)? values=None, "
          "Tensor(c!)? state=None, str algo=\"auto\") -> ()",
          _mqa_topk_out, lambda *args, **kwargs: None)


# ---------------------------------------------------------------- paged decode indexer

def _paged_context_lens(context_lens, next_n):
    """context_lens as the library takes them, [B] int32: a [B, next_n] tensor (DeepGEMM's and
    vLLM's 2-D form, row b, j sees context_lens[b, j] tokens) gives its last column, the tokens
    the request's last query sees; the library derives the others as context_lens[b, -1] -
    next_n + j + 1, which is what the 2-D form holds for causal multi-token prediction. A device
    slice (a copy when next_n > 1): nothing is read on the host."""
    if context_lens.dim() == 2:
        if context_lens.shape[1] not in (1, next_n):
            raise ValueError(f"context_lens must be of shape [batch] or [batch, next_n = "
                             f"{next_n}], got shape {tuple(context_lens.shape)}")
        context_lens = context_lens[:, -1]
        if not context_lens.is_contiguous():
            context_lens = context_lens.contiguous()
    return context_lens


def _paged_problem(q, kv_cache, weights, context_lens, block_table, max_context, k,
                   indices=None, values=None):
    return P.paged_indexer_args(_view(q), _view(kv_cache), _view(weights), _view(context_lens),
                                _view(block_table), max_context, k, _opt(indices),
                                _opt(values))


def _paged_inputs(q, kv_cache, weights, context_lens, block_table):
    return (q.data_ptr(), kv_cache.data_ptr(), weights.data_ptr(), context_lens.data_ptr(),
            block_table.data_ptr())


def _paged_logits_launch(plan, device, q, kv_cache, weights, context_lens, block_table, logits):
    launch, sizes, stride = plan
    launch(_paged_inputs(q, kv_cache, weights, context_lens, block_table) + sizes + (0, 0),
           logits.data_ptr(), stride, _stream(device))


def _paged_logits_out(q, kv_cache, weights, context_lens, block_table, max_context_len, logits):
    device = q.get_device()
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    key = ("paged_logits", _meta(q), _meta(kv_cache), _meta(weights), _meta(context_lens),
           _meta(block_table), max_context_len, _meta(logits))
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                                 max_context_len, 1)
        rows = problem[5] * problem[6]
        stride = P.logits_stride(_view(logits), rows, problem[12], device)
        if device < 0:
            ext().indexer_logits_paged_cpu(problem, logits.data_ptr(), stride)
            return
        plan = _remember(key, (ext().indexer_logits_paged, problem[5:14], stride))
    _launch(device, _paged_logits_launch, plan, device, q, kv_cache, weights, context_lens,
            block_table, logits)


def _paged_logits_fake(q, kv_cache, weights, context_lens, block_table, max_context_len):
    rows = q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]
    return q.new_empty((rows, max(max_context_len, 0)), dtype=torch.float32)


def _paged_logits(q, kv_cache, weights, context_lens, block_table, max_context_len):
    logits = _paged_logits_fake(q, kv_cache, weights, context_lens, block_table, max_context_len)
    _paged_logits_out(q, kv_cache, weights, context_lens, block_table, max_context_len, logits)
    return logits


_PAGED_ARGS = ("Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
               "Tensor block_table, int max_context_len")
_register(f"fp8_paged_mqa_logits({_PAGED_ARGS}) -> Tensor", _paged_logits, _paged_logits_fake)
_register(f"fp8_paged_mqa_logits_out({_PAGED_ARGS}, Tensor(a!) logits) -> ()",
          _paged_logits_out, lambda *args, **kwargs: None)


def _paged_plan(problem, code):
    """(indexer_topk_paged, the problem's sizes, the algorithm, workspace bytes) of one CUDA
    signature: the size query (which validates the problem) sees the algorithm the call runs,
    "auto" resolved here. The workspace depends on max_context_len, never on context_lens."""
    lib = ext()
    size = lib.indexer_topk_paged_workspace_size(problem, code)
    if code == P.INDEXER_ALGOS["auto"]:
        code = P.INDEXER_ALGOS[lib.indexer_topk_paged_dispatch(problem)]
    return lib.indexer_topk_paged, problem[5:14], code, size


def _paged_launch(plan, device, q, kv_cache, weights, context_lens, block_table, indices,
                  values):
    launch, sizes, code, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    launch(_paged_inputs(q, kv_cache, weights, context_lens, block_table) + sizes
           + (indices.data_ptr(), _ptr(values)), code, workspace, size, stream)


def _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, outputs):
    """indexer_topk_paged into indices/values; `outputs` is their part of the signature ("new"
    for outputs _paged_topk_fake made)."""
    device = q.get_device()
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    key = ("paged", _meta(q), _meta(kv_cache), _meta(weights), _meta(context_lens),
           _meta(block_table), max_context_len, k, outputs, algo)
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                                 max_context_len, k, indices, values)
        code = P.algo_code(P.INDEXER_ALGOS, algo, "algo")
        if device < 0:
            ext().indexer_topk_paged_cpu(problem)  # the reference, whatever algo says
            return
        plan = _remember(key, _launch(device, _paged_plan, problem, code))
    _launch(device, _paged_launch, plan, device, q, kv_cache, weights, context_lens, block_table,
            indices, values)


def _paged_topk_out(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                    indices, values=None, algo="auto"):
    _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, (_meta(indices), _meta(values)))


def _paged_topk_fake(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                     *args, **kwargs):
    rows = q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]
    shape = (rows, max(k, 0))
    return (q.new_empty(shape, dtype=torch.int32), q.new_empty(shape, dtype=torch.float32))


def _paged_topk(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                algo="auto"):
    indices, values = _paged_topk_fake(q, kv_cache, weights, context_lens, block_table,
                                       max_context_len, k)
    _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, "new")
    return indices, values


_register(f"fp8_paged_mqa_topk({_PAGED_ARGS}, int k, str algo=\"auto\") "
          "-> (Tensor indices, Tensor values)", _paged_topk, _paged_topk_fake)
_register(f"fp8_paged_mqa_topk_out({_PAGED_ARGS}, int k, Tensor(a!) indices, "
          "Tensor(b!)? values=None, str algo=\"auto\") -> ()",
          _paged_topk_out, lambda *args, **kwargs: None)


# ---------------------------------------------------------------- sparse decoding

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
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        cache = _cache(*tensors)
        shape, dtype = cache[1:4], tail_keys.dtype
        for name, t in (("new_keys", new_keys), ("new_values", new_values)):
            P.check(name, _view(t), shape, (_NAMES.get(dtype),), device=device)
        if device < 0:
            ext().sparse_kv_append_cpu(cache, new_keys.data_ptr(), new_values.data_ptr())
            return
        plan = _remember(key, (ext().sparse_kv_append, cache[:6], cache[7]))
    _launch(device, _append_launch, plan, device, tensors, new_keys, new_values)


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
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        cache = _cache(*tensors)
        attention = P.attention_args(_view(q), _NAMES.get(tensors[4].dtype), device, _view(out),
                                     _opt(lse), softmax_scale)
        mask = P.kept_mask_address(_opt(kept_mask), cache, device)
        lib = ext()
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
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        dense = P.dense_cache_args(_view(keys), _view(values), _view(lengths), P.SCORE_DTYPES)
        attention = P.attention_args(_view(q), _NAMES.get(keys.dtype), device, _view(out),
                                     _opt(lse), softmax_scale)
        lib = ext()
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


# ---------------------------------------------------------------- sparse attention

def _sparse_attention_problem(q, kv, indices, sm_scale, out, max_logits, lse, algo):
    return P.sparse_attention_args(_view(q), _view(kv), _view(indices), sm_scale, _view(out),
                                   _opt(max_logits), _opt(lse), algo=algo)


def _sparse_attention_launch(plan, device, q, kv, indices, out, max_logits, lse):
    launch, sizes, algo, size = plan
    stream = _stream(device)
    workspace, owner = _workspace(size, device, stream)
    launch((q.data_ptr(), kv.data_ptr(), indices.data_ptr()) + sizes
           + (out.data_ptr(), _ptr(max_logits), _ptr(lse), algo), workspace, size, stream)


def _sparse_attention_select(q, kv, indices, sm_scale, out, max_logits, lse, algo, outputs):
    """sparse_attention into out (max_logits, lse); `outputs` is their part of the signature
    ("new" for outputs _sparse_attention_fake made). The library validates every GPU call (the
    addresses' alignment included); the plan only saves the Python checks and the size query.
    The workspace is sized for `algo` (auto resolves from the sizes alone, the same at the size
    query and at every call of the signature). CPU tensors run the reference whatever algo names
    (the name is still checked, and union-packed only where it applies, as on the GPU)."""
    device = q.get_device()
    key = ("sparse_attention", _meta(q), _meta(kv), _meta(indices), float(sm_scale), outputs,
           algo)
    plan = None if device < 0 else _plans.get(key)
    if plan is None:
        problem = _sparse_attention_problem(q, kv, indices, sm_scale, out, max_logits, lse, algo)
        lib = ext()
        if device < 0:
            lib.sparse_attention_cpu(problem)
            return
        size = _launch(device, lib.sparse_attention_workspace_size, problem)
        plan = _remember(key, (lib.sparse_attention, problem[3:10], problem[13], size))
    _launch(device, _sparse_attention_launch, plan, device, q, kv, indices, out, max_logits, lse)


def _sparse_attention_out(q, kv, indices, sm_scale, out, max_logits=None, lse=None,
                          algo="auto"):
    _sparse_attention_select(q, kv, indices, sm_scale, out, max_logits, lse, algo,
                             (_meta(out), _meta(max_logits), _meta(lse)))


def _sparse_attention_fake(q, kv, indices, sm_scale, d_v=P.SPARSE_ATTENTION_D_V, algo="auto"):
    if d_v != P.SPARSE_ATTENTION_D_V:
        raise ValueError(f"d_v must be {P.SPARSE_ATTENTION_D_V}, got {d_v}")
    if q.dim() != 3:
        raise ValueError(f"q must be a 3-D array [s_q, h_q, d_qk], got shape {tuple(q.shape)}")
    s_q, h_q = q.shape[0], q.shape[1]
    return (q.new_empty((s_q, h_q, d_v), dtype=torch.bfloat16),
            q.new_empty((s_q, h_q), dtype=torch.float32),
            q.new_empty((s_q, h_q), dtype=torch.float32))


def _sparse_attention(q, kv, indices, sm_scale, d_v=P.SPARSE_ATTENTION_D_V, algo="auto"):
    out, max_logits, lse = _sparse_attention_fake(q, kv, indices, sm_scale, d_v)
    _sparse_attention_select(q, kv, indices, sm_scale, out, max_logits, lse, algo, ("new", d_v))
    return out, max_logits, lse


_register("sparse_attention(Tensor q, Tensor kv, Tensor indices, float sm_scale, int d_v=512, "
          "str algo=\"auto\") -> (Tensor out, Tensor max_logits, Tensor lse)",
          _sparse_attention, _sparse_attention_fake)
_register("sparse_attention_out(Tensor q, Tensor kv, Tensor indices, float sm_scale, "
          "Tensor(a!) out, Tensor(b!)? max_logits=None, Tensor(c!)? lse=None, "
          "str algo=\"auto\") -> ()",
          _sparse_attention_out, lambda *args, **kwargs: None)


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
    there (topk_out) and returns out. algo: "auto", "radix", "sample-filter" or "grid-radix" (GPU)."""
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


def fp8_mqa_topk_plan(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, k, algo="auto", state=None):
    """What fp8_mqa_topk does on these CUDA inputs: {"algo": the path auto picks,
    "workspace_bytes": the workspace of `algo` (with `state`, an IndexerState or its buffer, it
    includes the hot-sample writer's)}."""
    kv_fp8, kv_scale = _split_kv(kv)
    buffer = state.buffer if isinstance(state, IndexerState) else state
    indices = torch.empty((q.shape[0], max(k, 0)), dtype=torch.int32, device=q.device)
    problem = _indexer_problem(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k,
                               indices)
    if buffer is not None:
        P.check("state", _view(buffer), (None,), ("uint8",), device=q.get_device())
    lib = ext()
    with _on(q.get_device()):
        return {"algo": lib.indexer_topk_dispatch(problem),
                "workspace_bytes": lib.indexer_topk_workspace_size(
                    problem, P.algo_code(P.INDEXER_ALGOS, algo, "algo"), 0, True,
                    *_state_args(buffer))}


def _paged_q(q):
    """q, or q_fp8 of DeepGEMM's fp8_fp4_paged_mqa_logits form (q_fp8, None)."""
    if isinstance(q, (tuple, list)):
        q, q_scale = q
        if q_scale is not None:
            raise ValueError("q must be fp8 e4m3 (q, None): a q scale (DeepGEMM's fp4 q) is not "
                             "supported")
    return q


def _paged_tail(args, kwargs, names, deepgemm_extra=()):
    """The arguments after block_table as {name: value} for `names`, from litetopk's order
    (max_context_len[, k]) or DeepGEMM's, which passes schedule_meta (a tensor: litetopk needs no
    schedule, it is dropped) before max_context_len and may pass `deepgemm_extra` after `names`
    (e.g. clean_logits: litetopk's logits are always clean, it is dropped)."""
    args = list(args)
    if args and isinstance(args[0], torch.Tensor):
        args.pop(0)
    kwargs.pop("schedule_meta", None)
    for name in deepgemm_extra:
        kwargs.pop(name, None)
    if len(args) > len(names) + len(deepgemm_extra):
        raise TypeError(f"too many positional arguments after block_table: {len(args)}")
    values = dict(zip(names, args))
    for name in names[len(values):]:
        if name not in kwargs:
            raise TypeError(f"missing argument {name!r}")
        values[name] = kwargs.pop(name)
    if kwargs:
        raise TypeError(f"unexpected arguments: {', '.join(kwargs)}")
    return values


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


def fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, *args, algo="auto",
                       out=None, **kwargs):
    """fp8_paged_mqa_logits fused with exact top-k: (indices [B * next_n, k] int32 token
    positions, -1 padded; values [B * next_n, k] fp32). Arguments as fp8_paged_mqa_logits plus
    k after max_context_len:

        fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, max_context_len, k)

    (DeepGEMM's schedule_meta may stay before max_context_len; it is ignored). A token of an
    out-of-range block-table entry is never selected; a row with fewer than k tokens is -1
    padded. The workspace is sized by max_context_len, never by context_lens (a device tensor,
    never read on the host): one CUDA graph captured at a max_context_len serves every step whose
    contexts fit in it. algo: "auto", "unfused" (logits into the workspace, then select) or
    "fused" (the scores stay on chip); CPU tensors run the reference whatever algo says.
    out=(indices, values or None) writes there."""
    tail = _paged_tail(args, kwargs, ("max_context_len", "k"))
    max_context, k = int(tail["max_context_len"]), int(tail["k"])
    q = _paged_q(q)
    direct = _direct(q, kv_cache, *(out or ()))
    if out is None:
        op = _paged_topk if direct else torch.ops.litetopk.fp8_paged_mqa_topk
        return op(q, kv_cache, weights, context_lens, block_table, max_context, k, algo)
    op = _paged_topk_out if direct else torch.ops.litetopk.fp8_paged_mqa_topk_out
    op(q, kv_cache, weights, context_lens, block_table, max_context, k, out[0], out[1], algo)
    return out


def fp8_paged_mqa_topk_plan(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                            algo="auto"):
    """What fp8_paged_mqa_topk does on these CUDA inputs: {"algo": the path auto picks,
    "workspace_bytes": the workspace of `algo`}."""
    q = _paged_q(q)
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    rows = q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]
    indices = torch.empty((rows, max(k, 0)), dtype=torch.int32, device=q.device)
    problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                             int(max_context_len), int(k), indices)
    lib = ext()
    with _on(q.get_device()):
        return {"algo": lib.indexer_topk_paged_dispatch(problem),
                "workspace_bytes": lib.indexer_topk_paged_workspace_size(
                    problem, P.algo_code(P.INDEXER_ALGOS, algo, "algo"))}


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


def sparse_attention(q, kv, indices, sm_scale, d_v=512, out=None, algo="auto"):
    """MLA attention of each query over the tokens its row of indices selects, FlashMLA's sparse
    prefill (flash_mla_sparse_fwd): returns (out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q]
    fp32, lse [s_q, h_q] fp32), max_logits and lse in base 2 (natural-log values times log2(e),
    as FlashMLA's first release). q [s_q, h_q, d_qk] bf16 (h_q 16, 32, 64 or 128; d_qk 576 or
    512), kv [s_kv, 1, d_qk] bf16 (values: its first d_v = 512 columns), indices [s_q, 1, topk]
    int32 (or [s_q, topk]); every tensor contiguous. An index outside [0, s_kv) (-1 padding
    included) is skipped; a token listed twice counts twice; a query with nothing to attend gets
    out 0, max_logits and lse -inf. out=(out, max_logits or None, lse or None) writes there
    (sparse_attention_out) and returns out. CUDA tensors run the Hopper kernels on the current
    stream (graph-capturable): algo "auto" is "union-packed" (LiteDSA: G = 64 / h_q neighbouring
    queries load the union of their rows once) at h_q 16 and 32 (where it applies: G * topk <=
    8192, s_kv <= 2^27), "per-query" at 64 and 128; "per-query", "union-packed" or "plain" (the
    cross-check kernel) picks one (include/litetopk/attention.h, docs/attention.md). CPU tensors
    run the fp64 reference whatever algo names (the name is checked all the same, union-packed
    where it applies)."""
    direct = _direct(q, kv, indices, *(out or ()))
    if out is None:
        op = _sparse_attention if direct else torch.ops.litetopk.sparse_attention
        return op(q, kv, indices, float(sm_scale), int(d_v), algo)
    if len(out) != 3:
        raise ValueError(f"out must be (out, max_logits or None, lse or None), got {len(out)} "
                         "items")
    if out[0] is not None and out[0].dim() == 3 and out[0].shape[2] != d_v:
        raise ValueError(f"out must be of shape [s_q, h_q, d_v = {d_v}], got shape "
                         f"{tuple(out[0].shape)}")
    op = _sparse_attention_out if direct else torch.ops.litetopk.sparse_attention_out
    op(q, kv, indices, float(sm_scale), *out, algo)
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

