"""retrieval_topk: the numpy function (litetopk.retrieval) against a plain numpy oracle (fp16,
fp8 corpus with row scales, l2 as -||q - c||^2, ranges, bitmaps), the corpus norms and bitmap
helpers, the torch op on CPU tensors and fake tensors, and (with a GPU) the CUDA op against the
CPU op. The torch tests skip without torch, the CUDA tests without a GPU."""
import numpy as np
import pytest

from conftest import needs_cuda, needs_torch, torch

import litetopk.fp8 as F
import litetopk.retrieval as R


def plain_topk(queries, corpus, k, metric="ip", norms=None, starts=None, ends=None, scales=None,
               bitmap=None):
    """fp64 scores rounded to fp32, NaN outside the ranges and the bitmap, sorted by (score
    desc, row asc). An fp8 corpus is its e4m3 values (float) with row scales."""
    q = queries.astype(np.float64)
    c = corpus.astype(np.float64)
    s = np.ones(c.shape[0]) if scales is None else scales.astype(np.float64)
    scores = (q @ c.T) * s[None, :]
    if metric == "l2":
        n2 = (c * c).sum(axis=1) * s * s if norms is None else norms.astype(np.float64)
        scores = 2.0 * scores - n2[None, :] - (q * q).sum(axis=1)[:, None]
    scores = scores.astype(np.float32)
    if bitmap is not None:
        allowed = np.unpackbits(bitmap, bitorder="little")[:c.shape[0]].astype(bool)
        scores[:, ~allowed] = np.nan
    B, N = scores.shape
    indices = np.full((B, k), -1, dtype=np.int32)
    values = np.full((B, k), np.nan, dtype=np.float32)
    for b in range(B):
        lo = 0 if starts is None else int(starts[b])
        hi = N if ends is None else int(ends[b])
        rows = [r for r in range(lo, hi) if not np.isnan(scores[b, r])]
        rows.sort(key=lambda r: (-scores[b, r], r))
        rows = rows[:k]
        indices[b, :len(rows)] = rows
        values[b, :len(rows)] = scores[b, rows]
    return indices, values


def inputs(B=5, N=300, d=64, seed=0, dtype=np.float16):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, d)).astype(dtype),
            rng.standard_normal((N, d)).astype(dtype))


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
@pytest.mark.parametrize("k", [1, 17, 400])
def test_numpy_matches_plain(metric, k):
    q, c = inputs()
    got_i, got_s = R.retrieval_topk(q, c, k, metric=metric)
    want_i, want_s = plain_topk(q, c, k, metric)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-6, atol=1e-5)


def test_numpy_l2_norms_and_ranges():
    q, c = inputs(B=4)
    norms = (c.astype(np.float64) ** 2).sum(axis=1).astype(np.float32)
    starts = np.array([0, 10, 299, 150], dtype=np.int32)
    ends = np.array([300, 15, 299, 290], dtype=np.int32)
    got_i, _ = R.retrieval_topk(q, c, 20, metric="l2", corpus_norms=norms, range_starts=starts,
                                range_ends=ends)
    want_i, _ = plain_topk(q, c, 20, "l2", norms, starts, ends)
    np.testing.assert_array_equal(got_i, want_i)
    assert (got_i[1, 5:] == -1).all() and (got_i[2] == -1).all()


def fp8_corpus(corpus):
    """e4m3 bytes and row scales (max |x| / 448) of a float corpus."""
    c = corpus.astype(np.float32)
    scales = (np.abs(c).max(axis=1) / 448.0).astype(np.float32)
    return F.to_e4m3(c / scales[:, None]), scales


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_numpy_fp8_corpus_and_bitmap(metric):
    q, c = inputs(B=4, N=301, seed=2)
    codes, scales = fp8_corpus(c)
    rng = np.random.default_rng(1)
    allowed = rng.random(301) < 0.3
    bitmap = R.pack_bitmap(allowed)
    assert bitmap.shape == (38,) and bitmap.dtype == np.uint8
    got_i, got_s = R.retrieval_topk(q, codes, 50, metric=metric, corpus_scales=scales,
                                    corpus_bitmap=bitmap)
    want_i, want_s = plain_topk(q, F.from_e4m3(codes), 50, metric, scales=scales,
                                bitmap=bitmap)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-6, atol=1e-5)
    assert allowed[got_i[got_i >= 0]].all()
    none_i, _ = R.retrieval_topk(q, codes, 5, corpus_scales=scales,
                                 corpus_bitmap=R.pack_bitmap(np.zeros(301, dtype=bool)))
    assert (none_i == -1).all()


