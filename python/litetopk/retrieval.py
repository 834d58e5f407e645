"""retrieval_topk: exact top-k nearest neighbours of queries over a corpus
(include/litetopk/retrieval.h).

`retrieval_problem` checks array views (litetopk._problems' form) and builds the extension's
RetrievalProblem, for the torch ops (litetopk.ops.retrieval) and for `retrieval_topk` and
`corpus_norms` below, which run the CPU reference on numpy arrays (no torch needed).

Layout: queries [B, d] contiguous float16 or bfloat16, d from 64 to 1024 in multiples of 16;
corpus [N, d] contiguous of the queries' dtype, or fp8 e4m3 (torch.float8_e4m3fn, or uint8 bytes)
with corpus_scales [N] float32 (row c is corpus_scales[c] * e4m3(corpus[c])); metric "ip",
"cosine" (normalised rows: the inner product) or "l2" (score -||q - c||^2, with corpus_norms [N]
float32 squared norms, or None to compute them at each call); range_starts / range_ends [B] int32
(optional) restrict query b to corpus rows [start, end); corpus_bitmap [ceil(N / 8)] uint8
(optional): bit (c & 7) of byte c >> 3 set means row c may be selected (`pack_bitmap` makes it).
"""
import numpy as np

from . import _problems as P
from ._ext import ext

RETRIEVAL_DTYPES = ("float16", "bfloat16")


def bitmap_bytes(n):
    """Bytes of a corpus bitmap over n rows."""
    return (n + 7) // 8


def pack_bitmap(allowed):
    """The corpus bitmap (uint8 [ceil(N / 8)]) of a boolean array [N] (True: the row may be
    selected): numpy's packbits in little bit order."""
    return np.packbits(np.asarray(allowed, dtype=bool), bitorder="little")


def _corpus_fields(problem, queries_dtype, corpus, N, d, corpus_scales, device):
    """Checks the corpus (and its scales when fp8) and fills the problem's corpus fields."""
    lib = ext()
    fp8 = corpus[3] in P.FP8_DTYPES
    P.check("corpus", corpus, (None, d), (queries_dtype,) + P.FP8_DTYPES, device=device)
    if fp8:
        if corpus_scales is None:
            raise ValueError(f"corpus_scales is required (a [{N}] float32 array): corpus is fp8 "
                             f"e4m3 (dtype {corpus[3]})")
        P.check("corpus_scales", corpus_scales, (N,), ("float32",), device=device)
    elif corpus_scales is not None:
        raise ValueError(f"corpus_scales must be None unless corpus is fp8 e4m3 "
                         f"({' or '.join(P.FP8_DTYPES)}), got corpus dtype {corpus[3]}")
    problem.corpus = corpus[0]
    problem.corpus_format = lib.RetrievalCorpusFormat.fp8_e4m3 if fp8 else \
        lib.RetrievalCorpusFormat.same_as_queries
    problem.corpus_scales = P.address(corpus_scales)
    problem.n, problem.dim = N, d


def retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts, range_ends,
                      indices, scores, sorted_, deterministic, corpus_scales=None,
                      corpus_bitmap=None):
    """The extension's RetrievalProblem (litetopk::RetrievalProblem) for these array views."""
    if queries is None or len(queries[1]) != 2:
        P._fail("queries", "a 2-D array [batch, dim]", queries)
    B, d = queries[1]
    device = queries[4]
    P.check("queries", queries, dtypes=RETRIEVAL_DTYPES)
    if corpus is None or len(corpus[1]) != 2:
        P._fail("corpus", "a 2-D array [n, dim]", corpus)
    N = corpus[1][0]
    if corpus_norms is not None:
        P.check("corpus_norms", corpus_norms, (N,), ("float32",), device=device)
    if range_starts is not None:
        P.check("range_starts", range_starts, (B,), ("int32",), device=device)
    if range_ends is not None:
        P.check("range_ends", range_ends, (B,), ("int32",), device=device)
    if corpus_bitmap is not None:
        P.check("corpus_bitmap", corpus_bitmap, (bitmap_bytes(N),), ("uint8",), device=device)
    P.check("indices", indices, (B, max(k, 0)), ("int32",), device=device)
    if scores is not None:
        P.check("scores", scores, (B, max(k, 0)), ("float32",), device=device)
    lib = ext()
    problem = lib.RetrievalProblem()
    _corpus_fields(problem, queries[3], corpus, N, d, corpus_scales, device)
    problem.queries = queries[0]
    problem.dtype = P.enum_value(lib.DType, queries[3], "dtype")
    problem.batch, problem.k = B, k
    problem.metric = P.enum_value(lib.RetrievalMetric, metric, "metric")
    problem.corpus_norms = P.address(corpus_norms)
    problem.range_starts, problem.range_ends = P.address(range_starts), P.address(range_ends)
    problem.corpus_bitmap = P.address(corpus_bitmap)
    problem.indices, problem.scores = indices[0], P.address(scores)
    problem.sorted, problem.deterministic = sorted_, deterministic
    return problem


