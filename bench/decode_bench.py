#!/usr/bin/env python3
"""Decode attention on Llama-3.1-8B shapes: litetopk sparse decode (2-bit key scan + top-delta
blocks), litetopk dense flash-decoding and torch SDPA, measured in the same run.

Shapes: 32 query heads, 8 KV heads, d = 128, fp16; B in {1, 8}; context in {16K, 32K, 128K,
256K} (the sequence holds context - 50 tokens, so the open block of the sparse cache is not
empty); sparse at delta in {5, 7}, BS = 128 (--block-size). The workload is pattern (a) of
src/cpu/sparse_decode_workload.cpp made on the GPU with torch (sinks, a local window, needles, a
heavy tail; the same constants, torch's random numbers). The sparse cache comes from litetopk's
GPU converter (litetopk.ops.SparseKvCache.fill_from_dense), checked bit for bit against a torch
implementation of the exact quantization rule of include/litetopk/sparse_decode.h in this file.
litetopk runs through its torch ops (litetopk.ops), from the installed package (`pip install .`)
or python/ of this repository.

Timing: CUDA events, median of --iters after --warmup; for B = 1 each of the three is captured in
a CUDA graph and the graph is replayed (launch overhead matters at tens of microseconds). torch
SDPA: scaled_dot_product_attention(q [B, 32, 1, D], k/v [B, 8, S, D], enable_gqa=True) (no
repeat_interleave copy), backend chosen by torch. Reports ms, GB/s (bytes the kernel must read
over time: dense 512 B per token per KV head; sparse every code and scale, plus codes, residuals,
values and scales of the kept blocks and the open block's keys and values), the kept fraction of
full blocks (from kept_mask), speed-up vs SDPA, and the relative L2 error of each output against
an fp32 torch reference over the original keys. Writes JSON (--out) and a markdown table (--md).
"""
import argparse
import math
import sys
import traceback

import torch
import torch.nn.functional as F

from litetopk_bench_common import (Progress, add_common_arguments, capture_graph, litetopk,
                                   print_results, require_cuda, result_record, time_cuda,
                                   write_results)

D = 128
KI = 1024
Q_HEADS, KV_HEADS = 32, 8
TAIL_SHORTFALL = 50  # tokens = context - 50
DEFAULT_SHAPES = [(b, s * KI) for b in (1, 8) for s in (16, 32, 128, 256)]
DELTAS = (5.0, 7.0)

# Pattern (a) constants (src/cpu/sparse_decode_workload.cpp).
BULK_LOGIT_STD = 1.5
QUERY_NOISE = 0.25
SINK_OFFSETS = (16.0, 15.0, 14.0, 13.5)
LOCAL_WINDOW, LOCAL_NEWEST, LOCAL_OLDEST = 64, 14.0, 9.0
NEEDLES, NEEDLE_LOW, NEEDLE_HIGH = 6, 14.5, 16.5
HEAVY_RATE, HEAVY_MEAN, HEAVY_CAP = 1.0 / 32.0, 2.5, 13.0
OUTLIER_CHANNELS, OUTLIER_FACTOR = 4, 5.0


