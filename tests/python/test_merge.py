"""merge_topk: the numpy function (litetopk.merge), the torch op on CPU tensors, and
litetopk.distributed on a gloo process group of 2 and 3 CPU processes, whose sharded select and
sharded indexers must equal the single-process calls. The torch tests skip without torch."""
import os

import numpy as np
import pytest

from conftest import needs_cuda, needs_torch, torch
from reference import pack_paged_cache

import litetopk.merge
from litetopk import fp8


def plain_merge(values, indices, k, counts=None, largest=True):
    """Each row's (value, index) pairs best first: float comparison, ties by index."""
    B, S, k_in = values.shape
    rows = []
    for b in range(B):
        row = []
        for s in range(S):
            n = k_in if counts is None else min(max(int(counts[b, s]), 0), k_in)
            for j in range(n):
                v, i = float(values[b, s, j]), int(indices[b, s, j])
                if i >= 0 and not np.isnan(v):
                    row.append((v, i))
        row.sort(key=lambda p: (-p[0] if largest else p[0], p[1]))
        rows.append(row[:k])
    return rows


def assert_merged(rows, got_indices, got_values, k):
    for b, row in enumerate(rows):
        want_i = [i for _, i in row] + [-1] * (k - len(row))
        assert got_indices[b].tolist() == want_i, b
        np.testing.assert_array_equal(got_values[b, :len(row)], [v for v, _ in row])
        assert np.isnan(got_values[b, len(row):]).all()


def random_lists(rng, B, S, k_in, empty=0.2, nan=0.1):
    """Small-integer values (ties within and across shards), distinct indices per row, -1 and
    NaN slots."""
    values = rng.integers(-4, 4, size=(B, S, k_in)).astype(np.float32)
    indices = np.stack([rng.permutation(S * k_in * 2)[:S * k_in].reshape(S, k_in)
                        for _ in range(B)]).astype(np.int32)
    indices[rng.random((B, S, k_in)) < empty] = -1
    values[rng.random((B, S, k_in)) < nan] = np.nan
    return values, indices


@pytest.mark.parametrize("S,k_in,k", [(1, 8, 4), (2, 8, 8), (3, 5, 20), (9, 16, 7)])
@pytest.mark.parametrize("largest", [True, False])
def test_numpy_merge_matches_plain(S, k_in, k, largest):
    rng = np.random.default_rng(S * 100 + k)
    values, indices = random_lists(rng, 4, S, k_in)
    counts = rng.integers(-1, k_in + 2, size=(4, S)).astype(np.int32)
    for c in (None, counts):
        got_i, got_v = litetopk.merge.merge_topk(values, indices, k, counts=c, largest=largest)
        assert got_i.dtype == np.int32 and got_v.dtype == np.float32
        assert_merged(plain_merge(values, indices, k, c, largest), got_i, got_v, k)


def test_numpy_merge_errors_name_the_argument():
    values = np.zeros((2, 3, 4), np.float32)
    indices = np.zeros((2, 3, 4), np.int32)
    with pytest.raises(ValueError, match="values must be a 3-D array"):
        litetopk.merge.merge_topk(values[0], indices, 2)
    with pytest.raises(ValueError, match=r"indices must be of shape \[2, 3, 4\]"):
        litetopk.merge.merge_topk(values, indices[:, :2], 2)
    with pytest.raises(ValueError, match=r"counts must be of shape \[2, 3\]"):
        litetopk.merge.merge_topk(values, indices, 2, counts=np.zeros((3, 2), np.int32))
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        litetopk.merge.merge_topk(values, indices, 0)
    with pytest.raises(TypeError, match="k must be an integer"):
        litetopk.merge.merge_topk(values, indices, 2.0)
    with pytest.raises(TypeError, match="indices must be an integer array"):
        litetopk.merge.merge_topk(values, indices.astype(np.float32), 2)
    with pytest.raises(ValueError, match="shards must be >= 1, got 0"):
        litetopk.merge.merge_topk(np.zeros((2, 0, 4), np.float32), np.zeros((2, 0, 4)), 2)


# ---- the torch op on CPU tensors ----

@needs_torch
def test_torch_op_reads_the_all_gather_layout():
    from litetopk.ops import merge_topk
    rng = np.random.default_rng(3)
    values, indices = random_lists(rng, 5, 3, 6)
    want = plain_merge(values, indices, 9)
    # The all-gather result [S, B, k_in], passed as its [B, S, k_in] view.
    gathered_v = torch.from_numpy(np.ascontiguousarray(values.transpose(1, 0, 2)))
    gathered_i = torch.from_numpy(np.ascontiguousarray(indices.transpose(1, 0, 2)))
    for v, i in ((torch.from_numpy(values), torch.from_numpy(indices)),
                 (gathered_v.permute(1, 0, 2), gathered_i.permute(1, 0, 2))):
        got_i, got_v = torch.ops.litetopk.merge_topk(v, i, 9)
        assert_merged(want, got_i.numpy(), got_v.numpy(), 9)
        got_i, got_v = merge_topk(v, i, 9, sorted=True)
        assert_merged(want, got_i.numpy(), got_v.numpy(), 9)
    out = (torch.full((5, 9), 7, dtype=torch.int32), torch.zeros(5, 9))
    assert merge_topk(gathered_v.permute(1, 0, 2), gathered_i.permute(1, 0, 2), 9, out=out) is out
    assert_merged(want, out[0].numpy(), out[1].numpy(), 9)
    with pytest.raises(ValueError, match="indices must have the strides of values"):
        merge_topk(gathered_v.permute(1, 0, 2), torch.from_numpy(indices), 9)


