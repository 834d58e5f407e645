"""torch.ops.litetopk.sparse_attention and sparse_attention_out, and
litetopk.ops.sparse_attention."""
import torch

from .. import _problems as P
from ._runtime import (_direct, _launch, _meta, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


def _sparse_attention_problem(q, kv, indices, sm_scale, out, max_logits, lse, algo):
    return P.sparse_attention_args(_view(q), _view(kv), _view(indices), sm_scale, _view(out),
                                   _opt(max_logits), _opt(lse), algo=algo)


def _sparse_attention_launch(plan, device, q, kv, indices, out, max_logits, lse):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().sparse_attention_launch(plan, q.data_ptr(), kv.data_ptr(), indices.data_ptr(),
                                      out.data_ptr(), _ptr(max_logits), _ptr(lse), workspace,
                                      stream)


def _sparse_attention_select(q, kv, indices, sm_scale, out, max_logits, lse, algo, outputs):
    """sparse_attention into out (max_logits, lse); `outputs` is their part of the signature
    ("new" for outputs _sparse_attention_fake made). A CUDA signature is planned once (the Python
    checks, the library's shape checks, the algorithm and the workspace); each call passes the
    addresses, which the launch checks. CPU tensors run the reference whatever algo names (the
    name is still checked, and union-packed only where it applies, as on the GPU)."""
    device = q.get_device()
    key = ("sparse_attention", _meta(q), _meta(kv), _meta(indices), float(sm_scale), outputs,
           algo)
    plan = None if device < 0 else _plan_of(key)
    if plan is None:
        problem = _sparse_attention_problem(q, kv, indices, sm_scale, out, max_logits, lse, algo)
        lib = library()
        if device < 0:
            lib.sparse_attention_cpu(problem)
            return
        plan = _remember(key, _launch(device, lib.sparse_attention_plan, problem))
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


LN2 = 0.6931471805599453


def natural_log_stats(max_logits, lse):
    """max_logits and lse from base 2 to natural-log units, the current FlashMLA's convention:
    times ln(2), and +inf lse (not -inf) for a query with nothing to attend, so that an engine
    merging attention states gives it no weight. New tensors (either may be None)."""
    if max_logits is not None:
        max_logits = max_logits * LN2
    if lse is not None:
        lse = torch.where(lse == float("-inf"), float("inf"), lse * LN2)
    return max_logits, lse


def sparse_attention(q, kv, indices, sm_scale, d_v=512, out=None, algo="auto",
                     natural_log=False):
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
    where it applies). natural_log=True returns max_logits and lse in the current FlashMLA's
    convention instead (natural_log_stats: natural-log units, +inf lse for an empty query)."""
    direct = _direct(q, kv, indices, *(out or ()))
    if out is None:
        op = _sparse_attention if direct else torch.ops.litetopk.sparse_attention
        result = op(q, kv, indices, float(sm_scale), int(d_v), algo)
        if natural_log:
            return (result[0],) + natural_log_stats(result[1], result[2])
        return result
    if len(out) != 3:
        raise ValueError(f"out must be (out, max_logits or None, lse or None), got {len(out)} "
                         "items")
    if out[0] is not None and out[0].dim() == 3 and out[0].shape[2] != d_v:
        raise ValueError(f"out must be of shape [s_q, h_q, d_v = {d_v}], got shape "
                         f"{tuple(out[0].shape)}")
    op = _sparse_attention_out if direct else torch.ops.litetopk.sparse_attention_out
    op(q, kv, indices, float(sm_scale), *out, algo)
    if natural_log:
        for target, converted in zip(out[1:], natural_log_stats(out[1], out[2])):
            if target is not None:
                target.copy_(converted)
    return out