def make_workload(batch, tokens, seed):
    """Pattern (a) on the GPU: q [B, 32, D], keys and values [B, 8, tokens, D] fp16."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    scale = 1.0 / math.sqrt(D)
    group = Q_HEADS // KV_HEADS
    pairs = batch * KV_HEADS
    c = torch.exp(0.5 * torch.randn(pairs, D, device=dev, generator=gen))
    outliers = torch.randint(0, D, (pairs, OUTLIER_CHANNELS), device=dev, generator=gen)
    for i in range(OUTLIER_CHANNELS):
        c.scatter_(1, outliers[:, i:i + 1], c.gather(1, outliers[:, i:i + 1]) * OUTLIER_FACTOR)
    u = F.normalize(torch.randn(pairs, D, device=dev, generator=gen), dim=1)
    eps = torch.randn(pairs, group, D, device=dev, generator=gen) / math.sqrt(D)
    direction = F.normalize(u[:, None, :] + QUERY_NOISE * eps, dim=2)
    beta = BULK_LOGIT_STD / (scale * torch.sqrt((direction ** 2 * c[:, None, :] ** 2).sum(2)))
    q = (beta[:, :, None] * direction)
    gain = (scale * beta * (direction * u[:, None, :]).sum(2)).mean(1)  # [pairs]
    # Logit offsets per token.
    offset = torch.zeros(pairs, tokens, device=dev)
    heavy = torch.rand(pairs, tokens, device=dev, generator=gen) < HEAVY_RATE
    exp = torch.empty(pairs, tokens, device=dev).exponential_(1.0 / HEAVY_MEAN, generator=gen)
    offset = torch.where(heavy, exp.clamp(max=HEAVY_CAP), offset)
    sinks = min(4, tokens)
    local_begin = max(sinks, tokens - LOCAL_WINDOW)
    needles = min(NEEDLES, (local_begin - sinks) // 16)
    if needles > 0:
        pos = torch.randint(sinks, local_begin, (pairs, needles), device=dev, generator=gen)
        val = NEEDLE_LOW + (NEEDLE_HIGH - NEEDLE_LOW) * torch.rand(pairs, needles, device=dev,
                                                                 generator=gen)
        offset.scatter_(1, pos, val)
    t = torch.arange(local_begin, tokens, device=dev, dtype=torch.float32)
    age = (tokens - 1 - t) / (LOCAL_WINDOW - 1)
    offset[:, local_begin:] = LOCAL_NEWEST - (LOCAL_NEWEST - LOCAL_OLDEST) * age
    offset[:, :sinks] = torch.tensor(SINK_OFFSETS[:sinks], device=dev)
    a = offset / gain[:, None]  # [pairs, tokens]
    keys = torch.empty(pairs, tokens, D, dtype=torch.float16, device=dev)
    values = torch.empty_like(keys)
    step = 16 * KI
    for p0 in range(pairs):
        for t0 in range(0, tokens, step):
            t1 = min(tokens, t0 + step)
            n = torch.randn(t1 - t0, D, device=dev, generator=gen)
            keys[p0, t0:t1] = (c[p0] * n + a[p0, t0:t1, None] * u[p0]).half()
            values[p0, t0:t1] = torch.randn(t1 - t0, D, device=dev, generator=gen).half()
    q = q.reshape(batch, Q_HEADS, D).half()
    return q, keys.view(batch, KV_HEADS, tokens, D), values.view(batch, KV_HEADS, tokens, D)


def torch_quantize(keys, values, block_size, max_blocks):
    """The exact quantization rule of include/litetopk/sparse_decode.h in torch (contiguous
    layout): codes, scales, residuals, values, tail keys."""
    B, H, S, _ = keys.shape
    nf, nt = S // block_size, S % block_size
    k = keys[:, :, :nf * block_size].float().view(B, H, nf, block_size, D)
    amax = k.abs().amax(dim=3)
    s = (0.5 * amax).half()
    tiny = torch.tensor(2.0 ** -24, dtype=torch.float16, device=keys.device)
    s = torch.where((s == 0) & (amax > 0), tiny, s)
    sf = s.float()[:, :, :, None, :]
    x = torch.where(sf > 0, k / sf, torch.zeros_like(k))
    q = (x >= -1).to(torch.uint8) + (x >= 0).to(torch.uint8) + (x >= 1).to(torch.uint8)
    residual = (x - (q.float() - 1.5)).to(torch.float8_e4m3fn)
    q4 = q.view(B, H, nf, block_size, D // 4, 4)
    packed = q4[..., 0] | (q4[..., 1] << 2) | (q4[..., 2] << 4) | (q4[..., 3] << 6)
    codes = torch.zeros(B, H, max_blocks, block_size, D // 4, dtype=torch.uint8, device=keys.device)
    scales = torch.zeros(B, H, max_blocks, D, dtype=torch.float16, device=keys.device)
    residuals = torch.zeros(B, H, max_blocks, block_size, D, dtype=torch.uint8, device=keys.device)
    vals = torch.zeros(B, H, max_blocks, block_size, D, dtype=torch.float16, device=keys.device)
    codes[:, :, :nf] = packed
    scales[:, :, :nf] = s
    residuals[:, :, :nf] = residual.view(torch.uint8)
    vals.view(B, H, max_blocks * block_size, D)[:, :, :S] = values
    tail = torch.zeros(B, H, block_size, D, dtype=torch.float16, device=keys.device)
    tail[:, :, :nt] = keys[:, :, nf * block_size:]
    return codes, scales, residuals, vals, tail


def sdpa(q, keys, values):
    return F.scaled_dot_product_attention(q[:, :, None, :], keys, values, enable_gqa=True)[:, :, 0]


def reference(q, keys, values):
    """fp32 attention over the original keys, one sequence at a time."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    scale = 1.0 / math.sqrt(D)
    group = Q_HEADS // KV_HEADS
    for b in range(q.shape[0]):
        for h in range(KV_HEADS):
            k = keys[b, h].float()
            qq = q[b, h * group:(h + 1) * group].float()
            w = torch.softmax(scale * (qq @ k.T), dim=1)
            out[b, h * group:(h + 1) * group] = w @ values[b, h].float()
    return out


