"""torch.ops.litetopk on CPU tensors (the CPU backend) and, when there is a GPU, CUDA tensors:
each op against its reference, fake tensor shapes, torch.library.opcheck, bad input, and the
example DSA indexer module with torch.compile(fullgraph=True). Skipped without torch."""
import math

import numpy as np
import pytest

from conftest import has_cuda, needs_torch, torch

pytestmark = needs_torch
DEVICES = ["cpu"] + (["cuda"] if has_cuda else [])

if torch is not None:
    import litetopk
    from litetopk._ext import ext
    from litetopk.ops import (IndexerState, SparseKvCache, flash_mla_sparse_fwd, fp8_mqa_logits,
                              fp8_mqa_topk, fp8_paged_mqa_logits, fp8_paged_mqa_topk,
                              sparse_attention, topk)
    from dsa_indexer import DSAIndexer, make_inputs, same_selection
from reference import (make_paged_inputs, make_sparse_attention_inputs, unpack_paged_cache,
                       visible_tokens)


def check_rows(scores, indices, values, k, starts=None, ends=None, largest=True):
    """Each row against torch.topk of its range: counts, padding, no duplicates, same values."""
    scores, indices, values = scores.float().cpu(), indices.cpu(), values.float().cpu()
    for b in range(scores.shape[0]):
        start = 0 if starts is None else int(starts[b])
        end = scores.shape[1] if ends is None else int(ends[b])
        row = scores[b, start:end]
        row = row[~row.isnan()]
        want = min(k, row.numel())
        ref = torch.topk(row, want, largest=largest).values.sort().values
        got = indices[b, :want].long()
        assert (indices[b, want:] == -1).all()
        assert got.unique().numel() == want and (got >= 0).all() and (got < end - start).all()
        chosen = scores[b, start + got]
        assert torch.equal(chosen.sort().values, ref)
        assert torch.equal(values[b, :want], chosen)


def indexer_inputs(device, T=64, S=1024, H=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, H, 128, generator=g).to(torch.float8_e4m3fn)
    kv = torch.randn(S, 128, generator=g).to(torch.float8_e4m3fn)
    kv_scale = torch.rand(S, generator=g) + 0.5
    weights = torch.randn(T, H, generator=g) / math.sqrt(H)
    ks = torch.randint(0, S // 4, (T,), generator=g, dtype=torch.int32)
    ke = (S - T + 1 + torch.arange(T, dtype=torch.int32)).clamp(max=S)
    return [x.to(device) for x in (q, kv, kv_scale, weights, ks, ke)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_topk(device, dtype):
    dtype = getattr(torch, dtype)
    scores = torch.randn(9, 5000, device=device).to(dtype)
    starts = torch.tensor([0, 10, 100, 4990, 0, 7, 0, 2500, 3], dtype=torch.int32, device=device)
    ends = torch.tensor([5000, 20, 4000, 5000, 0, 5000, 1, 5000, 4], dtype=torch.int32,
                        device=device)
    for largest in (True, False):
        indices, values = topk(scores, 100, starts, ends, largest=largest)
        assert indices.dtype == torch.int32 and values.dtype == dtype
        check_rows(scores, indices, values, 100, starts, ends, largest)


@pytest.mark.parametrize("device", DEVICES)
def test_topk_out_strided_sorted(device):
    full = torch.randn(6, 3000, device=device)
    scores = full[:, 1000:2800]  # row stride 3000
    indices = torch.full((6, 64), -7, dtype=torch.int32, device=device)
    topk(scores, 64, sorted=True, out=(indices, None))
    ref = torch.topk(scores, 64).indices.int()
    assert torch.equal(indices, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_mqa_logits_and_topk(device):
    q, kv, kv_scale, weights, ks, ke = indexer_inputs(device)
    logits = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke)
    assert logits.shape == (q.shape[0], kv.shape[0]) and logits.dtype == torch.float32
    # Reference: exact products of fp8 values, fp32 sums.
    dots = torch.einsum("thd,sd->tsh", q.double().cpu(), kv.double().cpu())
    want = (dots.clamp_min(0) * weights.double().cpu()[:, None, :]).sum(-1) * kv_scale.cpu()[None]
    columns = torch.arange(kv.shape[0])
    inside = (columns[None] >= ks.cpu()[:, None]) & (columns[None] < ke.cpu()[:, None])
    got = logits.cpu()
    assert torch.equal(torch.isinf(got), ~inside)
    # Two fp32-grade evaluations of a score differ by at most tol[t] (bench/indexer_bench.py's
    # bound: Cauchy-Schwarz on each head's dot product, 5e-4 for Hopper's fp8 accumulator).
    q64, kv64 = q.double().cpu(), kv.double().cpu()
    key_bound = (kv_scale.double().cpu() * kv64.norm(dim=1)).max()
    tol = 5e-4 * (weights.double().cpu().abs() * q64.norm(dim=2)).sum(1) * key_bound  # [T]
    error = torch.where(inside, (got.double() - want).abs(), torch.zeros_like(want))
    assert (error <= tol[:, None]).all()

    k = 128
    for algo in (("auto", "unfused", "fused") if device == "cuda" else ("auto",)):
        indices, values = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k, algo=algo)
        selected, _ = topk(logits, k, ks, ke)
        assert same_selection(indices.cpu(), selected.cpu(), got, ks.cpu()), algo
        rows = torch.arange(q.shape[0])[:, None]
        absolute = (indices.long() + ks[:, None].long()).clamp(min=0)
        chosen = torch.where(indices >= 0, logits[rows.to(device), absolute], float("nan"))
        torch.testing.assert_close(values, chosen, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_indexer_state_gives_the_same_answer(device):
    q, kv, kv_scale, weights, ks, ke = indexer_inputs(device)
    state = IndexerState(128, device=device)
    first, _ = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 128, state=state)
    second, _ = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 128, state=state)
    stateless, _ = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 128)
    logits = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke).cpu()
    for got in (first, second):
        assert same_selection(got.cpu(), stateless.cpu(), logits, ks.cpu())
    assert state.reset().buffer.count_nonzero() == 0


