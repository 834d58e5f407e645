"""merge_topk: the exact global top-k of per-shard top-k lists (include/litetopk/merge.h).

`merge_problem` checks array views (litetopk._problems' form) and builds the extension's
MergeProblem, for the torch ops (litetopk.ops.merge) and for `merge_topk` below, which runs the
CPU backend on numpy arrays (no torch needed).

Layout: values [B, S, k_in] float32 and indices [B, S, k_in] int32 (global indices, -1 for an
empty slot) with the same strides and a unit stride along k_in; the all-gather result
[S, B, k_in] of torch.distributed is passed as its permuted view (x.permute(1, 0, 2)), whose
strides the library reads. counts [B, S] int32 (contiguous, optional): the non-empty prefix of
each list.
"""
import numpy as np

from . import _problems as P
from ._ext import ext


def merge_shapes(values):
    """(B, S, k_in) of values [B, S, k_in]."""
    if values is None or len(values[1]) != 3:
        P._fail("values", "a 3-D array [batch, shards, k_in]", values)
    return tuple(values[1])


def merge_problem(values, indices, counts, out_indices, out_values, k, largest, sorted_,
                  deterministic):
    """The extension's MergeProblem (litetopk::MergeProblem) for these array views."""
    B, S, k_in = merge_shapes(values)
    device = values[4]
    P.check("values", values, dtypes=("float32",), contiguous=False)
    P.check("indices", indices, (B, S, k_in), ("int32",), contiguous=False, device=device)
    row_stride, shard_stride, slot_stride = values[2]
    if slot_stride != 1 and k_in > 1:
        raise ValueError(f"values must have unit stride along k_in, got strides {values[2]}")
    if tuple(indices[2]) != tuple(values[2]):
        raise ValueError(f"indices must have the strides of values {tuple(values[2])}, got "
                         f"{tuple(indices[2])}")
    if counts is not None:
        P.check("counts", counts, (B, S), ("int32",), device=device)
    P.check("out_indices", out_indices, (B, max(k, 0)), ("int32",), device=device)
    if out_values is not None:
        P.check("out_values", out_values, (B, max(k, 0)), ("float32",), device=device)
    problem = ext().MergeProblem()
    problem.values, problem.indices, problem.counts = values[0], indices[0], P.address(counts)
    problem.batch, problem.shards, problem.k_in, problem.k = B, S, k_in, k
    # A stride along an extent of 1 is never used: the library's default stands in for it.
    problem.row_stride = row_stride if B > 1 else 0
    problem.shard_stride = shard_stride if S > 1 else 0
    problem.out_indices, problem.out_values = out_indices[0], P.address(out_values)
    problem.largest, problem.sorted, problem.deterministic = largest, sorted_, deterministic
    return problem


def merge_topk(values, indices, k, counts=None, largest=True, sorted=False, deterministic=False):
    """The exact top-k of the union of each row's shard lists, on the CPU: values [B, S, k_in]
    (float32), indices [B, S, k_in] (integers: global indices, -1 for an empty slot), counts
    [B, S] (integers, optional). A candidate with index -1 (any negative index), a NaN value or a
    slot at or past its list's count is never selected. Returns (indices [B, k] int32 global
    indices, -1 padded; values [B, k] float32, NaN padded), sorted best first; ties go to the
    smallest global indices."""
    from .cpu import _array, _flag, _int32, _integer, _opt, _topk_outputs, _view

    values = np.ascontiguousarray(_array(values, "values", np.float32))
    indices = _int32(indices, "indices")
    k = _integer(k, "k")
    largest = _flag(largest, "largest")
    sorted_ = _flag(sorted, "sorted")
    deterministic = _flag(deterministic, "deterministic")
    counts = _int32(counts, "counts", required=False)
    if values.ndim != 3:
        raise ValueError(f"values must be a 3-D array [batch, shards, k_in], got shape "
                         f"{values.shape}")
    B, S, k_in = values.shape
    out_indices, out_values = _topk_outputs("merge_topk", B, S * k_in, k, np.float32)
    problem = merge_problem(_view(values, "values"), _view(indices, "indices"),
                            _opt(counts, "counts"), _view(out_indices), _view(out_values), k,
                            largest, sorted_, deterministic)
    ext().merge_topk_cpu(problem)
    return out_indices, out_values