def rel_l2(out, ref):
    return (torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)).item()


def timed(run, batch, args):
    """Median ms of run(): replayed from a CUDA graph for B = 1, launched directly otherwise."""
    run()
    torch.cuda.synchronize()
    if batch == 1:
        graph = capture_graph(run)
        median, _ = time_cuda(lambda i: graph.replay(), args.warmup, args.iters)
        return median
    median, _ = time_cuda(lambda i: run(), args.warmup, args.iters)
    return median


def bench_shape(shape, args, progress, state):
    batch, context = shape
    tokens = context - TAIL_SHORTFALL
    bs = args.block_size
    progress(f"B={batch} context={context // KI}K: workload")
    q, keys, values = make_workload(batch, tokens, args.seed + batch * 1000 + context)
    ref = reference(q, keys, values)
    rows = []
    lengths = torch.full((batch,), tokens, dtype=torch.int32, device="cuda")
    scale = 1.0 / math.sqrt(D)
    dense_bytes = batch * KV_HEADS * tokens * 4 * D

    # torch SDPA.
    out_sdpa = sdpa(q, keys, values)
    sdpa_ms = timed(lambda: sdpa(q, keys, values), batch, args)
    base = dict(batch=batch, context=context, tokens=tokens, sdpa_ms=sdpa_ms)
    rows.append(dict(base, kernel="torch SDPA (enable_gqa)", delta=None, ms=sdpa_ms,
                     gbps=dense_bytes / sdpa_ms / 1e6, kept_fraction=1.0, speedup=1.0,
                     rel_l2=rel_l2(out_sdpa, ref)))

    # litetopk dense.
    out_dense = torch.empty(batch, Q_HEADS, D, dtype=torch.float16, device="cuda")
    split = args.blocks_per_split
    run_dense = lambda: litetopk.ops.dense_decode(  # noqa: E731
        q, keys, values, lengths, scale, out=(out_dense, None), blocks_per_split=split)
    run_dense()
    dense_ms = timed(run_dense, batch, args)
    rows.append(dict(base, kernel="litetopk dense", delta=None, ms=dense_ms,
                     gbps=dense_bytes / dense_ms / 1e6, kept_fraction=1.0,
                     speedup=sdpa_ms / dense_ms, rel_l2=rel_l2(out_dense, ref)))
    progress(f"B={batch} context={context // KI}K: SDPA {sdpa_ms:.4f} ms, dense {dense_ms:.4f} ms")

    # The sparse cache: litetopk's GPU converter, checked against the torch rule on every shape.
    max_blocks = (tokens + bs - 1) // bs
    codes, scales, residuals, vals, tail = torch_quantize(keys, values, bs, max_blocks)
    cache = litetopk.ops.SparseKvCache.empty(batch, KV_HEADS, max_blocks, bs, torch.float16,
                                             "cuda")
    cache.fill_from_dense(keys, values, lengths)
    torch.cuda.synchronize()
    nf, nt = tokens // bs, tokens % bs
    flat = lambda x: x.view(batch, KV_HEADS, max_blocks * bs, D)  # noqa: E731
    same = (torch.equal(cache.key_codes[:, :, :nf], codes[:, :, :nf])
            and torch.equal(cache.key_scales[:, :, :nf], scales[:, :, :nf])
            and torch.equal(cache.key_residuals.view(torch.uint8)[:, :, :nf],
                            residuals[:, :, :nf])
            and torch.equal(flat(cache.values)[:, :, :tokens], flat(vals)[:, :, :tokens])
            and torch.equal(cache.tail_keys[:, :, :nt], tail[:, :, :nt]))
    state.setdefault("converter_matches_torch", []).append(same)
    converter = "litetopk sparse_kv_from_dense"
    sparse_fixed = (batch * KV_HEADS * tokens * D // 4 + batch * KV_HEADS * (tokens // bs) * D * 2)
    for delta in DELTAS:
        out_sparse = torch.empty(batch, Q_HEADS, D, dtype=torch.float16, device="cuda")
        mask = torch.zeros(batch, KV_HEADS, max_blocks, dtype=torch.uint8, device="cuda")
        run_sparse = lambda: cache.decode(  # noqa: E731
            q, delta, scale, out=(out_sparse, None, mask), blocks_per_split=split)
        run_sparse()
        torch.cuda.synchronize()
        nf = tokens // bs
        kept = mask[:, :, :nf].sum().item()
        kept_fraction = kept / max(1, batch * KV_HEADS * nf)
        nt = tokens - nf * bs
        read = (sparse_fixed + kept * bs * (D + 2 * D + D // 4) + kept * D * 2
                + batch * KV_HEADS * nt * 4 * D)
        error = rel_l2(out_sparse, ref)
        sparse_ms = timed(run_sparse, batch, args)
        rows.append(dict(base, kernel="litetopk sparse", delta=delta, ms=sparse_ms,
                         gbps=read / sparse_ms / 1e6, kept_fraction=kept_fraction,
                         speedup=sdpa_ms / sparse_ms, rel_l2=error, bytes_read=read,
                         converter=converter))
        progress(f"B={batch} context={context // KI}K delta={delta}: {sparse_ms:.4f} ms, kept "
                 f"{kept_fraction:.3f}, rel L2 {error:.2e}")
    return rows


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(rows):
    lines = ["| B | context | kernel | delta | ms | GB/s | kept | vs SDPA | rel L2 |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['context'] // KI}K | {r['kernel']} | "
                     f"{fmt(r['delta'], 0)} | {r['ms']:.4f} | {r['gbps']:.0f} | "
                     f"{r['kept_fraction']:.3f} | {r['speedup']:.2f}x | {r['rel_l2']:.2e} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "decode", "BxS", "1x131072", iters=50, warmup=10)
    parser.add_argument("--block-size", type=int, default=128, choices=(128, 256))
    parser.add_argument("--blocks-per-split", type=int, default=0,
                        help="DecodeOptions.blocks_per_split (0: the kernel chooses)")
    args = parser.parse_args()
    require_cuda("decode_bench.py")
    shapes = ([] if args.only_shapes else DEFAULT_SHAPES) + list(args.shapes)
    progress = Progress(len(shapes) * 4)
    rows, state = [], {}
    for shape in shapes:
        try:
            rows.extend(bench_shape(shape, args, progress, state))
        except Exception:  # noqa: BLE001 (report the row, run the others)
            traceback.print_exc()
            print(f"shape {shape} failed; continuing", file=sys.stderr)
        torch.cuda.empty_cache()
    table = markdown_table(rows)
    record = result_record("decode attention (sparse, dense, torch SDPA)", args, rows,
                           block_size=args.block_size, blocks_per_split=args.blocks_per_split,
                           converter_matches_torch=state.get("converter_matches_torch"))
    write_results(record, table, args, "## Decode attention on the H200 (Llama-3.1-8B shapes)")
    print_results(table, args)


if __name__ == "__main__":
    main()
