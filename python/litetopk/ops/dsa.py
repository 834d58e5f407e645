"""torch.ops.litetopk.dsa_prefill and dsa_prefill_out, and litetopk.ops.dsa_prefill: one DSA
layer (include/litetopk/dsa.h), the lightning indexer's top-k then sparse MLA attention over it,
in one launch sequence with no host round trip (graph-capturable)."""
import torch

from .. import _problems as P
from ._runtime import (_direct, _launch, _meta, _opt, _plan_of, _ptr, _register, _remember,
                       _stream, _view, _workspace, library)
from .indexer import IndexerState, _split_kv, _state_args


def _prefixed(half, check, *args, **kwargs):
    """check(*args) with its ValueError naming the half of the layer it is about."""
    try:
        return check(*args, **kwargs)
    except ValueError as e:
        raise ValueError(f"dsa_prefill {half}: {e}") from None


def _dsa_problem(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv, sm_scale,
                 out, max_logits, lse, indices):
    """The extension's DsaPrefillProblem over these tensors (each half's Python checks first,
    its messages naming the half)."""
    if (index_q.dim() == 3 and index_kv.dim() == 2 and q.dim() == 3 and kv.dim() == 3
            and (q.shape[0] != index_q.shape[0] or kv.shape[0] != index_kv.shape[0])):
        raise ValueError(f"q and kv must be [T = {index_q.shape[0]}, h_q, d_qk] and "
                         f"[S = {index_kv.shape[0]}, 1, d_qk] like the indexer's inputs, got "
                         f"{tuple(q.shape)} and {tuple(kv.shape)}")
    half = _prefixed("indexer", P.indexer_args, _view(index_q), _view(index_kv),
                     _view(index_kv_scale), _view(index_weights), _view(ks), _view(ke), k,
                     _opt(indices))
    if q.get_device() != index_q.get_device():
        raise ValueError(f"q must be on {P.device_name(index_q.get_device())} like index_q, got "
                         f"{P.device_name(q.get_device())}")
    # The attention reads the call's own kv rows [T, k]: a view of that shape stands for them.
    rows = (0, (half.num_queries, max(k, 0)), (max(k, 0), 1), "int32", index_q.get_device(),
            True)
    attention = _prefixed("attention", P.sparse_attention_args, _view(q), _view(kv), rows,
                          sm_scale, _view(out), _opt(max_logits), _opt(lse))
    problem = library().DsaPrefillProblem()
    problem.index_q, problem.index_kv = half.q, half.kv
    problem.index_kv_scale, problem.index_weights = half.kv_scale, half.weights
    problem.ks, problem.ke, problem.indices = half.ks, half.ke, half.indices
    problem.num_queries, problem.num_keys, problem.k = half.num_queries, half.num_keys, k
    problem.index_heads, problem.index_head_dim = half.num_heads, half.head_dim
    problem.q, problem.kv, problem.h_q, problem.d_qk = (attention.q, attention.kv, attention.h_q,
                                                        attention.d_qk)
    problem.d_v, problem.sm_scale = attention.d_v, attention.sm_scale
    problem.out, problem.max_logits, problem.lse = (attention.out, attention.max_logits,
                                                    attention.lse)
    return problem


def _dsa_plan(problem, indexer_algo, attention_algo, state):
    """The library's DsaPrefillPlan of one CUDA signature (both halves' algorithms resolved, the
    workspace of both and, with a state, the indexer's hot-sample writer)."""
    lib = library()
    return lib.dsa_prefill_plan(problem, P.enum_value(lib.IndexerAlgo, indexer_algo,
                                                      "indexer_algo"),
                                P.enum_value(lib.SparseAttentionAlgo, attention_algo,
                                             "attention_algo"), *_state_args(state))


def _dsa_launch(plan, device, inputs, out, max_logits, lse, indices, state):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().dsa_prefill_launch(plan, *(t.data_ptr() for t in inputs), out.data_ptr(),
                                 _ptr(max_logits), _ptr(lse), _ptr(indices), *_state_args(state),
                                 workspace, stream)


def _dsa_select(inputs, k, sm_scale, out, max_logits, lse, indices, state, indexer_algo,
                attention_algo, outputs):
    """dsa_prefill into out (max_logits, lse, indices); `inputs` are (index_q, index_kv,
    index_kv_scale, index_weights, ks, ke, q, kv) and `outputs` their part of the signature
    ("new" for outputs _dsa_prefill_fake made). A CUDA signature is planned once; each call
    passes the addresses. CPU tensors run the references (the algorithm names are checked all the
    same)."""
    device = inputs[0].get_device()
    key = ("dsa_prefill", tuple(_meta(t) for t in inputs), k, float(sm_scale), outputs,
           _meta(state), indexer_algo, attention_algo)
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        index_q, index_kv, index_kv_scale, index_weights, ks, ke, q, kv = inputs
        problem = _dsa_problem(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv,
                               sm_scale, out, max_logits, lse, indices)
        lib = library()
        P.enum_value(lib.IndexerAlgo, indexer_algo, "indexer_algo")
        P.enum_value(lib.SparseAttentionAlgo, attention_algo, "attention_algo")
        if state is not None:
            P.check("state", _view(state), (None,), ("uint8",), device=device)
        if device < 0:
            # The references need no state (their result is the same).
            lib.dsa_prefill_cpu(problem)
            return
        plan = _remember(key, _launch(device, _dsa_plan, problem, indexer_algo, attention_algo,
                                      state))
    _launch(device, _dsa_launch, plan, device, inputs, out, max_logits, lse, indices, state)