# ---------------------------------------------------------------- paged decode indexer

# A ragged batch: a long context, an empty one, one shorter than k, one across a block edge.
PAGED_CONTEXTS = [700, 0, 9, 129, 260]


def paged_inputs(device, contexts=PAGED_CONTEXTS, next_n=2, H=64, max_blocks=None,
                 out_of_range=True, seed=0):
    """(q, kv_cache, weights, context_lens, block_table) torch tensors in DeepGEMM's
    fp8_paged_mqa_logits layouts (reference.make_paged_inputs), q float8_e4m3fn; with
    out_of_range, request 0's second block-table entry points past the cache."""
    q, kv_cache, weights, lens, table = make_paged_inputs(contexts, next_n, H=H,
                                                          max_blocks=max_blocks, seed=seed)
    if out_of_range:
        table[0, 1] = kv_cache.shape[0] + 5
    tensors = (torch.from_numpy(q).view(torch.float8_e4m3fn), torch.from_numpy(kv_cache),
               torch.from_numpy(weights), torch.from_numpy(lens), torch.from_numpy(table))
    return [x.to(device) for x in tensors]


def paged_row_ends(context_lens, next_n, max_context):
    """[B * next_n] int32: the tokens each query row sees."""
    return torch.tensor([visible_tokens(c, next_n, j, max_context)
                         for c in context_lens.tolist() for j in range(next_n)],
                        dtype=torch.int32)


def paged_tolerance(q, kv_cache, weights):
    """[B * next_n] bounds on the difference of two fp32-grade evaluations of a row's scores
    (the prefill test's bound: Cauchy-Schwarz on each head's dot product, 5e-4 for Hopper's fp8
    accumulator)."""
    keys, scales = unpack_paged_cache(kv_cache.cpu().numpy())
    key_norm = np.linalg.norm(torch.from_numpy(keys.copy()).view(torch.float8_e4m3fn).double()
                              .numpy(), axis=-1)
    key_bound = float((np.abs(scales) * key_norm).max())
    q64 = q.double().cpu().flatten(0, 1)  # [rows, H, D]
    return 5e-4 * (weights.double().cpu().abs() * q64.norm(dim=2)).sum(1) * key_bound


def check_paged_selection(indices, values, logits, row_ends, k):
    """Each row's indices are a top k of its logits over its visible tokens (NaN never chosen,
    -1 padding after the selectable count) and values are the chosen logits."""
    indices, values, logits = indices.cpu(), values.cpu(), logits.cpu()
    selected, _ = topk(logits, k, None, row_ends)
    assert same_selection(indices, selected, logits)
    for row in range(logits.shape[0]):
        end = int(row_ends[row])
        selectable = int((~logits[row, :end].isnan()).sum())
        want = min(k, selectable)
        got = indices[row, :want].long()
        assert (indices[row, want:] == -1).all()
        assert got.unique().numel() == want and (got >= 0).all() and (got < end).all()
        assert not logits[row, got].isnan().any()
        assert torch.equal(values[row, :want], logits[row, got])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("next_n", [1, 2, 4])
