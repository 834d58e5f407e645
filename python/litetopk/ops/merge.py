"""torch.ops.litetopk.merge_topk and merge_topk_out, and litetopk.ops.merge_topk: the exact
global top-k of per-shard top-k lists (values and global indices), e.g. the all-gathered local
top-k of each rank of a context-parallel group (litetopk.distributed)."""
import torch

from .. import merge as M
from ._runtime import (_direct, _launch, _meta, _opt, _plan_of, _ptr, _register, _remember,
                       _stream, _view, _workspace, library)


def _merge_problem(values, indices, counts, out_indices, out_values, k, largest, sorted_,
                   deterministic):
    return M.merge_problem(_view(values), _view(indices), _opt(counts), _view(out_indices),
                           _opt(out_values), k, largest, sorted_, deterministic)


def _merge_launch(plan, device, values, indices, counts, out_indices, out_values):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().merge_topk_launch(plan, values.data_ptr(), indices.data_ptr(), _ptr(counts),
                                out_indices.data_ptr(), _ptr(out_values), workspace, stream)


def _merge(values, indices, k, counts, out_indices, out_values, largest, sorted_,
           deterministic, outputs):
    """merge_topk into out_indices/out_values; `outputs` is their part of the signature ("new"
    for outputs _merge_fake made)."""
    device = values.get_device()
    if device < 0:
        library().merge_topk_cpu(_merge_problem(values, indices, counts, out_indices,
                                                out_values, k, largest, sorted_, deterministic))
        return
    key = ("merge", _meta(values), _meta(indices), _meta(counts), outputs, k, largest, sorted_,
           deterministic)
    plan = _plan_of(key)
    if plan is None:
        problem = _merge_problem(values, indices, counts, out_indices, out_values, k, largest,
                                 sorted_, deterministic)
        plan = _remember(key, _launch(device, library().merge_topk_plan, problem))
    _launch(device, _merge_launch, plan, device, values, indices, counts, out_indices,
            out_values)


def _merge_fake(values, indices, k, *args, **kwargs):
    shape = (values.shape[0], max(k, 0))
    return (values.new_empty(shape, dtype=torch.int32), values.new_empty(shape))


def _merge_topk(values, indices, k, counts=None, largest=True, sorted=False,
                deterministic=False):
    out_indices, out_values = _merge_fake(values, indices, k)
    _merge(values, indices, k, counts, out_indices, out_values, largest, sorted, deterministic,
           "new")
    return out_indices, out_values


def _merge_topk_out(values, indices, k, out_indices, out_values=None, counts=None,
                    largest=True, sorted=False, deterministic=False):
    _merge(values, indices, k, counts, out_indices, out_values, largest, sorted, deterministic,
           (_meta(out_indices), _meta(out_values)))


_register("merge_topk(Tensor values, Tensor indices, int k, Tensor? counts=None, "
          "bool largest=True, bool sorted=False, bool deterministic=False) "
          "-> (Tensor indices, Tensor values)", _merge_topk, _merge_fake)
_register("merge_topk_out(Tensor values, Tensor indices, int k, Tensor(a!) out_indices, "
          "Tensor(b!)? out_values=None, Tensor? counts=None, bool largest=True, "
          "bool sorted=False, bool deterministic=False) -> ()",
          _merge_topk_out, lambda *args, **kwargs: None)


def merge_topk(values, indices, k, counts=None, largest=True, sorted=False, deterministic=False,
               out=None):
    """The exact top-k of the union of each row's shard lists (torch.ops.litetopk.merge_topk):
    values [B, S, k_in] float32 and indices [B, S, k_in] int32 global indices (-1: empty) with
    the same strides, unit stride along k_in (an all-gather result [S, B, k_in] passes as
    x.permute(1, 0, 2)); counts [B, S] int32 or None. Returns (indices [B, k] int32, -1 padded;
    values [B, k] float32, NaN padded); ties go to the smallest global indices; sorted: best
    first. out=(indices, values or None) writes there (merge_topk_out) and returns out."""
    direct = _direct(values, indices, counts, *(out or ()))
    if out is None:
        op = _merge_topk if direct else torch.ops.litetopk.merge_topk
        return op(values, indices, k, counts, largest, sorted, deterministic)
    op = _merge_topk_out if direct else torch.ops.litetopk.merge_topk_out
    op(values, indices, k, out[0], out[1], counts, largest, sorted, deterministic)
    return out
