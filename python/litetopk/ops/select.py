"""torch.ops.litetopk.topk and topk_out, and litetopk.ops.topk: exact top-k of each row of a
score matrix in memory (vLLM's top-k-per-row layout)."""
import torch

from .. import _problems as P
from ._runtime import (_direct, _launch, _meta, _on, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


def _select_problem(scores, k, indices, values, row_starts, row_ends, largest, sorted_,
                    deterministic):
    return P.select_problem(_view(scores), k, _opt(row_starts), _opt(row_ends), _view(indices),
                            _opt(values), largest, sorted_, deterministic)


def _select_plan(problem, algo):
    """The library's SelectPlan of one CUDA signature: validated, the algorithm resolved (auto on
    the current device), the workspace sized."""
    lib = library()
    options = lib.SelectOptions()
    options.algo = P.enum_value(lib.SelectAlgo, algo, "algo")
    return lib.select_topk_plan(problem, options)


def _select_launch(plan, device, scores, indices, values, row_starts, row_ends):
    stream = _stream(device)
    size = plan.workspace_bytes
    workspace, owner = _workspace(size, device, stream)
    library().select_topk_launch(plan, scores.data_ptr(), _ptr(row_starts), _ptr(row_ends),
                                 indices.data_ptr(), _ptr(values), workspace, stream)


def _select(scores, k, indices, values, row_starts, row_ends, largest, sorted_, deterministic,
            algo, outputs):
    """select_topk into indices/values; `outputs` is their part of the signature ("new" for
    outputs _topk_fake made)."""
    device = scores.get_device()
    if device < 0:
        problem = _select_problem(scores, k, indices, values, row_starts, row_ends, largest,
                                  sorted_, deterministic)
        lib = library()
        P.enum_value(lib.SelectAlgo, algo, "algo")
        # The CPU backend's fast path whatever algo names.
        lib.select_topk_cpu(problem, lib.CpuSelectAlgo.fast, 0)
        return
    key = ("select", _meta(scores), _meta(row_starts), _meta(row_ends), outputs, k, largest,
           sorted_, deterministic, algo)
    plan = _plan_of(key)
    if plan is None:
        problem = _select_problem(scores, k, indices, values, row_starts, row_ends, largest,
                                  sorted_, deterministic)
        plan = _remember(key, _launch(device, _select_plan, problem, algo))
    _launch(device, _select_launch, plan, device, scores, indices, values, row_starts, row_ends)


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


def topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
         deterministic=False, out=None, algo="auto"):
    """Exact top-k per row (torch.ops.litetopk.topk). With out=(indices, values or None) it writes
    there (topk_out) and returns out. algo: "auto", "radix", "sample-filter", "grid-radix", "sieve",
    "cluster" or "register" (GPU)."""
    op = (_topk, _topk_out) if _direct(scores, row_starts, row_ends, *(out or ())) else (
        torch.ops.litetopk.topk, torch.ops.litetopk.topk_out)
    if out is None:
        return op[0](scores, k, row_starts, row_ends, largest, sorted, deterministic, algo)
    op[1](scores, k, out[0], out[1], row_starts, row_ends, largest, sorted, deterministic, algo)
    return out


def topk_plan(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
              deterministic=False, algo="auto"):
    """What topk does on these CUDA inputs: {"algo": the algorithm that runs (auto resolved),
    "workspace_bytes": its workspace}."""
    indices = torch.empty((scores.shape[0], max(k, 0)), dtype=torch.int32, device=scores.device)
    problem = _select_problem(scores, k, indices, None, row_starts, row_ends, largest, sorted,
                              deterministic)
    with _on(scores.get_device()):
        plan = _select_plan(problem, algo)
    return {"algo": plan.algo.name, "workspace_bytes": plan.workspace_bytes}
