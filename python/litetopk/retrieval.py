"""retrieval_topk: exact top-k nearest neighbours of queries over a corpus
(include/litetopk/retrieval.h).

`retrieval_problem` checks array views (litetopk._problems' form) and builds the extension's
RetrievalProblem, for the torch ops (litetopk.ops.retrieval) and for `retrieval_topk` below, which
runs the CPU reference on numpy arrays (no torch needed).

Layout: queries [B, d] and corpus [N, d], contiguous, both float16 or both bfloat16, d from 64 to
1024 in multiples of 16; metric "ip", "cosine" (normalised rows: the inner product) or "l2"
(score 2 q.c - ||c||^2, with corpus_norms [N] float32 squared norms or None); range_starts /
range_ends [B] int32 (optional) restrict query b to corpus rows [start, end).
"""
import numpy as np

from . import _problems as P
from ._ext import ext

RETRIEVAL_DTYPES = ("float16", "bfloat16")


def retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts, range_ends,
                      indices, scores, sorted_, deterministic):
    """The extension's RetrievalProblem (litetopk::RetrievalProblem) for these array views."""
    if queries is None or len(queries[1]) != 2:
        P._fail("queries", "a 2-D array [batch, dim]", queries)
    B, d = queries[1]
    device = queries[4]
    P.check("queries", queries, dtypes=RETRIEVAL_DTYPES)
    P.check("corpus", corpus, (None, d), (queries[3],), device=device)
    N = corpus[1][0]
    if corpus_norms is not None:
        P.check("corpus_norms", corpus_norms, (N,), ("float32",), device=device)
    if range_starts is not None:
        P.check("range_starts", range_starts, (B,), ("int32",), device=device)
    if range_ends is not None:
        P.check("range_ends", range_ends, (B,), ("int32",), device=device)
    P.check("indices", indices, (B, max(k, 0)), ("int32",), device=device)
    if scores is not None:
        P.check("scores", scores, (B, max(k, 0)), ("float32",), device=device)
    lib = ext()
    problem = lib.RetrievalProblem()
    problem.queries, problem.corpus = queries[0], corpus[0]
    problem.dtype = P.enum_value(lib.DType, queries[3], "dtype")
    problem.batch, problem.n, problem.dim, problem.k = B, N, d, k
    problem.metric = P.enum_value(lib.RetrievalMetric, metric, "metric")
    problem.corpus_norms = P.address(corpus_norms)
    problem.range_starts, problem.range_ends = P.address(range_starts), P.address(range_ends)
    problem.indices, problem.scores = indices[0], P.address(scores)
    problem.sorted, problem.deterministic = sorted_, deterministic
    return problem


def retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                   range_ends=None, num_threads=0):
    """The exact top-k corpus rows of each query on the CPU (fp64 dot products rounded to fp32):
    queries [B, d] and corpus [N, d] as float16 or ml_dtypes.bfloat16 arrays. Returns (indices
    [B, k] int32 corpus rows, -1 padded; scores [B, k] float32, NaN padded), sorted best first,
    ties to the smallest row."""
    from .cpu import _aligned, _array, _int32, _integer, _opt, _topk_outputs, _view

    queries = _aligned(np.ascontiguousarray(_array(queries, "queries")))
    corpus = _aligned(np.ascontiguousarray(_array(corpus, "corpus")))
    k = _integer(k, "k")
    num_threads = _integer(num_threads, "num_threads")
    if corpus_norms is not None:
        corpus_norms = np.ascontiguousarray(_array(corpus_norms, "corpus_norms", np.float32))
    range_starts = _int32(range_starts, "range_starts", required=False)
    range_ends = _int32(range_ends, "range_ends", required=False)
    if queries.ndim != 2 or corpus.ndim != 2:
        raise ValueError(f"queries and corpus must be 2-D arrays [rows, dim], got shapes "
                         f"{queries.shape} and {corpus.shape}")
    indices, scores = _topk_outputs("retrieval_topk", queries.shape[0], corpus.shape[0], k,
                                    np.float32)
    problem = retrieval_problem(_view(queries, "queries"), _view(corpus, "corpus"), k, metric,
                                _opt(corpus_norms, "corpus_norms"),
                                _opt(range_starts, "range_starts"),
                                _opt(range_ends, "range_ends"), _view(indices), _view(scores),
                                True, True)
    ext().retrieval_topk_cpu(problem, num_threads)
    return indices, scores
