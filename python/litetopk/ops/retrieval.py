"""torch.ops.litetopk.retrieval_topk and retrieval_topk_out, and litetopk.ops.retrieval_topk:
the exact top-k corpus rows of each query (brute-force nearest neighbours, inner product, cosine
or L2). CUDA tensors run the unfused GPU path (cuBLAS chunk by chunk, then select and merge);
CPU tensors the CPU reference."""
import torch

from .. import retrieval as R
from ._runtime import (_direct, _launch, _meta, _opt, _plan_of, _ptr, _register, _remember,
                       _stream, _view, _workspace, library)


def _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts, range_ends,
                       indices, scores, sorted_, deterministic):
    return R.retrieval_problem(_view(queries), _view(corpus), k, metric, _opt(corpus_norms),
                               _opt(range_starts), _opt(range_ends), _view(indices),
                               _opt(scores), sorted_, deterministic)


def _retrieval_plan(problem):
    lib = library()
    return lib.retrieval_topk_plan(problem, lib.RetrievalOptions())


def _retrieval_launch(plan, device, queries, corpus, corpus_norms, range_starts, range_ends,
                      indices, scores):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().retrieval_topk_launch(plan, queries.data_ptr(), corpus.data_ptr(),
                                    _ptr(corpus_norms), _ptr(range_starts), _ptr(range_ends),
                                    indices.data_ptr(), _ptr(scores), workspace, stream)


def _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, indices,
               scores, sorted_, deterministic, outputs):
    """retrieval_topk into indices/scores; `outputs` is their part of the signature ("new" for
    outputs _retrieval_fake made)."""
    device = queries.get_device()
    if device < 0:
        library().retrieval_topk_cpu(
            _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts,
                               range_ends, indices, scores, sorted_, deterministic), 0)
        return
    key = ("retrieval", _meta(queries), _meta(corpus), k, metric, _meta(corpus_norms),
           _meta(range_starts), _meta(range_ends), outputs, sorted_, deterministic)
    plan = _plan_of(key)
    if plan is None:
        problem = _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts,
                                     range_ends, indices, scores, sorted_, deterministic)
        plan = _remember(key, _launch(device, _retrieval_plan, problem))
    _launch(device, _retrieval_launch, plan, device, queries, corpus, corpus_norms, range_starts,
            range_ends, indices, scores)


def _retrieval_fake(queries, corpus, k, *args, **kwargs):
    shape = (queries.shape[0], max(k, 0))
    return (queries.new_empty(shape, dtype=torch.int32),
            queries.new_empty(shape, dtype=torch.float32))


def _retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                    range_ends=None, sorted=False, deterministic=False):
    indices, scores = _retrieval_fake(queries, corpus, k)
    _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, indices,
               scores, sorted, deterministic, "new")
    return indices, scores


def _retrieval_topk_out(queries, corpus, k, out_indices, out_scores=None, metric="ip",
                        corpus_norms=None, range_starts=None, range_ends=None, sorted=False,
                        deterministic=False):
    _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, out_indices,
               out_scores, sorted, deterministic, (_meta(out_indices), _meta(out_scores)))


_register("retrieval_topk(Tensor queries, Tensor corpus, int k, str metric=\"ip\", "
          "Tensor? corpus_norms=None, Tensor? range_starts=None, Tensor? range_ends=None, "
          "bool sorted=False, bool deterministic=False) -> (Tensor indices, Tensor scores)",
          _retrieval_topk, _retrieval_fake)
_register("retrieval_topk_out(Tensor queries, Tensor corpus, int k, Tensor(a!) out_indices, "
          "Tensor(b!)? out_scores=None, str metric=\"ip\", Tensor? corpus_norms=None, "
          "Tensor? range_starts=None, Tensor? range_ends=None, bool sorted=False, "
          "bool deterministic=False) -> ()",
          _retrieval_topk_out, lambda *args, **kwargs: None)


def retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                   range_ends=None, sorted=False, deterministic=False, out=None):
    """The exact top-k corpus rows of each query (torch.ops.litetopk.retrieval_topk): queries
    [B, d] and corpus [N, d] contiguous float16 or bfloat16 (d 64..1024, a multiple of 16);
    metric "ip", "cosine" (normalised rows) or "l2" (2 q.c - ||c||^2; corpus_norms [N] float32
    squared norms, computed when None); range_starts / range_ends [B] int32 or None. Returns
    (indices [B, k] int32 corpus rows, -1 padded; scores [B, k] float32, NaN padded); sorted: best
    first, ties by smaller row; deterministic: ties at the k-th score to the smallest rows.
    out=(indices, scores or None) writes there (retrieval_topk_out) and returns out."""
    direct = _direct(queries, corpus, corpus_norms, range_starts, range_ends, *(out or ()))
    if out is None:
        op = _retrieval_topk if direct else torch.ops.litetopk.retrieval_topk
        return op(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, sorted,
                  deterministic)
    op = _retrieval_topk_out if direct else torch.ops.litetopk.retrieval_topk_out
    op(queries, corpus, k, out[0], out[1], metric, corpus_norms, range_starts, range_ends,
       sorted, deterministic)
    return out
