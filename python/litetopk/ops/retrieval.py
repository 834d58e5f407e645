"""torch.ops.litetopk.retrieval_topk, retrieval_topk_out and retrieval_corpus_norms, and
litetopk.ops.retrieval_topk / retrieval_corpus_norms / retrieval_pack_bitmap: the exact top-k
corpus rows of each query (brute-force nearest neighbours, inner product, cosine or L2; an fp16,
bf16 or fp8-with-row-scales corpus; optional ranges and corpus bitmap). CUDA tensors run a GPU
path (path "auto", "unfused": cuBLAS chunk by chunk, then select and merge, or "fused": the gate
in the GEMM's epilogue, fp16 / bf16 corpus on sm_90); CPU tensors the CPU reference."""
import torch

from .. import _problems as P
from .. import retrieval as R
from ._runtime import (_direct, _launch, _meta, _on, _opt, _plan_of, _ptr, _register,
                       _remember, _stream, _view, _workspace, library)


def _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts, range_ends,
                       indices, scores, sorted_, deterministic, corpus_scales, corpus_bitmap):
    return R.retrieval_problem(_view(queries), _view(corpus), k, metric, _opt(corpus_norms),
                               _opt(range_starts), _opt(range_ends), _view(indices),
                               _opt(scores), sorted_, deterministic, _opt(corpus_scales),
                               _opt(corpus_bitmap))


def _retrieval_plan(problem, path):
    lib = library()
    options = lib.RetrievalOptions()
    options.path = P.enum_value(lib.RetrievalPath, path, "path")
    return lib.retrieval_topk_plan(problem, options)


def _retrieval_launch(plan, device, queries, corpus, corpus_scales, corpus_norms, range_starts,
                      range_ends, corpus_bitmap, indices, scores):
    stream = _stream(device)
    workspace, owner = _workspace(plan.workspace_bytes, device, stream)
    library().retrieval_topk_launch(plan, queries.data_ptr(), corpus.data_ptr(),
                                    _ptr(corpus_scales), _ptr(corpus_norms), _ptr(range_starts),
                                    _ptr(range_ends), _ptr(corpus_bitmap), indices.data_ptr(),
                                    _ptr(scores), workspace, stream)


def _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, indices,
               scores, sorted_, deterministic, corpus_scales, corpus_bitmap, path, outputs):
    """retrieval_topk into indices/scores; `outputs` is their part of the signature ("new" for
    outputs _retrieval_fake made)."""
    device = queries.get_device()
    if device < 0:
        library().retrieval_topk_cpu(
            _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts,
                               range_ends, indices, scores, sorted_, deterministic,
                               corpus_scales, corpus_bitmap), 0)
        return
    key = ("retrieval", _meta(queries), _meta(corpus), k, metric, _meta(corpus_norms),
           _meta(range_starts), _meta(range_ends), outputs, sorted_, deterministic,
           _meta(corpus_scales), _meta(corpus_bitmap), path)
    plan = _plan_of(key)
    if plan is None:
        problem = _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts,
                                     range_ends, indices, scores, sorted_, deterministic,
                                     corpus_scales, corpus_bitmap)
        plan = _remember(key, _launch(device, _retrieval_plan, problem, path))
    _launch(device, _retrieval_launch, plan, device, queries, corpus, corpus_scales,
            corpus_norms, range_starts, range_ends, corpus_bitmap, indices, scores)


def _retrieval_fake(queries, corpus, k, *args, **kwargs):
    shape = (queries.shape[0], max(k, 0))
    return (queries.new_empty(shape, dtype=torch.int32),
            queries.new_empty(shape, dtype=torch.float32))


def _retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                    range_ends=None, sorted=False, deterministic=False, corpus_scales=None,
                    corpus_bitmap=None, path="auto"):
    indices, scores = _retrieval_fake(queries, corpus, k)
    _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, indices,
               scores, sorted, deterministic, corpus_scales, corpus_bitmap, path, "new")
    return indices, scores


def _retrieval_topk_out(queries, corpus, k, out_indices, out_scores=None, metric="ip",
                        corpus_norms=None, range_starts=None, range_ends=None, sorted=False,
                        deterministic=False, corpus_scales=None, corpus_bitmap=None,
                        path="auto"):
    _retrieval(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, out_indices,
               out_scores, sorted, deterministic, corpus_scales, corpus_bitmap, path,
               (_meta(out_indices), _meta(out_scores)))


def _corpus_norms_into(corpus, corpus_scales, norms):
    problem = R.norms_problem(_view(corpus), _opt(corpus_scales), _view(norms))
    device = corpus.get_device()
    if device < 0:
        library().retrieval_corpus_norms_cpu(problem, norms.data_ptr())
        return
    _launch(device, lambda: library().retrieval_corpus_norms(problem, norms.data_ptr(),
                                                             _stream(device)))


def _corpus_norms_fake(corpus, corpus_scales=None):
    return corpus.new_empty(corpus.shape[:1], dtype=torch.float32)


def _corpus_norms(corpus, corpus_scales=None):
    norms = _corpus_norms_fake(corpus)
    _corpus_norms_into(corpus, corpus_scales, norms)
    return norms


_register("retrieval_topk(Tensor queries, Tensor corpus, int k, str metric=\"ip\", "
          "Tensor? corpus_norms=None, Tensor? range_starts=None, Tensor? range_ends=None, "
          "bool sorted=False, bool deterministic=False, Tensor? corpus_scales=None, "
          "Tensor? corpus_bitmap=None, str path=\"auto\") -> (Tensor indices, Tensor scores)",
          _retrieval_topk, _retrieval_fake)