@needs_torch
def test_torch_op_fake_and_opcheck():
    from torch._subclasses.fake_tensor import FakeTensorMode
    values = torch.randn(4, 2, 8)
    indices = torch.arange(64, dtype=torch.int32).view(4, 2, 8)
    with FakeTensorMode() as mode:
        got_i, got_v = torch.ops.litetopk.merge_topk(mode.from_tensor(values),
                                                     mode.from_tensor(indices), 5)
    assert got_i.shape == (4, 5) and got_i.dtype == torch.int32 and got_v.dtype == torch.float32
    torch.library.opcheck(torch.ops.litetopk.merge_topk.default, (values, indices, 5))


@needs_cuda
@pytest.mark.parametrize("sorted_", [False, True])
def test_cuda_op_equals_cpu_op(sorted_):
    from litetopk.ops import merge_topk
    rng = np.random.default_rng(11)
    for S, k_in, k in ((1, 64, 32), (2, 2048, 2048), (8, 256, 300), (3, 7, 50)):
        values, indices = random_lists(rng, 6, S, k_in)
        counts = torch.from_numpy(rng.integers(-1, k_in + 2, size=(6, S)).astype(np.int32))
        gathered_v = torch.from_numpy(np.ascontiguousarray(values.transpose(1, 0, 2)))
        gathered_i = torch.from_numpy(np.ascontiguousarray(indices.transpose(1, 0, 2)))
        for c in (None, counts):
            want_i, want_v = merge_topk(torch.from_numpy(values), torch.from_numpy(indices), k,
                                        counts=c, sorted=True)
            got_i, got_v = merge_topk(gathered_v.cuda().permute(1, 0, 2),
                                      gathered_i.cuda().permute(1, 0, 2), k,
                                      counts=None if c is None else c.cuda(), sorted=sorted_)
            got_i, got_v = got_i.cpu(), got_v.cpu()
            if not sorted_:  # the CPU result is sorted; put the GPU's in the same order
                order = torch.argsort(got_i.long() + (got_i < 0).long() * (1 << 40), dim=1)
                got_i, got_v = got_i.gather(1, order), got_v.gather(1, order)
                order = torch.argsort(want_i.long() + (want_i < 0).long() * (1 << 40), dim=1)
                want_i, want_v = want_i.gather(1, order), want_v.gather(1, order)
            assert torch.equal(got_i, want_i), (S, k_in, k)
            assert torch.equal(got_v.nan_to_num(), want_v.nan_to_num()), (S, k_in, k)


@needs_cuda
def test_cuda_indexer_as_shards_on_one_gpu():
    """The distributed recipe without the group: fp8_mqa_topk on each key shard of one GPU,
    indices shifted, the lists stacked as the all-gather would, merged: the whole call's result."""
    from litetopk.ops import fp8_mqa_topk, merge_topk
    q, kv, kv_scale, weights, ks, ke = (x.cuda() for x in _indexer_inputs(2, T=7, S=300))
    bounds = [0, 37, 150, 151, 300]
    for k in (8, 64, 512):
        want_i, _ = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k)
        values, indices = [], []
        for lo, hi in zip(bounds, bounds[1:]):
            local_ks = torch.clamp(ks - lo, 0, hi - lo)
            local_ke = torch.maximum(torch.clamp(ke - lo, 0, hi - lo), local_ks)
            i, v = fp8_mqa_topk(q, (kv[lo:hi], kv_scale[lo:hi]), weights, local_ks, local_ke, k)
            shift = (local_ks + lo - ks).view(-1, 1)
            indices.append(torch.where(i >= 0, i + shift, i))
            values.append(v)
        got_i, _ = merge_topk(torch.stack(values).permute(1, 0, 2),
                              torch.stack(indices).permute(1, 0, 2), k)
        assert _same_sets(got_i.cpu(), want_i.cpu()), k


# ---- litetopk.distributed on gloo ----