def test_fp8_paged_mqa_logits_and_topk(device, next_n):
    q, kv_cache, weights, lens, table = paged_inputs(device, next_n=next_n, seed=next_n)
    max_context = 640  # cuts request 0 (700 tokens)
    logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
    rows = len(PAGED_CONTEXTS) * next_n
    assert logits.shape == (rows, max_context) and logits.dtype == torch.float32
    # The numpy function is the reference (the same CPU code; fp64 scores rounded to fp32).
    want = torch.from_numpy(litetopk.indexer_logits_paged(
        q.cpu().view(torch.uint8).numpy(), kv_cache.cpu().numpy(), weights.cpu().numpy(),
        lens.cpu().numpy(), table.cpu().numpy(), max_context))
    got = logits.cpu()
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    assert got[:next_n, 64:128].isnan().all()  # request 0's out-of-range block
    if device == "cpu":
        assert torch.equal(got.nan_to_num(), want.nan_to_num())
    else:
        finite = want.isfinite()
        error = torch.where(finite, (got.double() - want.double()).abs(), 0)
        assert (error <= paged_tolerance(q, kv_cache, weights)[:, None]).all()

    k = 64
    row_ends = paged_row_ends(lens.cpu(), next_n, max_context)
    for algo in (("auto", "unfused", "fused") if device == "cuda" else ("auto",)):
        indices, values = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                             algo=algo)
        assert indices.shape == values.shape == (rows, k) and indices.dtype == torch.int32
        check_paged_selection(indices, values, logits, row_ends, k)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_context_lens_2d_deepgemm_arguments_and_out(device):
    next_n, max_context, k = 3, 704, 32
    q, kv_cache, weights, lens, table = paged_inputs(device, next_n=next_n, seed=5)
    logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
    indices, values = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k)
    # DeepGEMM's 2-D context lengths (row b, j sees lens_2d[b, j]), its argument order with a
    # schedule_meta (ignored) and clean_logits, and its (q, None) form.
    lens_2d = (lens[:, None] - next_n + 1 + torch.arange(next_n, device=device)).to(torch.int32)
    schedule_meta = torch.zeros(9, 2, dtype=torch.int32, device=device)
    for same in (fp8_paged_mqa_logits(q, kv_cache, weights, lens_2d, table, max_context),
                 fp8_paged_mqa_logits((q, None), kv_cache, weights, lens_2d, table,
                                      schedule_meta, max_context, clean_logits=False)):
        assert torch.equal(same.nan_to_num(), logits.nan_to_num())
    got, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens_2d, table, schedule_meta,
                                max_context, k)
    assert same_selection(got.cpu(), indices.cpu(), logits.cpu())
    # out=: into the caller's tensors (logits with a padded row stride).
    out_indices = torch.full_like(indices, -5)
    out_values = torch.empty_like(values)
    fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                       out=(out_indices, out_values))
    assert same_selection(out_indices.cpu(), indices.cpu(), logits.cpu())
    padded = torch.full((logits.shape[0], max_context + 64), 3.0, device=device)
    fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context,
                         out=padded[:, :max_context])
    assert torch.equal(padded[:, :max_context].nan_to_num(), logits.nan_to_num())
    assert (padded[:, max_context:] == 3.0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_paged_bad_input(device):
    q, kv_cache, weights, lens, table = paged_inputs(device)
    with pytest.raises(ValueError, match="weights must be of shape"):
        fp8_paged_mqa_topk(q, kv_cache, weights[:, :8], lens, table, 512, 16)
    with pytest.raises(ValueError, match=r"context_lens must be of shape \[batch\] or"):
        fp8_paged_mqa_topk(q, kv_cache, weights, lens[:, None].repeat(1, 3), table, 512, 16)
    with pytest.raises(ValueError, match="max_context must be <= max_blocks"):
        fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, 100000)
    with pytest.raises(ValueError, match="k must be in"):
        fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, 512, 0)
    with pytest.raises(ValueError, match="q scale"):
        fp8_paged_mqa_logits((q, weights), kv_cache, weights, lens, table, 512)
    with pytest.raises(ValueError, match="algo must be one of"):
        fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, 512, 16, algo="gpu")
    with pytest.raises(ValueError, match="kv_cache must be of dtype uint8"):
        fp8_paged_mqa_topk(q, kv_cache.view(torch.float8_e4m3fn), weights, lens, table, 512, 16)
    with pytest.raises(TypeError, match="missing argument 'k'"):
        fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, 512)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_fake_tensor_shapes(device):
    from torch._subclasses.fake_tensor import FakeTensorMode
    inputs = paged_inputs(device, next_n=3)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = [mode.from_tensor(x) for x in inputs]
        logits = torch.ops.litetopk.fp8_paged_mqa_logits(*fake, 512)
        assert logits.shape == (15, 512) and logits.dtype == torch.float32
        indices, values = torch.ops.litetopk.fp8_paged_mqa_topk(*fake, 512, 100)
        assert indices.shape == (15, 100) and indices.dtype == torch.int32
        assert values.shape == (15, 100) and values.dtype == torch.float32
        indices, _ = fp8_paged_mqa_topk(*fake, 512, 7, algo="fused")  # the Python front
        assert indices.shape == (15, 7)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_opcheck(device):
    opcheck = torch.library.opcheck
    # No out-of-range block: opcheck compares outputs without equal_nan.
    inputs = tuple(paged_inputs(device, contexts=[200, 0, 70], out_of_range=False))
    opcheck(torch.ops.litetopk.fp8_paged_mqa_logits.default, (*inputs, 256),
            test_utils=FP8_OPCHECK)
    opcheck(torch.ops.litetopk.fp8_paged_mqa_topk.default, (*inputs, 256, 16),
            test_utils=FP8_OPCHECK[:2])  # unsorted: eager and traced orders may differ
    indices = torch.empty(6, 16, dtype=torch.int32, device=device)
    opcheck(torch.ops.litetopk.fp8_paged_mqa_topk_out.default, (*inputs, 256, 16, indices),
            test_utils=FP8_OPCHECK[:2])