def _dsa_prefill_out(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv,
                     sm_scale, out, max_logits=None, lse=None, indices=None, state=None,
                     indexer_algo="auto", attention_algo="auto"):
    _dsa_select((index_q, index_kv, index_kv_scale, index_weights, ks, ke, q, kv), k, sm_scale,
                out, max_logits, lse, indices, state, indexer_algo, attention_algo,
                (_meta(out), _meta(max_logits), _meta(lse), _meta(indices)))


def _dsa_prefill_fake(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv,
                      sm_scale, d_v=P.SPARSE_ATTENTION_D_V, *args, **kwargs):
    if d_v != P.SPARSE_ATTENTION_D_V:
        raise ValueError(f"d_v must be {P.SPARSE_ATTENTION_D_V}, got {d_v}")
    if q.dim() != 3:
        raise ValueError(f"q must be a 3-D array [T, h_q, d_qk], got shape {tuple(q.shape)}")
    T, h_q = q.shape[0], q.shape[1]
    return (q.new_empty((T, h_q, d_v), dtype=torch.bfloat16),
            q.new_empty((T, h_q), dtype=torch.float32),
            q.new_empty((T, h_q), dtype=torch.float32),
            q.new_empty((T, max(k, 0)), dtype=torch.int32))


def _dsa_prefill(index_q, index_kv, index_kv_scale, index_weights, ks, ke, k, q, kv, sm_scale,
                 d_v=P.SPARSE_ATTENTION_D_V, state=None, indexer_algo="auto",
                 attention_algo="auto"):
    out, max_logits, lse, indices = _dsa_prefill_fake(index_q, index_kv, index_kv_scale,
                                                      index_weights, ks, ke, k, q, kv, sm_scale,
                                                      d_v)
    _dsa_select((index_q, index_kv, index_kv_scale, index_weights, ks, ke, q, kv), k, sm_scale,
                out, max_logits, lse, indices, state, indexer_algo, attention_algo, ("new", d_v))
    return out, max_logits, lse, indices


_DSA_ARGS = ("Tensor index_q, Tensor index_kv, Tensor index_kv_scale, Tensor index_weights, "
             "Tensor ks, Tensor ke, int k, Tensor q, Tensor kv, float sm_scale")
_register(f"dsa_prefill({_DSA_ARGS}, int d_v=512, Tensor(a!)? state=None, "
          "str indexer_algo=\"auto\", str attention_algo=\"auto\") "
          "-> (Tensor out, Tensor max_logits, Tensor lse, Tensor indices)",
          _dsa_prefill, _dsa_prefill_fake)
_register(f"dsa_prefill_out({_DSA_ARGS}, Tensor(a!) out, Tensor(b!)? max_logits=None, "
          "Tensor(c!)? lse=None, Tensor(d!)? indices=None, Tensor(e!)? state=None, "
          "str indexer_algo=\"auto\", str attention_algo=\"auto\") -> ()",
          _dsa_prefill_out, lambda *args, **kwargs: None)


def dsa_prefill(index_q, index_kv, index_weights, ks, ke, k, q, kv, sm_scale, d_v=512,
                state=None, indexer_algo="auto", attention_algo="auto", out=None):
    """One DSA layer on a prefill chunk: the lightning indexer picks each query's k keys (exact
    top-k of its scores over [ks[t], ke[t])), then MLA attention over those kv rows (indexer key s
    is kv row s). The indexer's inputs in DeepGEMM's layout: index_q [T, H, D] fp8 e4m3,
    index_kv = (kv_fp8 [S, D], kv_scale [S] fp32), index_weights [T, H] fp32, ks and ke [T]
    int32; the attention's in FlashMLA's: q [T, h_q, d_qk] bf16, kv [S, 1, d_qk] bf16. Returns
    (out [T, h_q, d_v] bf16, max_logits [T, h_q], lse [T, h_q] fp32 in base 2 as
    sparse_attention, indices [T, k] int32: the kv rows each query attended, ks[t] added, -1
    padded). state: an IndexerState (or its buffer) carried between chunks. out=(out, max_logits
    or None, lse or None, indices or None) writes there and returns it. CUDA tensors run on the
    current stream, graph-capturable; CPU tensors run the references."""
    kv_fp8, kv_scale = _split_kv(index_kv)
    buffer = state.buffer if isinstance(state, IndexerState) else state
    args = (index_q, kv_fp8, kv_scale, index_weights, ks, ke, int(k), q, kv, float(sm_scale))
    direct = _direct(index_q, kv_fp8, q, kv, buffer, *(out or ()))
    if out is None:
        op = _dsa_prefill if direct else torch.ops.litetopk.dsa_prefill
        return op(*args, int(d_v), buffer, indexer_algo, attention_algo)
    if len(out) != 4:
        raise ValueError(f"out must be (out, max_logits or None, lse or None, indices or None), "
                         f"got {len(out)} items")
    op = _dsa_prefill_out if direct else torch.ops.litetopk.dsa_prefill_out
    op(*args, *out, buffer, indexer_algo, attention_algo)
    return out