_register("retrieval_topk_out(Tensor queries, Tensor corpus, int k, Tensor(a!) out_indices, "
          "Tensor(b!)? out_scores=None, str metric=\"ip\", Tensor? corpus_norms=None, "
          "Tensor? range_starts=None, Tensor? range_ends=None, bool sorted=False, "
          "bool deterministic=False, Tensor? corpus_scales=None, Tensor? corpus_bitmap=None, "
          "str path=\"auto\") -> ()",
          _retrieval_topk_out, lambda *args, **kwargs: None)
_register("retrieval_corpus_norms(Tensor corpus, Tensor? corpus_scales=None) -> Tensor",
          _corpus_norms, _corpus_norms_fake)


def retrieval_topk(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                   range_ends=None, sorted=False, deterministic=False, out=None,
                   corpus_scales=None, corpus_bitmap=None, path="auto"):
    """The exact top-k corpus rows of each query (torch.ops.litetopk.retrieval_topk): queries
    [B, d] contiguous float16 or bfloat16 (d 64..1024, a multiple of 16); corpus [N, d] of the
    same dtype, or torch.float8_e4m3fn (or uint8 bytes) with corpus_scales [N] float32 (row c is
    corpus_scales[c] * corpus[c]); metric "ip", "cosine" (normalised rows) or "l2" (score
    -||q - c||^2; corpus_norms [N] float32 squared norms from retrieval_corpus_norms, computed at
    each call when None); range_starts / range_ends [B] int32 or None; corpus_bitmap
    [ceil(N / 8)] uint8 (retrieval_pack_bitmap) or None. Returns (indices [B, k] int32 corpus
    rows, -1 padded; scores [B, k] float32, NaN padded); sorted: best first, ties by smaller row;
    deterministic: ties at the k-th score to the smallest rows. out=(indices, scores or None)
    writes there (retrieval_topk_out) and returns out. path: "auto" (the cost model), "unfused"
    or "fused" (an fp16 / bf16 corpus on sm_90; else ValueError)."""
    direct = _direct(queries, corpus, corpus_norms, range_starts, range_ends, corpus_scales,
                     corpus_bitmap, *(out or ()))
    if out is None:
        op = _retrieval_topk if direct else torch.ops.litetopk.retrieval_topk
        return op(queries, corpus, k, metric, corpus_norms, range_starts, range_ends, sorted,
                  deterministic, corpus_scales, corpus_bitmap, path)
    op = _retrieval_topk_out if direct else torch.ops.litetopk.retrieval_topk_out
    op(queries, corpus, k, out[0], out[1], metric, corpus_norms, range_starts, range_ends,
       sorted, deterministic, corpus_scales, corpus_bitmap, path)
    return out


def retrieval_topk_plan(queries, corpus, k, metric="ip", corpus_norms=None, range_starts=None,
                        range_ends=None, sorted=False, deterministic=False, scores=True,
                        corpus_scales=None, corpus_bitmap=None, path="auto"):
    """What retrieval_topk does on these CUDA inputs: {"path": the path that runs, "chunks",
    "chunk_rows": the corpus chunks of the unfused path, "fused_splits", "fused_sample_stride",
    "fused_sample_tiles": the fused path's corpus splits and sample, "workspace_bytes"} (scores:
    whether the call writes scores)."""
    shape = (queries.shape[0], max(k, 0))
    indices = torch.empty(shape, dtype=torch.int32, device=queries.device)
    values = torch.empty(shape, dtype=torch.float32, device=queries.device) if scores else None
    problem = _retrieval_problem(queries, corpus, k, metric, corpus_norms, range_starts,
                                 range_ends, indices, values, sorted, deterministic,
                                 corpus_scales, corpus_bitmap)
    with _on(queries.get_device()):
        plan = _retrieval_plan(problem, path)
    return {"path": plan.path.name, "chunks": plan.chunks, "chunk_rows": plan.chunk_rows,
            "fused_splits": plan.fused_splits, "fused_sample_stride": plan.fused_sample_stride,
            "fused_sample_tiles": plan.fused_sample_tiles,
            "workspace_bytes": plan.workspace_bytes}


def retrieval_corpus_norms(corpus, corpus_scales=None):
    """The squared norms [N] float32 of the corpus rows (torch.ops.litetopk.
    retrieval_corpus_norms), computed once and passed as corpus_norms to every l2 call: on the
    GPU summed in fp32 on the current stream, on the CPU in fp64, rounded."""
    if _direct(corpus, corpus_scales):
        return _corpus_norms(corpus, corpus_scales)
    return torch.ops.litetopk.retrieval_corpus_norms(corpus, corpus_scales)


def retrieval_pack_bitmap(allowed):
    """The corpus bitmap (uint8 [ceil(N / 8)], on allowed's device) of a bool tensor [N]: bit
    (c & 7) of byte c >> 3 is allowed[c]."""
    n = allowed.shape[0]
    padded = torch.zeros(R.bitmap_bytes(n) * 8, dtype=torch.uint8, device=allowed.device)
    padded[:n] = allowed.to(torch.uint8)
    weights = torch.tensor([1 << b for b in range(8)], dtype=torch.uint8, device=allowed.device)
    return (padded.view(-1, 8) * weights).sum(dim=1, dtype=torch.uint8)