def test_paged_compiles_fullgraph_cpu():
    """fullgraph tracing through both paged ops (aot_eager keeps the CPU test short; the GPU
    test compiles with inductor)."""
    inputs = paged_inputs("cpu", next_n=2, seed=9)

    def select(q, kv_cache, weights, lens, table):
        logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, 704)
        indices, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, 704, 48)
        return logits, indices

    logits, indices = select(*inputs)
    got_logits, got = torch.compile(select, fullgraph=True, backend="aot_eager")(*inputs)
    assert torch.equal(got_logits.nan_to_num(), logits.nan_to_num())
    assert same_selection(got, indices, logits)


def dense_cache(device, batch=2, heads=2, length=300, capacity=384, dtype="float16"):
    dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(7)
    keys = torch.zeros(batch, heads, capacity, 128, dtype=dtype)
    values = torch.zeros_like(keys)
    keys[:, :, :length] = (torch.randn(batch, heads, length, 128, generator=g) * 2).to(dtype)
    values[:, :, :length] = torch.randn(batch, heads, length, 128, generator=g).to(dtype)
    lengths = torch.tensor([length, length - 137], dtype=torch.int32)
    q = (torch.randn(batch, 8, 128, generator=g) * 0.3).to(dtype)
    return [x.to(device) for x in (q, keys, values, lengths)]


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_and_dense_decode(device):
    q, keys, values, lengths = dense_cache(device)
    # The numpy CPU functions are the reference of the ops (the same library code on the CPU).
    np_cache = litetopk.SparseKvCache.empty(2, 2, max_blocks=3)
    litetopk.sparse_kv_from_dense(np_cache, keys.cpu().numpy(), values.cpu().numpy(),
                                  lengths.cpu().numpy())
    cache = SparseKvCache.empty(2, 2, max_blocks=3, device=device)
    cache.fill_from_dense(keys, values, lengths.clone())
    for name in ("key_codes", "key_scales", "tail_keys", "lengths"):
        np.testing.assert_array_equal(getattr(cache, name).cpu().numpy(), getattr(np_cache, name))
    np.testing.assert_array_equal(cache.key_residuals.cpu().view(torch.uint8).numpy(),
                                  np_cache.key_residuals)

    want, want_lse = litetopk.dense_decode(q.cpu().numpy(), keys.cpu().numpy(),
                                           values.cpu().numpy(), lengths.cpu().numpy())
    out, lse = litetopk.ops.dense_decode(q, keys, values, lengths, out_dtype=torch.float32)
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(lse.cpu().numpy(), want_lse, rtol=1e-3, atol=1e-3)

    want, _, kept, _ = litetopk.sparse_decode(np_cache, q.cpu().numpy(), delta=5.0)
    out = torch.empty(q.shape, dtype=torch.float32, device=device)
    mask = torch.zeros(2, 2, 3, dtype=torch.uint8, device=device)
    cache.decode(q, delta=5.0, out=(out, None, mask))
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=2e-2, atol=2e-3)
    assert mask.cpu()[:, :, 0].all()

    # One appended token: the same cache as converting one token more.
    longer = SparseKvCache.empty(2, 2, max_blocks=3, device=device)
    longer.fill_from_dense(keys, values, (lengths + 1).clone())
    at = torch.arange(2, device=device)
    cache.append(keys[at, :, lengths.long()], values[at, :, lengths.long()])
    assert torch.equal(cache.lengths, longer.lengths)
    assert torch.equal(cache.key_codes, longer.key_codes)


@pytest.mark.parametrize("device", DEVICES)
def test_fake_tensor_shapes(device):
    from torch._subclasses.fake_tensor import FakeTensorMode
    q, kv, kv_scale, weights, ks, ke = indexer_inputs(device, T=16, S=256)
    dq, keys, values, lengths = dense_cache(device)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        f = [mode.from_tensor(x) for x in (q, kv, kv_scale, weights, ks, ke)]
        scores = torch.empty(5, 77, device=device)
        i, v = torch.ops.litetopk.topk(scores, 9)
        assert i.shape == (5, 9) and i.dtype == torch.int32 and v.dtype == torch.float32
        logits = torch.ops.litetopk.fp8_mqa_logits(*f)
        assert logits.shape == (16, 256) and logits.dtype == torch.float32
        i, v = torch.ops.litetopk.fp8_mqa_topk(*f, 33)
        assert i.shape == (16, 33) and v.dtype == torch.float32
        out, lse = torch.ops.litetopk.dense_decode(mode.from_tensor(dq), mode.from_tensor(keys),
                                                   mode.from_tensor(values),
                                                   mode.from_tensor(lengths))
        assert out.shape == (2, 8, 128) and out.dtype == torch.float16 and lse.shape == (2, 8)
        cache = SparseKvCache.empty(2, 2, 3, device=device)
        out, lse = torch.ops.litetopk.sparse_decode(
            mode.from_tensor(dq), *(None if x is None else mode.from_tensor(x)
                                    for x in cache.arrays()), 5.0, 0.0, torch.float32)
        assert out.dtype == torch.float32 and lse.shape == (2, 8)