def _scores(seed):
    """[3, 300] scores with ties, NaN and +-inf."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(-20, 20, (3, 300), generator=g).float()
    scores[0, ::17] = float("nan")
    scores[1, 5] = float("inf")
    scores[2, 100:140] = 3.0
    return scores


def _indexer_inputs(seed, T=7, S=300, H=32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, H, 128, generator=g).to(torch.float8_e4m3fn)
    kv = torch.randn(S, 128, generator=g).to(torch.float8_e4m3fn)
    kv_scale = torch.rand(S, generator=g) + 0.5
    weights = torch.randn(T, H, generator=g) / H ** 0.5
    ks = torch.tensor([0, 0, 40, 100, 150, 299, 10][:T], dtype=torch.int32)
    ke = torch.tensor([300, 1, 260, 151, 150, 300, 90][:T], dtype=torch.int32)
    return q, kv, kv_scale, weights, ks, ke


def _paged_cache(token_keys, token_scales):
    """A paged cache (DeepGEMM's layout) holding request b's tokens token_keys[b] [n_b, 128]
    (e4m3 bytes) at positions 0 .. n_b - 1: (kv_cache, block_table) as torch tensors."""
    block = 64
    used = [max(1, -(-len(keys) // block)) for keys in token_keys]
    keys = np.zeros((sum(used) * block, 128), np.uint8)
    scales = np.ones(sum(used) * block, np.float32)
    table = np.full((len(token_keys), max(used)), -1, np.int32)
    at = 0
    for b, (k_b, s_b) in enumerate(zip(token_keys, token_scales)):
        keys[at * block:at * block + len(k_b)] = k_b
        scales[at * block:at * block + len(k_b)] = s_b
        table[b, :used[b]] = np.arange(at, at + used[b])
        at += used[b]
    return torch.from_numpy(pack_paged_cache(keys, scales)), torch.from_numpy(table)


def _same_sets(a, b):
    return torch.equal(a.sort(dim=1).values, b.sort(dim=1).values)


def _worker(rank, world, init_file, bounds):
    import torch.distributed as dist

    import litetopk.distributed as D
    from litetopk.ops import fp8_mqa_topk, fp8_paged_mqa_topk, topk
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        lo, hi = bounds[rank], bounds[rank + 1]
        # Column-sharded select, deterministic: equal to the single-process call exactly.
        scores = _scores(1)
        for k in (1, 16, 120, 400):
            for largest in (True, False):
                want_i, want_v = topk(scores, k, largest=largest, sorted=True, deterministic=True)
                got_i, got_v = D.topk_sharded(scores[:, lo:hi], k, lo, largest=largest,
                                              sorted=True, deterministic=True)
                assert torch.equal(got_i, want_i), (rank, k, largest)
                assert torch.equal(got_v.isnan(), want_v.isnan())
                assert torch.equal(got_v.nan_to_num(), want_v.nan_to_num())

        # The prefill indexer over key shards (the CPU reference on each rank).
        q, kv, kv_scale, weights, ks, ke = _indexer_inputs(2)
        for k in (8, 64, 512):
            want_i, want_v = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k)
            got_i, got_v = D.fp8_mqa_topk_sharded(q, (kv[lo:hi], kv_scale[lo:hi]), weights, ks,
                                                  ke, k, lo, sorted=True)
            assert _same_sets(got_i, want_i), (rank, k)
            order = want_v.nan_to_num(nan=-float("inf")).sort(dim=1, descending=True).values
            assert torch.equal(got_v.nan_to_num(nan=-float("inf")), order), (rank, k)

        # The decode indexer over token shards of a paged cache, next_n 1 and 2.
        rng = np.random.default_rng(5)
        contexts = [300, 37, 0, 150]
        keys = [fp8.random_e4m3(rng, (n, 128)) for n in contexts]
        key_scales = [(rng.random(n) + 0.5).astype(np.float32) for n in contexts]
        whole_cache, whole_table = _paged_cache(keys, key_scales)
        local_cache, local_table = _paged_cache([x[lo:hi] for x in keys],
                                                [x[lo:hi] for x in key_scales])
        held = torch.tensor([len(x[lo:hi]) for x in keys], dtype=torch.int32)
        for next_n in (1, 2):
            q = torch.from_numpy(fp8.random_e4m3(rng, (len(contexts), next_n, 32, 128)))
            q = q.view(torch.float8_e4m3fn)
            weights = torch.from_numpy(rng.standard_normal((len(contexts) * next_n, 32))
                                       .astype(np.float32))
            lens = torch.tensor(contexts, dtype=torch.int32)
            for k in (4, 100):
                want_i, _ = fp8_paged_mqa_topk(q, whole_cache, weights, lens, whole_table,
                                               whole_table.shape[1] * 64, k)
                got_i, _ = D.fp8_paged_mqa_topk_sharded(q, local_cache, weights, lens,
                                                        local_table, local_table.shape[1] * 64,
                                                        k, lo, held)
                assert _same_sets(got_i, want_i), (rank, next_n, k)
    finally:
        dist.destroy_process_group()


@needs_torch
@pytest.mark.parametrize("bounds", [[0, 140, 300], [0, 0, 151, 300], [0, 37, 299, 300]],
                         ids=["two-uneven", "three-one-empty", "three-tiny-tail"])
def test_distributed_gloo_equals_single_process(tmp_path, bounds):
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world = len(bounds) - 1
    init_file = os.path.join(tmp_path, "init")
    mp.spawn(_worker, args=(world, init_file, bounds), nprocs=world, join=True)
