"""The decode indexer ops over a paged cache: torch.ops.litetopk.fp8_paged_mqa_logits and
fp8_paged_mqa_topk (with _out variants), litetopk.ops.fp8_paged_mqa_topk and its plan, and
paged_indexer_state (the decode state that carries each row's top-k to the next step)."""
import torch

from .. import _problems as P
from ._runtime import (_direct, _launch, _meta, _on, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


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


def _paged_logits_launch(plan, device, q, kv_cache, weights, context_lens, block_table, logits):
    sizes, stride = plan
    problem = library().PagedIndexerProblem(sizes)
    problem.q, problem.kv_cache = q.data_ptr(), kv_cache.data_ptr()
    problem.weights = weights.data_ptr()
    problem.context_lens, problem.block_table = context_lens.data_ptr(), block_table.data_ptr()
    library().indexer_logits_paged(problem, logits.data_ptr(), stride, _stream(device))


def _paged_logits_out(q, kv_cache, weights, context_lens, block_table, max_context_len, logits):
    device = q.get_device()
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    key = ("paged_logits", _meta(q), _meta(kv_cache), _meta(weights), _meta(context_lens),
           _meta(block_table), max_context_len, _meta(logits))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                                 max_context_len, 1)
        rows = problem.batch * problem.next_n
        stride = P.logits_stride(_view(logits), rows, problem.max_context, device)
        if device < 0:
            library().indexer_logits_paged_cpu(problem, logits.data_ptr(), stride)
            return
        plan = _remember(key, (problem, stride))
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


def _state_bytes(state):
    return 0 if state is None else state.numel() * state.element_size()


def _paged_plan(problem, algo, state=None):
    """The library's PagedIndexerPlan of one CUDA signature: validated, "auto" resolved, the
    workspace sized by max_context_len (never by context_lens); with a decode state, its size
    checked."""
    lib = library()
    return lib.indexer_topk_paged_plan(problem, P.enum_value(lib.IndexerAlgo, algo, "algo"),
                                       _ptr(state), _state_bytes(state))


def _paged_launch(plan, device, q, kv_cache, weights, context_lens, block_table, indices,
                  values, state):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().indexer_topk_paged_launch(plan, q.data_ptr(), kv_cache.data_ptr(),
                                        weights.data_ptr(), context_lens.data_ptr(),
                                        block_table.data_ptr(), indices.data_ptr(), _ptr(values),
                                        workspace, stream, _ptr(state), _state_bytes(state))


def _check_state(state, device):
    if state is None:
        return
    if state.dtype != torch.int32 or not state.is_contiguous():
        raise ValueError(f"state must be a contiguous int32 tensor (paged_indexer_state), got "
                         f"{state.dtype}{'' if state.is_contiguous() else ', not contiguous'}")
    if state.get_device() != device:
        raise ValueError(f"state must be on the device of q ({device}), got {state.device}")


def _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, outputs, state=None):
    """indexer_topk_paged into indices/values; `outputs` is their part of the signature ("new"
    for outputs _paged_topk_fake made). state: the decode state (CUDA only; the CPU reference
    has no use for it and leaves it alone)."""
    device = q.get_device()
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    key = ("paged", _meta(q), _meta(kv_cache), _meta(weights), _meta(context_lens),
           _meta(block_table), max_context_len, k, outputs, algo, _meta(state))
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                                 max_context_len, k, indices, values)
        lib = library()
        P.enum_value(lib.IndexerAlgo, algo, "algo")
        _check_state(state, device)
        if device < 0:
            lib.indexer_topk_paged_cpu(problem)  # the reference, whatever algo says
            return
        plan = _remember(key, _launch(device, _paged_plan, problem, algo, state))
    _launch(device, _paged_launch, plan, device, q, kv_cache, weights, context_lens, block_table,
            indices, values, state)


def _paged_topk_out(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                    indices, values=None, algo="auto", state=None):
    _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, (_meta(indices), _meta(values)), state)


def _paged_topk_fake(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                     *args, **kwargs):
    rows = q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]
    shape = (rows, max(k, 0))
    return (q.new_empty(shape, dtype=torch.int32), q.new_empty(shape, dtype=torch.float32))


def _paged_topk(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                algo="auto", state=None):
    indices, values = _paged_topk_fake(q, kv_cache, weights, context_lens, block_table,
                                       max_context_len, k)
    _paged_select(q, kv_cache, weights, context_lens, block_table, max_context_len, k, indices,
                  values, algo, "new", state)
    return indices, values