# opcheck's schema test compares fp8 tensors with allclose, which torch lacks on the CPU.
FP8_OPCHECK = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    opcheck = torch.library.opcheck
    scores = torch.randn(4, 300, device=device)
    starts = torch.tensor([0, 5, 10, 200], dtype=torch.int32, device=device)  # no NaN padding
    # sorted: the order of an unsorted answer may differ from run to run.
    opcheck(torch.ops.litetopk.topk.default, (scores, 7, starts, None, True, True))
    indices = torch.empty(4, 7, dtype=torch.int32, device=device)
    opcheck(torch.ops.litetopk.topk_out.default, (scores, 7, indices, None, None, None, True, True))
    inputs = indexer_inputs(device, T=8, S=200)
    opcheck(torch.ops.litetopk.fp8_mqa_logits.default, tuple(inputs), test_utils=FP8_OPCHECK)
    opcheck(torch.ops.litetopk.fp8_mqa_topk.default, (*inputs, 16),
            test_utils=FP8_OPCHECK[:2])  # unsorted: eager and traced orders may differ
    q, keys, values, lengths = dense_cache(device)
    opcheck(torch.ops.litetopk.dense_decode.default, (q, keys, values, lengths))


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_raises_value_error(device):
    scores = torch.randn(3, 100, device=device)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        topk(scores, 0)
    with pytest.raises(ValueError, match="row_ends must be of shape"):
        topk(scores, 4, None, torch.zeros(2, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="dtype int32"):
        topk(scores, 4, scores[:, 0], None)
    q, kv, kv_scale, weights, ks, ke = indexer_inputs(device, T=8, S=200)
    with pytest.raises(ValueError, match="weights must be of shape"):
        fp8_mqa_topk(q, (kv, kv_scale), weights[:, :8], ks, ke, 16)
    with pytest.raises(ValueError, match="max_seqlen_k"):
        fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, max_seqlen_k=64)


@pytest.mark.parametrize("device", DEVICES)
def test_dsa_indexer_module_paths_agree(device):
    torch.manual_seed(0)
    fused = DSAIndexer(topk=32, fused=True).to(device)
    unfused = DSAIndexer(topk=32, fused=False).to(device)
    unfused.load_state_dict(fused.state_dict())
    inputs = make_inputs(192, device=device)
    with torch.no_grad():
        got, want = fused(*inputs), unfused(*inputs)
        scores = fp8_mqa_logits(*unfused.prepare(*inputs[:2]), *inputs[2:]).cpu()
    assert got.shape == (192, 32)
    assert same_selection(got.cpu(), want.cpu(), scores, inputs[2].cpu())


def test_dsa_indexer_compiles_fullgraph_cpu():
    """fullgraph tracing through every op (aot_eager keeps the CPU test short; the GPU test
    compiles with inductor)."""
    torch.manual_seed(0)
    module = DSAIndexer(topk=16, fused=True)
    inputs = make_inputs(64)
    with torch.no_grad():
        eager = module(*inputs)
        compiled = torch.compile(module, fullgraph=True, backend="aot_eager")(*inputs)
        unfused = DSAIndexer(topk=16, fused=False)
        unfused.load_state_dict(module.state_dict())
        compiled_unfused = torch.compile(unfused, fullgraph=True, backend="aot_eager")(*inputs)
    assert torch.equal(eager, compiled)
    assert same_selection(compiled, compiled_unfused)


# ---------------------------------------------------------------- sparse attention

def attention_inputs(device, s_q=6, s_kv=300, h_q=16, d_qk=576, topk=37, seed=0):
    """(q, kv, indices) torch tensors, FlashMLA's layouts (reference.make_sparse_attention_inputs:
    -1 padding, out-of-range indices, repeated tokens, a query with nothing to attend)."""
    q, kv, indices = make_sparse_attention_inputs(s_q, s_kv, h_q, d_qk, topk, seed)
    tensors = (torch.from_numpy(q.view(np.int16)).view(torch.bfloat16),
               torch.from_numpy(kv.view(np.int16)).view(torch.bfloat16),
               torch.from_numpy(indices))
    return [x.to(device) for x in tensors]


def numpy_attention(q, kv, indices, sm_scale):
    """The numpy CPU function on torch tensors: (out bf16, max_logits, lse) as CPU tensors."""
    bits = [x.cpu().view(torch.int16).numpy().view(np.uint16) for x in (q, kv)]
    out, max_logits, lse = litetopk.sparse_attention(*bits, indices.cpu().numpy(), sm_scale,
                                                     out_dtype=np.uint16)
    return (torch.from_numpy(out.view(np.int16)).view(torch.bfloat16),
            torch.from_numpy(max_logits), torch.from_numpy(lse))


