"""The sparse decode's selection rules through litetopk.ops (CPU tensors, and CUDA tensors when
there is a GPU): the bounded-mass rule reads every block at mass_target 0 and is nested in the
target, the GPU agrees with the CPU reference on its kept blocks' output, the residuals are int8,
the read-all dispatch from sizes, and bad targets raise. Skipped without torch."""
import math

import pytest

from conftest import has_cuda, needs_torch, torch

pytestmark = needs_torch
DEVICES = ["cpu"] + (["cuda"] if has_cuda else [])

if torch is not None:
    from litetopk.ops import SparseKvCache


def peaked_cache(device, batch=2, heads=2, tokens=1500, max_blocks=12, seed=5):
    """A cache whose first tokens of some blocks stand out (so the rules have blocks to skip)."""
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(batch, heads, tokens, 128, generator=gen)
    q = torch.randn(batch, 4 * heads, 128, generator=gen)
    for b in range(batch):
        for h in range(heads):
            direction = q[b, 4 * h:4 * h + 4].mean(0)
            keys[b, h, ::300] += 3.0 * direction / direction.norm() * math.sqrt(128)
    values = torch.randn(batch, heads, tokens, 128, generator=gen)
    lengths = torch.full((batch,), tokens, dtype=torch.int32)
    cache = SparseKvCache.empty(batch, heads, max_blocks, device=device)
    cache.fill_from_dense(keys.half().to(device), values.half().to(device), lengths.to(device))
    return cache, q.half().to(device)


def decode(cache, q, **kwargs):
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    mask = torch.zeros(cache.key_codes.shape[:3], dtype=torch.uint8, device=q.device)
    cache.decode(q, out=(out, None, mask), read_all_when_small=False, **kwargs)
    return out.cpu(), mask.cpu()


@pytest.mark.parametrize("device", DEVICES)
def test_mass_zero_reads_every_block_and_targets_nest(device):
    cache, q = peaked_cache(device)
    assert cache.key_residuals.dtype == torch.int8
    every, every_mask = decode(cache, q, delta=math.inf)
    out, mask = decode(cache, q, mass_target=0.0)
    assert torch.equal(mask, every_mask) and bool(mask.all())
    torch.testing.assert_close(out, every, rtol=1e-5, atol=1e-6)
    previous = mask
    for target in (0.001, 0.01, 0.1, 0.5):
        _, mask = decode(cache, q, mass_target=target)
        assert bool((mask <= previous).all()), target  # a larger target reads a subset
        assert bool(mask[:, :, [0, 10]].all())  # the anchors (block 0 and the last full block)
        previous = mask
    assert int(previous.sum()) < int(every_mask.sum())  # 0.5 skips something here


@pytest.mark.skipif(not has_cuda, reason="needs a GPU")
def test_gpu_mass_matches_cpu_on_the_same_blocks():
    cpu_cache, cpu_q = peaked_cache("cpu")
    gpu_cache, gpu_q = peaked_cache("cuda")
    for target in (0.01, 0.2):
        want, want_mask = decode(cpu_cache, cpu_q, mass_target=target)
        got, got_mask = decode(gpu_cache, gpu_q, mass_target=target)
        if torch.equal(got_mask, want_mask):
            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_read_all_dispatch_and_bad_targets(device):
    cache, q = peaked_cache(device)
    assert cache.reads_all(q)  # 2 x 2 x 12 blocks: far below the scan's threshold
    assert not cache.reads_all(q, read_all_when_small=False)
    assert cache.reads_all(q, mass_target=0.0, read_all_when_small=False)
    assert cache.reads_all(q, delta=math.inf, read_all_when_small=False)
    for bad in (-0.1, 1.0, 2.0):
        with pytest.raises(ValueError, match="mass_target"):
            cache.decode(q, mass_target=bad)