_register(f"fp8_paged_mqa_topk({_PAGED_ARGS}, int k, str algo=\"auto\", "
          "Tensor(c!)? state=None) -> (Tensor indices, Tensor values)", _paged_topk,
          _paged_topk_fake)
_register(f"fp8_paged_mqa_topk_out({_PAGED_ARGS}, int k, Tensor(a!) indices, "
          "Tensor(b!)? values=None, str algo=\"auto\", Tensor(c!)? state=None) -> ()",
          _paged_topk_out, lambda *args, **kwargs: None)


def paged_indexer_state(batch, next_n, k, device="cuda"):
    """A zeroed decode state for fp8_paged_mqa_topk(..., state=...): [batch * next_n, k] int32
    (the library's paged_indexer_state_bytes), one per layer, kept across decode steps. Each
    call with it writes the step's top-k positions there, and the next step's fused path gates
    its scores with them re-scored; any content (zeros, another request's history) still gives
    the exact top-k."""
    if batch < 0 or next_n < 1 or k < 1:
        raise ValueError(f"batch must be >= 0, next_n >= 1 and k >= 1, got {batch}, {next_n}, "
                         f"{k}")
    return torch.zeros((batch * next_n, k), dtype=torch.int32, device=device)


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


def fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, *args, algo="auto",
                       out=None, state=None, **kwargs):
    """fp8_paged_mqa_logits fused with exact top-k: (indices [B * next_n, k] int32 token
    positions, -1 padded; values [B * next_n, k] fp32). Arguments as fp8_paged_mqa_logits plus
    k after max_context_len:

        fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, max_context_len, k)

    (DeepGEMM's schedule_meta may stay before max_context_len; it is ignored). A token of an
    out-of-range block-table entry is never selected; a row with fewer than k tokens is -1
    padded. The workspace is sized by max_context_len, never by context_lens (a device tensor,
    never read on the host): one CUDA graph captured at a max_context_len serves every step whose
    contexts fit in it. algo: "auto" (fused without a state at next_n 1 for one request of up to
    256K tokens or up to 16 requests of up to 2M tokens in all, else unfused), "unfused" (logits
    into the workspace, then select) or "fused" (the scores stay on chip; with state, the
    previous step's top-k gates them); CPU tensors run the reference whatever algo says.
    out=(indices, values or None) writes there.
    state: paged_indexer_state(B, next_n, k), carried from step to step (read, then rewritten
    with this step's positions, by algo "fused"; "auto" runs unfused, which leaves it alone)."""
    tail = _paged_tail(args, kwargs, ("max_context_len", "k"))
    max_context, k = int(tail["max_context_len"]), int(tail["k"])
    q = _paged_q(q)
    direct = _direct(q, kv_cache, state, *(out or ()))
    if out is None:
        op = _paged_topk if direct else torch.ops.litetopk.fp8_paged_mqa_topk
        return op(q, kv_cache, weights, context_lens, block_table, max_context, k, algo, state)
    op = _paged_topk_out if direct else torch.ops.litetopk.fp8_paged_mqa_topk_out
    op(q, kv_cache, weights, context_lens, block_table, max_context, k, out[0], out[1], algo,
       state)
    return out


def fp8_paged_mqa_topk_plan(q, kv_cache, weights, context_lens, block_table, max_context_len, k,
                            algo="auto", state=None):
    """What fp8_paged_mqa_topk does on these CUDA inputs: {"algo": the path that runs (auto
    resolved), "workspace_bytes": its workspace, "has_state": whether a state gates it}."""
    q = _paged_q(q)
    context_lens = _paged_context_lens(context_lens, q.shape[1] if q.dim() == 4 else 1)
    rows = q.shape[0] * q.shape[1] if q.dim() == 4 else q.shape[0]
    indices = torch.empty((rows, max(k, 0)), dtype=torch.int32, device=q.device)
    problem = _paged_problem(q, kv_cache, weights, context_lens, block_table,
                             int(max_context_len), int(k), indices)
    _check_state(state, q.get_device())
    with _on(q.get_device()):
        plan = _paged_plan(problem, algo, state)
    return {"algo": plan.algo.name, "workspace_bytes": plan.workspace_bytes,
            "has_state": plan.has_state}