def check_attention_close(got, want, kv, indices, d_v=512):
    """A GPU answer against the CPU reference's with tests/gpu/sparse_attention_gpu_test.cpp's
    tolerance: out within 2^-8 (max |v| + |out|) per element (max |v| over the query's valid value
    rows: bf16 probabilities and the bf16 rounding of out, twice over), max_logits and lse within
    1e-4 (1 + |x|), -inf exactly where the CPU has it."""
    out, max_logits, lse = (x.cpu() for x in got)
    want_out, want_max, want_lse = (x.cpu() for x in want)
    assert out.shape == want_out.shape and out.dtype == torch.bfloat16
    row_max = kv.cpu()[:, 0, :d_v].double().abs().amax(dim=1) if kv.shape[0] else None
    rows = indices.cpu().reshape(indices.shape[0], -1).long()
    valid = (rows >= 0) & (rows < kv.shape[0])
    for s in range(out.shape[0]):
        max_v = row_max[rows[s][valid[s]]].max().item() if valid[s].any() else 0.0
        error = (out[s].double() - want_out[s].double()).abs()
        tol = (max_v + want_out[s].double().abs()) * 2.0 ** -8
        assert (error <= tol).all(), (s, error.max().item())
    for name, g, w in (("max_logits", max_logits, want_max), ("lse", lse, want_lse)):
        assert g.dtype == torch.float32, name
        assert torch.equal(g.isneginf(), w.isneginf()), name
        finite = w.isfinite()
        error = (g[finite].double() - w[finite].double()).abs()
        assert (error <= 1e-4 * (1 + w[finite].double().abs())).all(), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("h_q,d_qk", [(16, 576), (64, 576), (128, 512)])
def test_sparse_attention(device, h_q, d_qk):
    q, kv, indices = attention_inputs(device, h_q=h_q, d_qk=d_qk, seed=h_q)
    scale = 1.0 / math.sqrt(d_qk)
    out, max_logits, lse = sparse_attention(q, kv, indices, scale)
    assert out.shape == (6, h_q, 512) and out.dtype == torch.bfloat16
    assert max_logits.shape == lse.shape == (6, h_q) and lse.dtype == torch.float32
    assert out.device == q.device
    want = numpy_attention(q, kv, indices, scale)
    if device == "cpu":  # the same library code
        for got, w in zip((out, max_logits, lse), want):
            assert torch.equal(got, w)
    else:
        check_attention_close((out, max_logits, lse), want, kv, indices)
    assert (out[3] == 0).all() and lse[3].isneginf().all() and max_logits[3].isneginf().all()
    # The op, FlashMLA's name and the _out variant (stats optional) agree.
    again = torch.ops.litetopk.sparse_attention(q, kv, indices, scale)
    for a, b in zip((out, max_logits, lse), again):
        assert torch.equal(a, b)
    # FlashMLA's name returns its current convention: natural log, +inf lse for an empty query.
    flash = flash_mla_sparse_fwd(q, kv, indices, scale, 512)
    assert torch.equal(flash[0], out)
    assert torch.equal(flash[1], max_logits * math.log(2))
    assert flash[2][3].isposinf().all() and flash[1][3].isneginf().all()
    finite = lse.isfinite()
    assert torch.equal(flash[2][finite], lse[finite] * math.log(2))
    assert torch.equal(sparse_attention(q, kv, indices, scale, natural_log=True)[2], flash[2])
    out2 = torch.full_like(out, 7.0)
    lse2 = torch.zeros_like(lse)
    result = sparse_attention(q, kv, indices, scale, out=(out2, None, lse2))
    assert result[0] is out2 and result[1] is None
    assert torch.equal(out2, out) and torch.equal(lse2, lse)
    torch.ops.litetopk.sparse_attention_out(q, kv, indices[:, 0], scale, out2)  # 2-D indices
    assert torch.equal(out2, out)