def norms_problem(corpus, corpus_scales, norms):
    """The RetrievalProblem retrieval_corpus_norms reads (corpus, format, scales, n, dim) for
    these views, norms [N] float32 checked."""
    if corpus is None or len(corpus[1]) != 2:
        P._fail("corpus", "a 2-D array [n, dim]", corpus)
    N, d = corpus[1]
    device = corpus[4]
    dtype = corpus[3] if corpus[3] in RETRIEVAL_DTYPES else "float16"
    P.check("norms", norms, (N,), ("float32",), device=device)
    lib = ext()
    problem = lib.RetrievalProblem()
    _corpus_fields(problem, dtype, corpus, N, d, corpus_scales, device)
    problem.dtype = P.enum_value(lib.DType, dtype, "dtype")
    return problem


def _corpus_array(corpus, name="corpus"):
    from .cpu import _aligned, _array
    return _aligned(np.ascontiguousarray(_array(corpus, name)))


def _scales_array(corpus_scales):
    from .cpu import _array
    if corpus_scales is None:
        return None
    return np.ascontiguousarray(_array(corpus_scales, "corpus_scales", np.float32))


def retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                   range_ends=None, corpus_scales=None, corpus_bitmap=None, num_threads=0):
    """The exact top-k corpus rows of each query on the CPU (fp64 dot products rounded to fp32):
    queries [B, d] float16 or ml_dtypes.bfloat16 arrays; corpus [N, d] of the same dtype, or e4m3
    bytes (uint8 or ml_dtypes.float8_e4m3fn) with corpus_scales [N] float32; corpus_bitmap
    [ceil(N / 8)] uint8 (pack_bitmap). Returns (indices [B, k] int32 corpus rows, -1 padded;
    scores [B, k] float32, NaN padded), sorted best first, ties to the smallest row."""
    from .cpu import _aligned, _array, _int32, _integer, _opt, _topk_outputs, _view

    queries = _aligned(np.ascontiguousarray(_array(queries, "queries")))
    corpus = _corpus_array(corpus)
    k = _integer(k, "k")
    num_threads = _integer(num_threads, "num_threads")
    if corpus_norms is not None:
        corpus_norms = np.ascontiguousarray(_array(corpus_norms, "corpus_norms", np.float32))
    corpus_scales = _scales_array(corpus_scales)
    if corpus_bitmap is not None:
        corpus_bitmap = np.ascontiguousarray(_array(corpus_bitmap, "corpus_bitmap"))
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
                                True, True, _opt(corpus_scales, "corpus_scales"),
                                _opt(corpus_bitmap, "corpus_bitmap"))
    ext().retrieval_topk_cpu(problem, num_threads)
    return indices, scores


def corpus_norms(corpus, corpus_scales=None):
    """The squared norms [N] float32 of the corpus rows (fp64 sums rounded; an fp8 corpus's rows
    scaled by corpus_scales), to pass as corpus_norms to every l2 call."""
    from .cpu import _view

    corpus = _corpus_array(corpus)
    corpus_scales = _scales_array(corpus_scales)
    norms = np.empty(corpus.shape[:1], dtype=np.float32)
    problem = norms_problem(_view(corpus, "corpus"),
                            None if corpus_scales is None else _view(corpus_scales),
                            _view(norms))
    ext().retrieval_corpus_norms_cpu(problem, norms.__array_interface__["data"][0])
    return norms
