#!/usr/bin/env python3
"""Decode attention on Llama-3.1-8B shapes: litetopk sparse decode (2-bit key scan; top-delta or
bounded-mass blocks), litetopk dense flash-decoding and torch SDPA, measured in the same run.

Shapes: 32 query heads, 8 KV heads (--q-heads, --kv-heads: a GQA group of 1 to 16), d = 128,
fp16 (--dtype bf16 for a bf16 cache and query), BS = 128 (--block-size). The sequence holds
context - 50 tokens, so the open block of the sparse cache is not empty. Workloads (--patterns),
made on the GPU with torch after the generators of testkit/decode_workload.h (the same constants,
torch's random numbers): synthetic (sinks, a local window, needles, a heavy tail) at B in {1, 8}
x context in {16K, 32K, 128K, 256K}; spread (mass over a quarter of the tokens), passages (8 hot
passages) and rope (synthetic with RoPE-rotated keys) at 1 x {32K, 128K, 256K} and 8 x 128K.
Sparse rows: top-delta at delta in {5, 7, 9}, bounded mass at mass_target in {0.01, 0.005}
(each selecting as asked: read_all_when_small off), and "every block" (delta = inf: no scan, the
in-kernel dense fallback that DecodeOptions::read_all_when_small dispatches to on small sizes);
the "dispatch" column says what the default options would run. The sparse cache comes from
litetopk's GPU converter (litetopk.ops.SparseKvCache.fill_from_dense), checked bit for bit at
B = 1 against a torch implementation of the quantization rule of include/litetopk/sparse_decode.h
in this file. litetopk runs through its torch ops (litetopk.ops), from the installed package
(`pip install .`) or python/ of this repository.

--split-sweep T1,T2,... instead times dense, sparse every block and sparse delta 5 with the
splits fixed at each number of tokens (DecodeOptions.blocks_per_split), the measurements of the
split plan (src/heuristics/decode_heuristics.h).

Timing: every path (SDPA, dense, each sparse row) is captured once in a CUDA graph and the graph
is replayed; CUDA events, median of --iters after --warmup. torch SDPA:
scaled_dot_product_attention(q [B, Hq, 1, D], k/v [B, Hkv, S, D], enable_gqa=True), backend chosen
by torch. Reports ms, GB/s (bytes the kernel must read over time: dense 512 B per token per KV
head; sparse every code and scale, plus codes, residuals, values and scales of the kept blocks
and the open block's keys and values), the kept fraction of full blocks (from kept_mask),
speed-up vs SDPA, and the relative L2 error of each output against an fp32 torch reference over
the original keys. Writes JSON (--out) and a markdown table (--md), and prints the table last.
The default run is sized to finish within three minutes on an H200.
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
Q_HEADS, KV_HEADS = 32, 8  # --q-heads, --kv-heads (configure)
DTYPE = torch.float16  # --dtype
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
SMALLEST_SUBNORMAL = {torch.float16: 2.0 ** -24, torch.bfloat16: 2.0 ** -133}
TAIL_SHORTFALL = 50  # tokens = context - 50
PATTERNS = ("synthetic", "spread", "passages", "rope")
SYNTHETIC_SHAPES = [(b, s * KI) for b in (1, 8) for s in (16, 32, 128, 256)]
OTHER_SHAPES = [(1, 32 * KI), (1, 128 * KI), (1, 256 * KI), (8, 128 * KI)]
SELECTIONS = (("delta", 5.0), ("delta", 7.0), ("delta", 9.0), ("mass", 0.01), ("mass", 0.005),
              ("delta", math.inf))

# testkit/decode_workload.cpp's constants.
BULK_LOGIT_STD = 1.5
QUERY_NOISE = 0.25
SINK_OFFSETS = {"synthetic": (16.0, 15.0, 14.0, 13.5), "spread": (8.0, 7.5, 7.0, 6.5),
                "passages": (11.0, 10.0, 9.0, 9.0)}
LOCAL_WINDOW = 64
LOCAL_RANGE = {"synthetic": (14.0, 9.0), "spread": (6.0, 3.0), "passages": (10.0, 6.0)}
NEEDLES, NEEDLE_LOW, NEEDLE_HIGH = 6, 14.5, 16.5
HEAVY_RATE, HEAVY_MEAN, HEAVY_CAP = 1.0 / 32.0, 2.5, 13.0
WARM_RATE, WARM_LOW, WARM_HIGH = 0.25, 2.0, 6.0
PASSAGES, PASSAGE_TOKENS, PASSAGE_MEAN, PASSAGE_STD = 8, 512, 8.0, 1.0
ROPE_THETA, ROPE_RELEVANT_PAIRS = 500000.0, 16
OUTLIER_CHANNELS, OUTLIER_FACTOR = 4, 5.0


def logit_offsets(pattern, pairs, tokens, gen):
    """[pairs, tokens] logit offsets above the bulk (testkit/decode_workload.h's patterns)."""
    dev = "cuda"
    offset = torch.zeros(pairs, tokens, device=dev)
    kind = "synthetic" if pattern == "rope" else pattern
    sinks = min(4, tokens)
    local_begin = max(sinks, tokens - LOCAL_WINDOW)
    if kind == "synthetic":
        heavy = torch.rand(pairs, tokens, device=dev, generator=gen) < HEAVY_RATE
        exp = torch.empty(pairs, tokens, device=dev).exponential_(1.0 / HEAVY_MEAN, generator=gen)
        offset = torch.where(heavy, exp.clamp(max=HEAVY_CAP), offset)
        needles = min(NEEDLES, (local_begin - sinks) // 16)
        if needles > 0:
            pos = torch.randint(sinks, local_begin, (pairs, needles), device=dev, generator=gen)
            val = NEEDLE_LOW + (NEEDLE_HIGH - NEEDLE_LOW) * torch.rand(
                pairs, needles, device=dev, generator=gen)
            offset.scatter_(1, pos, val)
    elif kind == "spread":
        warm = torch.rand(pairs, tokens, device=dev, generator=gen) < WARM_RATE
        val = WARM_LOW + (WARM_HIGH - WARM_LOW) * torch.rand(pairs, tokens, device=dev,
                                                             generator=gen)
        offset = torch.where(warm, val, offset)
    else:
        span = min(PASSAGE_TOKENS, tokens // (4 * PASSAGES))
        if span > 0:
            starts = torch.randint(0, tokens - span + 1, (pairs, PASSAGES), device=dev,
                                   generator=gen)
            pos = (starts[:, :, None] + torch.arange(span, device=dev)).reshape(pairs, -1)
            val = PASSAGE_MEAN + PASSAGE_STD * torch.randn(pos.shape, device=dev, generator=gen)
            offset.scatter_(1, pos, val)
    newest, oldest = LOCAL_RANGE[kind]
    t = torch.arange(local_begin, tokens, device=dev, dtype=torch.float32)
    age = (tokens - 1 - t) / (LOCAL_WINDOW - 1)
    offset[:, local_begin:] = newest - (newest - oldest) * age
    offset[:, :sinks] = torch.tensor(SINK_OFFSETS[kind][:sinks], device=dev)
    return offset


def rope(x, positions):
    """x [..., n, D] rotated at positions [n] (pairs (i, i + D/2), theta_i = 500000^(-2i/D))."""
    half = D // 2
    inv = ROPE_THETA ** (-2.0 * torch.arange(half, device=x.device, dtype=torch.float64) / D)
    angle = positions.double()[:, None] * inv[None, :]
    c, s = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


def make_workload(pattern, batch, tokens, seed):
    """q [B, Q_HEADS, D], keys and values [B, KV_HEADS, tokens, D] of DTYPE, one pattern, on the
    GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    scale = 1.0 / math.sqrt(D)
    group = Q_HEADS // KV_HEADS
    pairs = batch * KV_HEADS
    c = torch.exp(0.5 * torch.randn(pairs, D, device=dev, generator=gen))
    outliers = torch.randint(0, D, (pairs, OUTLIER_CHANNELS), device=dev, generator=gen)
    for i in range(OUTLIER_CHANNELS):
        c.scatter_(1, outliers[:, i:i + 1], c.gather(1, outliers[:, i:i + 1]) * OUTLIER_FACTOR)
    u = torch.randn(pairs, D, device=dev, generator=gen)
    if pattern == "rope":  # the relevance direction on the lowest-frequency rotary pairs only
        keep = torch.zeros(D, device=dev)
        keep[D // 2 - ROPE_RELEVANT_PAIRS:D // 2] = 1
        keep[D - ROPE_RELEVANT_PAIRS:] = 1
        u = u * keep
    u = F.normalize(u, dim=1)
    eps = torch.randn(pairs, group, D, device=dev, generator=gen) / math.sqrt(D)
    direction = F.normalize(u[:, None, :] + QUERY_NOISE * eps, dim=2)
    beta = BULK_LOGIT_STD / (scale * torch.sqrt((direction ** 2 * c[:, None, :] ** 2).sum(2)))
    q = (beta[:, :, None] * direction)
    gain = (scale * beta * (direction * u[:, None, :]).sum(2)).mean(1)  # [pairs]
    a = logit_offsets(pattern, pairs, tokens, gen) / gain[:, None]  # [pairs, tokens]
    keys = torch.empty(pairs, tokens, D, dtype=DTYPE, device=dev)
    values = torch.empty_like(keys)
    step = 16 * KI
    for p0 in range(pairs):
        for t0 in range(0, tokens, step):
            t1 = min(tokens, t0 + step)
            n = torch.randn(t1 - t0, D, device=dev, generator=gen)
            k = c[p0] * n + a[p0, t0:t1, None] * u[p0]
            if pattern == "rope":
                k = rope(k, torch.arange(t0, t1, device=dev))
            keys[p0, t0:t1] = k.to(DTYPE)
            values[p0, t0:t1] = torch.randn(t1 - t0, D, device=dev, generator=gen).to(DTYPE)
    if pattern == "rope":
        q = rope(q, torch.full((group,), float(tokens), device=dev))
    q = q.reshape(batch, Q_HEADS, D).to(DTYPE)
    return q, keys.view(batch, KV_HEADS, tokens, D), values.view(batch, KV_HEADS, tokens, D)


def torch_quantize(keys, values, block_size, max_blocks):
    """The exact quantization rule of include/litetopk/sparse_decode.h in torch (contiguous
    layout): codes, scales, residuals, values, tail keys."""
    B, H, S, _ = keys.shape
    nf, nt = S // block_size, S % block_size
    k = keys[:, :, :nf * block_size].float().view(B, H, nf, block_size, D)
    amax = k.abs().amax(dim=3)
    s = (amax / 1.5).to(DTYPE)
    tiny = torch.tensor(SMALLEST_SUBNORMAL[DTYPE], dtype=DTYPE, device=keys.device)
    s = torch.where((s == 0) & (amax > 0), tiny, s)
    sf = s.float()[:, :, :, None, :]
    x = torch.where(sf > 0, k / sf, torch.zeros_like(k))
    q = (x >= -1).to(torch.uint8) + (x >= 0).to(torch.uint8) + (x >= 1).to(torch.uint8)
    cell = torch.floor((x - (q.float() - 1.5)) * 256.0).clamp(-128, 127)
    residual = cell.to(torch.int8)
    q4 = q.view(B, H, nf, block_size, D // 4, 4)
    packed = q4[..., 0] | (q4[..., 1] << 2) | (q4[..., 2] << 4) | (q4[..., 3] << 6)
    codes = torch.zeros(B, H, max_blocks, block_size, D // 4, dtype=torch.uint8, device=keys.device)
    scales = torch.zeros(B, H, max_blocks, D, dtype=DTYPE, device=keys.device)
    residuals = torch.zeros(B, H, max_blocks, block_size, D, dtype=torch.uint8, device=keys.device)
    vals = torch.zeros(B, H, max_blocks, block_size, D, dtype=DTYPE, device=keys.device)
    codes[:, :, :nf] = packed
    scales[:, :, :nf] = s
    residuals[:, :, :nf] = residual.view(torch.uint8)
    vals.view(B, H, max_blocks * block_size, D)[:, :, :S] = values
    tail = torch.zeros(B, H, block_size, D, dtype=DTYPE, device=keys.device)
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


def timed(run, args):
    """Median ms of run() replayed from a CUDA graph."""
    run()
    torch.cuda.synchronize()
    graph = capture_graph(run)
    median, _ = time_cuda(lambda i: graph.replay(), args.warmup, args.iters)
    return median


def selection_label(rule, value):
    if math.isinf(value):
        return "every block"
    return f"delta {value:g}" if rule == "delta" else f"mass {value:g}"


def shape_workload(pattern, shape, args, progress):
    """The shape's tokens, its progress label and its workload (q, keys, values)."""
    batch, context = shape
    tokens = context - TAIL_SHORTFALL
    where = f"{pattern} B={batch} context={context // KI}K"
    progress(f"{where}: workload")
    q, keys, values = make_workload(pattern, batch, tokens,
                                    args.seed + batch * 1000 + context + PATTERNS.index(pattern))
    return tokens, where, q, keys, values


def bench_shape(pattern, shape, args, progress, state):
    batch, context = shape
    bs = args.block_size
    tokens, where, q, keys, values = shape_workload(pattern, shape, args, progress)
    ref = reference(q, keys, values)
    rows = []
    lengths = torch.full((batch,), tokens, dtype=torch.int32, device="cuda")
    scale = 1.0 / math.sqrt(D)
    dense_bytes = batch * KV_HEADS * tokens * 4 * D

    # torch SDPA.
    out_sdpa = sdpa(q, keys, values)
    sdpa_ms = timed(lambda: sdpa(q, keys, values), args)
    base = dict(pattern=pattern, batch=batch, context=context, tokens=tokens, sdpa_ms=sdpa_ms)
    rows.append(dict(base, kernel="torch SDPA (enable_gqa)", selection=None, ms=sdpa_ms,
                     gbps=dense_bytes / sdpa_ms / 1e6, kept_fraction=1.0, speedup=1.0,
                     rel_l2=rel_l2(out_sdpa, ref)))

    # litetopk dense.
    out_dense = torch.empty(batch, Q_HEADS, D, dtype=DTYPE, device="cuda")
    split = args.blocks_per_split
    run_dense = lambda: litetopk.ops.dense_decode(  # noqa: E731
        q, keys, values, lengths, scale, out=(out_dense, None), blocks_per_split=split)
    dense_ms = timed(run_dense, args)
    rows.append(dict(base, kernel="litetopk dense", selection=None, ms=dense_ms,
                     gbps=dense_bytes / dense_ms / 1e6, kept_fraction=1.0,
                     speedup=sdpa_ms / dense_ms, rel_l2=rel_l2(out_dense, ref)))
    progress(f"{where}: SDPA {sdpa_ms:.4f} ms, dense {dense_ms:.4f} ms")

    # The sparse cache: litetopk's GPU converter, checked against the torch rule at B = 1.
    max_blocks = (tokens + bs - 1) // bs
    cache = litetopk.ops.SparseKvCache.empty(batch, KV_HEADS, max_blocks, bs, DTYPE, "cuda")
    cache.fill_from_dense(keys, values, lengths)
    torch.cuda.synchronize()
    nf, nt = tokens // bs, tokens % bs
    if batch == 1:
        codes, scales, residuals, vals, tail = torch_quantize(keys, values, bs, max_blocks)
        flat = lambda x: x.view(batch, KV_HEADS, max_blocks * bs, D)  # noqa: E731
        same = (torch.equal(cache.key_codes[:, :, :nf], codes[:, :, :nf])
                and torch.equal(cache.key_scales[:, :, :nf], scales[:, :, :nf])
                and torch.equal(cache.key_residuals.view(torch.uint8)[:, :, :nf],
                                residuals.view(torch.uint8)[:, :, :nf])
                and torch.equal(flat(cache.values)[:, :, :tokens], flat(vals)[:, :, :tokens])
                and torch.equal(cache.tail_keys[:, :, :nt], tail[:, :, :nt]))
        state.setdefault("converter_matches_torch", []).append(same)
        del codes, scales, residuals, vals, tail
    sparse_fixed = (batch * KV_HEADS * tokens * D // 4 + batch * KV_HEADS * nf * D * 2)
    # What the default options (read_all_when_small) would run at this size.
    dispatch = cache.reads_all(q)
    for rule, value in SELECTIONS:
        out_sparse = torch.empty(batch, Q_HEADS, D, dtype=DTYPE, device="cuda")
        mask = torch.zeros(batch, KV_HEADS, max_blocks, dtype=torch.uint8, device="cuda")
        delta = value if rule == "delta" else 5.0
        mass = value if rule == "mass" else None
        run_sparse = lambda: cache.decode(  # noqa: E731
            q, delta, scale, out=(out_sparse, None, mask), blocks_per_split=split,
            mass_target=mass, read_all_when_small=False)
        run_sparse()
        torch.cuda.synchronize()
        kept = mask[:, :, :nf].sum().item()
        kept_fraction = kept / max(1, batch * KV_HEADS * nf)
        read = (sparse_fixed * (0 if math.isinf(value) else 1)
                + kept * bs * (D + 2 * D + D // 4) + kept * D * 2
                + batch * KV_HEADS * nt * 4 * D)
        error = rel_l2(out_sparse, ref)
        sparse_ms = timed(run_sparse, args)
        label = selection_label(rule, value)
        rows.append(dict(base, kernel="litetopk sparse", selection=label, ms=sparse_ms,
                         gbps=read / sparse_ms / 1e6, kept_fraction=kept_fraction,
                         speedup=sdpa_ms / sparse_ms, rel_l2=error, bytes_read=read,
                         dispatch="every block" if dispatch else "as asked"))
        progress(f"{where} {label}: {sparse_ms:.4f} ms, kept {kept_fraction:.3f}, "
                 f"rel L2 {error:.2e}")
    return rows


def sweep_shape(pattern, shape, args, progress, split_tokens):
    """--split-sweep: SDPA, then dense, sparse every block and sparse delta 5 with DecodeOptions
    blocks_per_split set for each tokens-per-split value (dense: tokens / 64 tiles; sparse:
    tokens / BS blocks), read_all_when_small off."""
    batch, context = shape
    bs = args.block_size
    tokens, where, q, keys, values = shape_workload(pattern, shape, args, progress)
    lengths = torch.full((batch,), tokens, dtype=torch.int32, device="cuda")
    scale = 1.0 / math.sqrt(D)
    sdpa_ms = timed(lambda: sdpa(q, keys, values), args)
    base = dict(pattern=pattern, batch=batch, context=context, tokens=tokens, sdpa_ms=sdpa_ms,
                gbps=0.0, kept_fraction=1.0, rel_l2=float("nan"))
    rows = [dict(base, kernel="torch SDPA (enable_gqa)", selection=None, ms=sdpa_ms, speedup=1.0)]
    max_blocks = (tokens + bs - 1) // bs
    cache = litetopk.ops.SparseKvCache.empty(batch, KV_HEADS, max_blocks, bs, DTYPE, "cuda")
    cache.fill_from_dense(keys, values, lengths)
    out = torch.empty(batch, Q_HEADS, D, dtype=DTYPE, device="cuda")
    mask = torch.zeros(batch, KV_HEADS, max_blocks, dtype=torch.uint8, device="cuda")
    for split in split_tokens:
        tiles, blocks = max(1, split // 64), max(1, split // bs)
        ms = timed(lambda: litetopk.ops.dense_decode(  # noqa: E731
            q, keys, values, lengths, scale, out=(out, None), blocks_per_split=tiles), args)
        rows.append(dict(base, kernel=f"litetopk dense, split {split}", selection=None, ms=ms,
                         speedup=sdpa_ms / ms))
        for delta in (math.inf, 5.0):
            ms = timed(lambda: cache.decode(  # noqa: E731
                q, delta, scale, out=(out, None, mask), blocks_per_split=blocks,
                read_all_when_small=False), args)
            rows.append(dict(base, kernel=f"litetopk sparse, split {split}",
                             selection=selection_label("delta", delta), ms=ms,
                             speedup=sdpa_ms / ms))
        progress(f"{where} split {split}: " + ", ".join(f"{r['ms']:.4f}" for r in rows[-3:]))
    return rows


def markdown_table(rows):
    lines = ["| workload | B | context | kernel | selection | ms | GB/s | kept | vs SDPA | rel L2 |"
             " default options |",
             "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['pattern']} | {r['batch']} | {r['context'] // KI}K | {r['kernel']} | "
                     f"{r['selection'] or '-'} | {r['ms']:.4f} | {r['gbps']:.0f} | "
                     f"{r['kept_fraction']:.3f} | {r['speedup']:.2f}x | {r['rel_l2']:.2e} | "
                     f"{r.get('dispatch', '-')} |")
    return "\n".join(lines) + "\n"


def configure(args):
    """The heads and dtype of every workload (module globals, like the shape constants)."""
    global Q_HEADS, KV_HEADS, DTYPE
    group = args.q_heads // args.kv_heads if args.kv_heads > 0 else 0
    if group < 1 or group > 16 or args.q_heads % args.kv_heads:
        sys.exit(f"--q-heads {args.q_heads} and --kv-heads {args.kv_heads}: the query heads must be "
                 "1 to 16 times the KV heads")
    Q_HEADS, KV_HEADS, DTYPE = args.q_heads, args.kv_heads, DTYPES[args.dtype]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "decode", "BxS", "1x131072", iters=50, warmup=10)
    parser.add_argument("--block-size", type=int, default=128, choices=(128, 256))
    parser.add_argument("--blocks-per-split", type=int, default=0,
                        help="DecodeOptions.blocks_per_split (0: the kernel chooses)")
    parser.add_argument("--patterns", default=",".join(PATTERNS),
                        help="workloads, comma-separated: " + ", ".join(PATTERNS))
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="fp16",
                        help="the cache's and the query's dtype")
    parser.add_argument("--q-heads", type=int, default=Q_HEADS, help="query heads")
    parser.add_argument("--kv-heads", type=int, default=KV_HEADS,
                        help="KV heads (q-heads / kv-heads: a GQA group of 1 to 16)")
    parser.add_argument("--split-sweep", default="",
                        help="tokens per split, comma-separated: time dense, sparse every block "
                             "and sparse delta 5 at each instead of the usual rows")
    args = parser.parse_args()
    configure(args)
    require_cuda("decode_bench.py")
    runs = []
    for pattern in args.patterns.split(","):
        if pattern not in PATTERNS:
            sys.exit(f"unknown pattern {pattern!r} (one of {', '.join(PATTERNS)})")
        shapes = [] if args.only_shapes else (SYNTHETIC_SHAPES if pattern == "synthetic"
                                              else OTHER_SHAPES)
        runs += [(pattern, shape) for shape in shapes + list(args.shapes)]
    sweep = [int(x) for x in args.split_sweep.split(",") if x]
    progress = Progress(len(runs) * ((1 + len(sweep)) if sweep else (2 + len(SELECTIONS))))
    rows, state = [], {}
    for pattern, shape in runs:
        try:
            if sweep:
                rows.extend(sweep_shape(pattern, shape, args, progress, sweep))
            else:
                rows.extend(bench_shape(pattern, shape, args, progress, state))
        except Exception:  # noqa: BLE001 (report the row, run the others)
            traceback.print_exc()
            print(f"{pattern} shape {shape} failed; continuing", file=sys.stderr)
        torch.cuda.empty_cache()
    table = markdown_table(rows)
    record = result_record("decode attention (sparse, dense, torch SDPA)", args, rows,
                           block_size=args.block_size, blocks_per_split=args.blocks_per_split,
                           dtype=args.dtype, q_heads=Q_HEADS, kv_heads=KV_HEADS,
                           converter_matches_torch=state.get("converter_matches_torch"))
    write_results(record, table, args, f"## Decode attention on the H200 ({Q_HEADS} query heads, "
                                       f"{KV_HEADS} KV heads, d {D}, {args.dtype})")
    print_results(table, args)


if __name__ == "__main__":
    main()