@pytest.mark.parametrize("device", DEVICES)
def test_flash_mla_topk_length_and_attn_sink(device):
    """topk_length is the same as -1 past each query's length; attn_sink scales out by
    1 / (1 + exp(sink - lse)) (natural lse, without the sink) and leaves lse as it is, as the
    current FlashMLA does; a query whose length is 0 gets out 0 and lse +inf."""
    q, kv, indices = attention_inputs(device, s_q=6, h_q=16, topk=37, seed=21)
    lengths = torch.tensor([37, 0, 5, 36, 1, 20], dtype=torch.int32, device=device)
    masked = indices.clone()
    for s, n in enumerate(lengths.tolist()):
        masked[s, :, n:] = -1
    want = flash_mla_sparse_fwd(q, kv, masked, 0.07)
    got = flash_mla_sparse_fwd(q, kv, indices, 0.07, topk_length=lengths)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    assert got[2][1].isposinf().all() and (got[0][1] == 0).all()
    assert torch.equal(flash_mla_sparse_fwd(q, kv, indices, 0.07, topk_length=lengths.long())[0],
                       got[0])
    sink = torch.linspace(-2.0, 2.0, 16, device=device)
    sunk = flash_mla_sparse_fwd(q, kv, indices, 0.07, attn_sink=sink, topk_length=lengths)
    assert torch.equal(sunk[1], got[1]) and torch.equal(sunk[2], got[2])
    scale = 1.0 / (1.0 + torch.exp(sink.view(1, 16) - got[2]))
    expected = (got[0].float() * scale.unsqueeze(-1)).to(torch.bfloat16)
    assert torch.equal(sunk[0], expected) and (sunk[0][1] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_empty(device):
    q, kv, indices = attention_inputs(device, s_q=3, h_q=32, topk=9)
    out, max_logits, lse = sparse_attention(q, kv[:0], indices, 0.1)  # s_kv = 0
    assert (out == 0).all() and max_logits.isneginf().all() and lse.isneginf().all()
    out, max_logits, lse = sparse_attention(q[:0], kv, indices[:0], 0.1)  # s_q = 0
    assert out.shape == (0, 32, 512) and lse.shape == (0, 32)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_bad_input(device):
    q, kv, indices = attention_inputs(device)
    with pytest.raises(ValueError, match="q must be of dtype bfloat16"):
        sparse_attention(q.float(), kv, indices, 0.1)
    with pytest.raises(ValueError, match=r"kv must be of shape \[300, 1, 576\]"):
        sparse_attention(q, kv.expand(300, 2, 576).contiguous(), indices, 0.1)
    with pytest.raises(ValueError, match="kv must be a 3-D array"):
        sparse_attention(q, kv[:, 0], indices, 0.1)
    with pytest.raises(ValueError, match="indices must be of dtype int32"):
        sparse_attention(q, kv, indices.long(), 0.1)
    with pytest.raises(ValueError, match=r"indices must be of shape \[6, 1, 37\]"):
        sparse_attention(q, kv, indices[:5], 0.1)
    with pytest.raises(ValueError, match="q must be contiguous"):
        sparse_attention(q.transpose(0, 1).contiguous().transpose(0, 1), kv, indices, 0.1)
    with pytest.raises(ValueError, match="h_q must be 16, 32, 64 or 128, got 8"):
        sparse_attention(q[:, :8].contiguous(), kv, indices, 0.1)
    with pytest.raises(ValueError, match="d_qk must be 576 or 512, got 128"):
        sparse_attention(q[..., :128].contiguous(), kv[..., :128].contiguous(), indices, 0.1)
    with pytest.raises(ValueError, match="d_v must be 512, got 256"):
        sparse_attention(q, kv, indices, 0.1, d_v=256)
    with pytest.raises(ValueError, match="sm_scale must be finite"):
        sparse_attention(q, kv, indices, float("nan"))
    with pytest.raises(ValueError, match="topk must be in"):
        sparse_attention(q, kv, indices[..., :0], 0.1)
    with pytest.raises(ValueError, match=r"attn_sink must be of shape \[h_q = 16\]"):
        flash_mla_sparse_fwd(q, kv, indices, 0.1, 512, torch.zeros(8, device=device))
    with pytest.raises(ValueError, match=r"topk_length must be of shape \[s_q = 6\]"):
        flash_mla_sparse_fwd(q, kv, indices, 0.1, topk_length=indices[:3, 0, 0])
    with pytest.raises(ValueError, match="topk_length must be of dtype int32 or int64"):
        flash_mla_sparse_fwd(q, kv, indices, 0.1, topk_length=indices[:, 0, 0].float())
    out = torch.empty(6, 16, 512, dtype=torch.bfloat16, device=device)
    with pytest.raises(ValueError, match=r"lse must be of shape \[6, 16\]"):
        sparse_attention(q, kv, indices, 0.1, out=(out, None, torch.empty(6, device=device)))
    with pytest.raises(ValueError, match="out must be of dtype bfloat16"):
        sparse_attention(q, kv, indices, 0.1, out=(out.float(), None, None))
    if device != "cpu":
        with pytest.raises(ValueError, match="kv must be on cuda:0 like the other inputs"):
            sparse_attention(q, kv.cpu(), indices, 0.1)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_fake_tensor_shapes(device):
    from torch._subclasses.fake_tensor import FakeTensorMode
    inputs = attention_inputs(device, s_q=5, h_q=64, topk=11)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = [mode.from_tensor(x) for x in inputs]
        out, max_logits, lse = torch.ops.litetopk.sparse_attention(*fake, 0.04)
        assert out.shape == (5, 64, 512) and out.dtype == torch.bfloat16
        assert max_logits.shape == lse.shape == (5, 64) and lse.dtype == torch.float32
        assert out.device == inputs[0].device
        out, _, _ = flash_mla_sparse_fwd(*fake, 0.04)  # the Python front
        assert out.shape == (5, 64, 512)
        torch.ops.litetopk.sparse_attention_out(*fake, 0.04, out)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_opcheck(device):
    opcheck = torch.library.opcheck
    inputs = tuple(attention_inputs(device, s_q=5, h_q=16, topk=20, seed=5))
    opcheck(torch.ops.litetopk.sparse_attention.default, (*inputs, 0.06))
    out = torch.empty(5, 16, 512, dtype=torch.bfloat16, device=device)
    lse = torch.empty(5, 16, device=device)
    opcheck(torch.ops.litetopk.sparse_attention_out.default, (*inputs, 0.06, out, None, lse))


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_algos(device):
    """Every algo name through the front, the op and the _out op: on the CPU the reference
    whatever the name (the same answer), on the GPU each kernel within tolerance of it; a name
    that is no algorithm raises ValueError naming the valid ones, and union-packed outside
    h_q 16 and 32 is refused on either device."""
    q, kv, indices = attention_inputs(device, s_q=9, h_q=16, topk=30, seed=9)
    want = numpy_attention(q, kv, indices, 0.05)
    for algo in ext().SparseAttentionAlgo.__members__:
        results = [sparse_attention(q, kv, indices, 0.05, algo=algo),
                   torch.ops.litetopk.sparse_attention(q, kv, indices, 0.05, 512, algo)]
        out = torch.full_like(results[0][0], 7.0)
        lse = torch.zeros_like(results[0][2])
        torch.ops.litetopk.sparse_attention_out(q, kv, indices, 0.05, out, None, lse, algo=algo)
        assert sparse_attention(q, kv, indices, 0.05, out=(out, None, lse), algo=algo)[0] is out
        for got in results:
            if device == "cpu":
                for g, w in zip(got, want):
                    assert torch.equal(g, w), algo
            else:
                check_attention_close(got, want, kv, indices)
            assert torch.equal(got[0], results[0][0]) and torch.equal(got[2], results[0][2])
        assert torch.equal(out, results[0][0]) and torch.equal(lse, results[0][2]), algo
    names = "auto, per-query, union-packed, plain"
    with pytest.raises(ValueError, match=f"algo must be one of {names}, got 'bogus'"):
        sparse_attention(q, kv, indices, 0.05, algo="bogus")
    with pytest.raises(ValueError, match=f"algo must be one of {names}, got 'Auto'"):
        torch.ops.litetopk.sparse_attention(q, kv, indices, 0.05, 512, "Auto")
    out = torch.empty(9, 16, 512, dtype=torch.bfloat16, device=device)
    with pytest.raises(ValueError, match=f"algo must be one of {names}, got ''"):
        torch.ops.litetopk.sparse_attention_out(q, kv, indices, 0.05, out, algo="")
    q64, kv64, indices64 = attention_inputs(device, s_q=3, h_q=64, topk=8, seed=10)
    with pytest.raises(ValueError, match="algo union-packed needs h_q 16 or 32"):
        sparse_attention(q64, kv64, indices64, 0.05, algo="union-packed")
    got = sparse_attention(q64, kv64, indices64, 0.05, algo="per-query")
    check_attention_close(got, numpy_attention(q64, kv64, indices64, 0.05), kv64, indices64)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_attention_algo_fake_and_opcheck(device):
    from torch._subclasses.fake_tensor import FakeTensorMode
    inputs = tuple(attention_inputs(device, s_q=5, h_q=16, topk=20, seed=12))
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = [mode.from_tensor(x) for x in inputs]
        out, _, lse = torch.ops.litetopk.sparse_attention(*fake, 0.04, 512, "union-packed")
        assert out.shape == (5, 16, 512) and lse.shape == (5, 16)
        out, _, _ = sparse_attention(*fake, 0.04, algo="per-query")  # the Python front
        assert out.shape == (5, 16, 512)
        torch.ops.litetopk.sparse_attention_out(*fake, 0.04, out, algo="plain")
    opcheck = torch.library.opcheck
    opcheck(torch.ops.litetopk.sparse_attention.default, inputs + (0.06,),
            {"algo": "union-packed"})
    out = torch.empty(5, 16, 512, dtype=torch.bfloat16, device=device)
    opcheck(torch.ops.litetopk.sparse_attention_out.default, inputs + (0.06, out),
            {"algo": "per-query"})


def test_sparse_attention_compiles_fullgraph_cpu():
    """fullgraph tracing through the op and its FlashMLA-named front (aot_eager keeps the CPU
    test short; the GPU test compiles with inductor)."""
    q, kv, indices = attention_inputs("cpu", s_q=6, h_q=16, topk=25, seed=8)

    def layer(q, kv, indices):
        out, _, lse = flash_mla_sparse_fwd(q, kv, indices, 0.05)
        return out.float().sum(-1), lse * math.log(2)

    eager = layer(q, kv, indices)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")(q, kv, indices)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)