def test_numpy_corpus_norms_and_l2_distance():
    q, c = inputs(B=3)
    norms = R.corpus_norms(c)
    np.testing.assert_allclose(norms, (c.astype(np.float64) ** 2).sum(axis=1), rtol=1e-6)
    got_i, got_s = R.retrieval_topk(q, c, 1, metric="l2", corpus_norms=norms)
    d2 = ((q.astype(np.float64)[:, None, :] - c.astype(np.float64)[None]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(got_i[:, 0], d2.argmin(axis=1))
    np.testing.assert_allclose(got_s[:, 0], -d2.min(axis=1), rtol=1e-5)
    codes, scales = fp8_corpus(c)
    e = F.from_e4m3(codes).astype(np.float64) * scales[:, None]
    np.testing.assert_allclose(R.corpus_norms(codes, scales), (e * e).sum(axis=1), rtol=1e-6)


def test_numpy_errors_name_the_argument():
    q, c = inputs()
    with pytest.raises(ValueError, match="corpus must be of shape"):
        R.retrieval_topk(q, c[:, :32], 4)
    with pytest.raises(ValueError, match="dim must be a multiple of 16"):
        R.retrieval_topk(q[:, :40], c[:, :40], 4)
    with pytest.raises(ValueError, match="k must be in"):
        R.retrieval_topk(q, c, 0)
    with pytest.raises(ValueError, match="metric must be one of"):
        R.retrieval_topk(q, c, 4, metric="dot")
    with pytest.raises(ValueError, match="queries must be of dtype"):
        R.retrieval_topk(q.astype(np.float32), c, 4)
    codes, scales = fp8_corpus(c)
    with pytest.raises(ValueError, match="corpus_scales is required"):
        R.retrieval_topk(q, codes, 4)
    with pytest.raises(ValueError, match="corpus_scales must be None"):
        R.retrieval_topk(q, c, 4, corpus_scales=scales)
    with pytest.raises(ValueError, match="corpus_bitmap must be of shape"):
        R.retrieval_topk(q, c, 4, corpus_bitmap=np.zeros(5, dtype=np.uint8))


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_cpu_op_matches_numpy(dtype):
    import litetopk.ops  # noqa: F401  (registers the ops)
    q, c = inputs(seed=3, dtype=np.float32)
    tq = torch.from_numpy(q).to(getattr(torch, dtype))
    tc = torch.from_numpy(c).to(getattr(torch, dtype))
    indices, scores = torch.ops.litetopk.retrieval_topk(tq, tc, 9, "l2", sorted=True)
    want_i, want_s = plain_topk(tq.float().numpy(), tc.float().numpy(), 9, "l2")
    np.testing.assert_array_equal(indices.numpy(), want_i)
    np.testing.assert_allclose(scores.numpy(), want_s, rtol=1e-6, atol=1e-5)
    out = (torch.empty(5, 9, dtype=torch.int32), torch.empty(5, 9))
    got = litetopk.ops.retrieval_topk(tq, tc, 9, "l2", sorted=True, out=out)
    assert got is out
    assert torch.equal(out[0], indices) and torch.equal(out[1], scores)


@needs_torch
def test_torch_cpu_op_fp8_bitmap_norms():
    import litetopk.ops  # noqa: F401
    q, c = inputs(seed=4, dtype=np.float32)
    codes, scales = fp8_corpus(c)
    tq = torch.from_numpy(q).half()
    tc = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    ts = torch.from_numpy(scales)
    allowed = torch.from_numpy(np.random.default_rng(0).random(300) < 0.5)
    bitmap = litetopk.ops.retrieval_pack_bitmap(allowed)
    np.testing.assert_array_equal(bitmap.numpy(), R.pack_bitmap(allowed.numpy()))
    norms = litetopk.ops.retrieval_corpus_norms(tc, ts)
    np.testing.assert_array_equal(norms.numpy(), R.corpus_norms(codes, scales))
    indices, scores = torch.ops.litetopk.retrieval_topk(tq, tc, 20, "l2", norms, sorted=True,
                                                        corpus_scales=ts, corpus_bitmap=bitmap)
    want_i, want_s = plain_topk(tq.float().numpy(), F.from_e4m3(codes), 20, "l2",
                                norms.numpy(), scales=scales, bitmap=bitmap.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_i)
    np.testing.assert_allclose(scores.numpy(), want_s, rtol=1e-6, atol=1e-5)
    with pytest.raises(ValueError, match="corpus_scales is required"):
        torch.ops.litetopk.retrieval_topk(tq, tc, 20)
    with pytest.raises(ValueError, match="k must be in"):
        torch.ops.litetopk.retrieval_topk(tq, tc, 9000, corpus_scales=ts)


@needs_torch
def test_torch_fake_tensors():
    import litetopk.ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(7, 128, dtype=torch.float16)
        c = torch.empty(1000, 128, dtype=torch.float16)
        indices, scores = torch.ops.litetopk.retrieval_topk(q, c, 33)
        assert indices.shape == (7, 33) and indices.dtype == torch.int32
        assert scores.shape == (7, 33) and scores.dtype == torch.float32
        norms = torch.ops.litetopk.retrieval_corpus_norms(c)
        assert norms.shape == (1000,) and norms.dtype == torch.float32


@needs_cuda
@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("path", ["auto", "unfused", "fused"])
def test_cuda_op_matches_cpu_op(metric, path):
    import litetopk.ops  # noqa: F401
    q, c = inputs(B=16, N=5000, d=128, seed=5, dtype=np.float32)
    tq = torch.from_numpy(q).half()
    tc = torch.from_numpy(c).half()
    want_i, want_s = torch.ops.litetopk.retrieval_topk(tq, tc, 256, metric, sorted=True)
    got_i, got_s = torch.ops.litetopk.retrieval_topk(tq.cuda(), tc.cuda(), 256, metric,
                                                      sorted=True, path=path)
    assert litetopk.ops.retrieval_topk_plan(tq.cuda(), tc.cuda(), 256, metric,
                                            path=path)["path"] == (
        "unfused" if path == "auto" else path)
    torch.cuda.synchronize()
    tolerance = 2e-4 * (1 + want_s.abs().max().item())
    # Same scores slot by slot within fp32 rounding; rows equal except among near ties.
    torch.testing.assert_close(got_s.cpu(), want_s, atol=tolerance, rtol=0)
    assert (got_i.cpu() == want_i).float().mean() > 0.99
    for b in range(16):
        assert len(set(got_i[b].tolist())) == 256


@needs_cuda
@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_cuda_op_fp8_bitmap_matches_cpu_op(metric):
    import litetopk.ops  # noqa: F401
    q, c = inputs(B=16, N=5000, d=128, seed=6, dtype=np.float32)
    codes, scales = fp8_corpus(c)
    tq = torch.from_numpy(q).half()
    tc = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    ts = torch.from_numpy(scales)
    bitmap = litetopk.ops.retrieval_pack_bitmap(torch.from_numpy(
        np.random.default_rng(2).random(5000) < 0.3))
    want_i, want_s = torch.ops.litetopk.retrieval_topk(tq, tc, 256, metric, sorted=True,
                                                        corpus_scales=ts, corpus_bitmap=bitmap)
    got_i, got_s = torch.ops.litetopk.retrieval_topk(tq.cuda(), tc.cuda(), 256, metric,
                                                      sorted=True, corpus_scales=ts.cuda(),
                                                      corpus_bitmap=bitmap.cuda())
    norms = litetopk.ops.retrieval_corpus_norms(tc.cuda(), ts.cuda())
    torch.cuda.synchronize()
    tolerance = 2e-4 * (1 + want_s.abs().max().item())
    torch.testing.assert_close(got_s.cpu(), want_s, atol=tolerance, rtol=0)
    assert (got_i.cpu() == want_i).float().mean() > 0.99
    torch.testing.assert_close(norms.cpu(), litetopk.ops.retrieval_corpus_norms(tc, ts),
                               atol=0, rtol=1e-5)


@needs_cuda
def test_cuda_plan_chunks_the_corpus():
    import litetopk.ops  # noqa: F401
    q = torch.zeros(4, 128, dtype=torch.float16, device="cuda")
    c = torch.zeros(1000, 128, dtype=torch.float16, device="cuda")
    plan = litetopk.ops.retrieval_topk_plan(q, c, 10)
    assert plan["chunks"] == 1 and plan["chunk_rows"] == 1000 and plan["workspace_bytes"] > 0


@needs_cuda
def test_cuda_path_errors():
    import litetopk.ops  # noqa: F401
    q = torch.zeros(4, 128, dtype=torch.float16, device="cuda")
    c = torch.zeros(1000, 128, dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match="path must be one of"):
        litetopk.ops.retrieval_topk(q, c, 10, path="fastest")
    codes = torch.zeros(1000, 128, dtype=torch.float8_e4m3fn, device="cuda")
    scales = torch.ones(1000, dtype=torch.float32, device="cuda")
    with pytest.raises(ValueError, match="fp8_e4m3"):
        litetopk.ops.retrieval_topk(q, codes, 10, corpus_scales=scales, path="fused")
