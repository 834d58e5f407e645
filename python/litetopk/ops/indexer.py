"""The prefill indexer ops: torch.ops.litetopk.fp8_mqa_logits and fp8_mqa_topk (with _out variants),
litetopk.ops.fp8_mqa_topk and its plan, IndexerState."""
import torch

from .. import _problems as P
from ._runtime import (_direct, _launch, _meta, _on, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


def _indexer_problem(q, kv, kv_scale, weights, ks, ke, k, indices=None, values=None):
    return P.indexer_args(_view(q), _view(kv), _view(kv_scale), _view(weights), _view(ks),
                          _view(ke), k, _opt(indices), _opt(values))


def _logits_launch(plan, device, q, kv, kv_scale, weights, ks, ke, logits):
    problem, stride = plan
    library().indexer_logits(problem, q.data_ptr(), kv.data_ptr(), kv_scale.data_ptr(),
                             weights.data_ptr(), ks.data_ptr(), ke.data_ptr(), logits.data_ptr(),
                             stride, _stream(device))


def _logits_out(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, logits):
    device = q.get_device()
    key = ("logits", _meta(q), _meta(kv), _meta(kv_scale), _meta(weights), _meta(cu_seqlen_ks),
           _meta(cu_seqlen_ke), _meta(logits))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = _indexer_problem(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, 1)
        stride = P.logits_stride(_view(logits), problem.num_queries, problem.num_keys, device)
        if device < 0:
            library().indexer_logits_cpu(problem, logits.data_ptr(), stride)
            return
        plan = _remember(key, (problem, stride))
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


def _indexer_plan(problem, algo, state):
    """The library's IndexerPlan of one CUDA signature: it sees what the launches will, the
    state included (with one, each launch also writes its hot sample, from more workspace), and
    resolves "auto", so every launch runs the algorithm its workspace was sized for."""
    lib = library()
    return lib.indexer_topk_plan(problem, P.enum_value(lib.IndexerAlgo, algo, "algo"), 0, True,
                                 *_state_args(state))


def _indexer_launch(plan, device, q, kv, kv_scale, weights, ks, ke, indices, values, state):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().indexer_topk_launch(plan, q.data_ptr(), kv.data_ptr(), kv_scale.data_ptr(),
                                  weights.data_ptr(), ks.data_ptr(), ke.data_ptr(),
                                  indices.data_ptr(), _ptr(values), *_state_args(state),
                                  workspace, stream)


def _indexer_select(q, kv, kv_scale, weights, ks, ke, k, indices, values, state, algo, outputs):
    """indexer_topk into indices/values; `outputs` is their part of the signature ("new" for
    outputs _mqa_topk_fake made)."""
    device = q.get_device()
    key = ("indexer", _meta(q), _meta(kv), _meta(kv_scale), _meta(weights), _meta(ks), _meta(ke),
           k, outputs, _meta(state), algo)
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = _indexer_problem(q, kv, kv_scale, weights, ks, ke, k, indices, values)
        lib = library()
        P.enum_value(lib.IndexerAlgo, algo, "algo")
        if state is not None:
            P.check("state", _view(state), (None,), ("uint8",), device=device)
        if device < 0:
            # The reference needs no state (its result is the same).
            lib.indexer_topk_cpu(problem)
            return
        plan = _remember(key, _launch(device, _indexer_plan, problem, algo, state))
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


def _split_kv(kv):
    kv_fp8, kv_scale = kv
    if kv_scale.dim() == 2 and kv_scale.shape[1] == 1:  # [S, 1] as some engines keep it
        kv_scale = kv_scale.view(-1)
    return kv_fp8, kv_scale


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
    """What fp8_mqa_topk does on these CUDA inputs: {"algo": the path that runs (auto
    resolved), "workspace_bytes": its workspace (with `state`, an IndexerState or its buffer, it
    includes the hot-sample writer's)}."""
    kv_fp8, kv_scale = _split_kv(kv)
    buffer = state.buffer if isinstance(state, IndexerState) else state
    indices = torch.empty((q.shape[0], max(k, 0)), dtype=torch.int32, device=q.device)
    problem = _indexer_problem(q, kv_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k,
                               indices)
    if buffer is not None:
        P.check("state", _view(buffer), (None,), ("uint8",), device=q.get_device())
    with _on(q.get_device()):
        plan = _indexer_plan(problem, algo, buffer)
    return {"algo": plan.algo.name, "workspace_bytes": plan.workspace_bytes}


class IndexerState:
    """The per-layer hot sample carried between prefill chunks of one sequence: it owns a zeroed
    uint8 buffer of indexer_state_bytes(k) (torch's allocator). Pass it with the same k to every
    chunk of the sequence; reset() (graph-capturable) before a new sequence."""

    def __init__(self, k, device=None):
        self.k = int(k)
        self.buffer = torch.zeros(library().indexer_state_bytes(self.k), dtype=torch.uint8,
                                  device=device)

    def reset(self):
        self.buffer.zero_()
        return self

