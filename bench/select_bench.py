#!/usr/bin/env python3
"""Top-k on materialized fp32 rows: torch.topk against litetopk's GPU algorithms, in one process.

For each shape: random normal rows made by torch on the GPU; torch.topk (sorted=False), litetopk
radix, sample-filter (k <= 8192) and auto timed with CUDA events (median of --iters after
--warmup, rotating through several input buffers when one is under 256 MB so that L2 does not
serve the input); litetopk auto verified against torch.topk (equal selected values, indices that
point at them, no duplicates). litetopk runs through its torch op (litetopk.ops.topk, out variant,
algo forced), from the installed package (`pip install .`) or python/ of this repository. Writes
JSON (--out), a markdown table (--md) and, when matplotlib is installed, a PNG bar plot (--png);
prints progress lines, then the table.
"""
import argparse
import math
import os
import sys

import torch

from litetopk_bench_common import (Progress, add_common_arguments, litetopk, print_results,
                                   require_cuda, result_record, time_cuda, write_results)

# (batch, n, k): the targets of the select_topk issue.
DEFAULT_SHAPES = [
    (4096, 200000, 1024),
    (8192, 262144, 2048),
    (256, 524288, 256),
    (64, 131072, 2048),
    (1, 1 << 24, 1024),
    (8, 1 << 20, 8192),
]
SAMPLE_FILTER_MAX_K = 8192
ROTATION_BYTES = 256 << 20
MAX_COPIES = 64
METHODS = ["torch.topk", "radix", "sample-filter", "grid-radix", "auto"]


def make_inputs(batch, n, seed):
    """Enough copies of [batch, n] random normal rows that rotating through them defeats L2."""
    bytes_per_copy = batch * n * 4
    copies = 1 if bytes_per_copy >= ROTATION_BYTES else min(
        MAX_COPIES, math.ceil(ROTATION_BYTES / bytes_per_copy))
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(batch, n, device="cuda", generator=generator) for _ in range(copies)]


def verify(scores, indices, k):
    """'' when litetopk's indices select the same values as torch.topk, else what differs."""
    n = scores.shape[1]
    if bool((indices < 0).any()) or bool((indices >= n).any()):
        return "an index is outside [0, n)"
    sorted_indices = torch.sort(indices, dim=1).values
    if bool((sorted_indices[:, 1:] == sorted_indices[:, :-1]).any()):
        return "a row selects an index twice"
    got = torch.sort(scores.gather(1, indices.long()), dim=1, descending=True).values
    want = torch.sort(torch.topk(scores, k, dim=1, sorted=False).values, dim=1,
                      descending=True).values
    if not torch.equal(got, want):
        rows = (got != want).any(dim=1).nonzero().flatten().tolist()
        return f"selected values differ from torch.topk in {len(rows)} rows (first: {rows[0]})"
    return ""


def bench_shape(batch, n, k, args, progress):
    """One row of results: times of every method, the dispatched algorithm, verification."""
    inputs = make_inputs(batch, n, args.seed)
    indices = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    row = {"batch": batch, "n": n, "k": k, "bytes": batch * n * 4, "copies": len(inputs),
           "dispatched": litetopk.ops.topk_plan(inputs[0], k)["algo"], "ms": {}, "ms_min": {},
           "gbps": {}, "errors": {}}

    def litetopk_run(algo):
        def run(scores):
            litetopk.ops.topk(scores, k, out=(indices, None), algo=algo)
        return run

    def torch_topk(scores):
        torch.topk(scores, k, dim=1, sorted=False)

    methods = [m for m in METHODS if m != "sample-filter" or k <= SAMPLE_FILTER_MAX_K]
    for method in methods:
        progress(f"{method} {batch}x{n} k={k}")
        try:
            run = torch_topk if method == "torch.topk" else litetopk_run(method)
            median, fastest = time_cuda(lambda i: run(inputs[i % len(inputs)]), args.warmup,
                                        args.iters)
        except (RuntimeError, ValueError) as error:
            row["errors"][method] = str(error)
            print(f"  error: {error}", flush=True)
            continue
        row["ms"][method] = median
        row["ms_min"][method] = fastest
        row["gbps"][method] = row["bytes"] / (median * 1e6)
        print(f"  {median:.4f} ms, {row['gbps'][method]:.0f} GB/s", flush=True)

    progress(f"verify auto {batch}x{n} k={k} against torch.topk")
    indices.fill_(-2)  # an unwritten slot fails the check
    try:
        litetopk_run("auto")(inputs[0])
        mismatch = verify(inputs[0], indices, k)
    except (RuntimeError, ValueError) as error:
        mismatch = str(error)
    row["verified"] = not mismatch
    if mismatch:
        row["errors"]["verify"] = mismatch
    print(f"  {'exact' if not mismatch else 'MISMATCH: ' + mismatch}", flush=True)
    return row


def fmt(value, digits=3, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def markdown_table(rows):
    lines = [
        "| B x N, k | torch.topk ms | radix ms | sample-filter ms | grid-radix ms | auto ms "
        "| auto algo | auto GB/s | auto vs torch | auto / best | exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        ms = row["ms"]
        auto = ms.get("auto")
        torch_ms = ms.get("torch.topk")
        best = min((ms[a] for a in ("radix", "sample-filter", "grid-radix") if a in ms), default=None)
        lines.append(
            f"| {row['batch']} x {row['n']}, {row['k']} | {fmt(torch_ms)} | "
            f"{fmt(ms.get('radix'))} | {fmt(ms.get('sample-filter'))} | "
            f"{fmt(ms.get('grid-radix'))} | {fmt(auto)} | "
            f"{row['dispatched']} | {fmt(row['gbps'].get('auto'), 0)} | "
            f"{fmt(torch_ms / auto if auto and torch_ms else None, 2, 'x')} | "
            f"{fmt(auto / best if auto and best else None, 2)} | "
            f"{'yes' if row['verified'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    """Grouped bars of GB/s per shape and method; skipped without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", flush=True)
        return False
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(METHODS)
    for m, method in enumerate(METHODS):
        xs = [i + (m - (len(METHODS) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [row["gbps"].get(method, 0) for row in rows], width, label=method)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['batch']}x{r['n']}\nk={r['k']}" for r in rows], fontsize=8)
    ax.set_ylabel("GB/s (fp32 scores read / time)")
    ax.set_title(f"top-k on {torch.cuda.get_device_name()}: torch.topk vs litetopk")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "select", "BxNxK", "8192x131072x2048", iters=20, warmup=3)
    parser.add_argument("--png", help="bar plot file (default: --out with .png)")
    args = parser.parse_args()
    require_cuda("select_bench.py")

    shapes = args.shapes if args.only_shapes else DEFAULT_SHAPES + args.shapes
    # Per shape: each method, then the verification.
    progress = Progress(
        sum(len(METHODS) + (1 if k <= SAMPLE_FILTER_MAX_K else 0) for _, _, k in shapes))

    rows = []
    for batch, n, k in shapes:
        rows.append(bench_shape(batch, n, k, args, progress))
        torch.cuda.empty_cache()

    record = result_record(
        "top-k of random normal fp32 rows (unsorted): torch.topk vs litetopk radix, "
        "sample-filter and auto; CUDA events, median of iters after warmup, inputs "
        "rotated through copies totalling >= 256 MB", args, rows)
    table = markdown_table(rows)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}")
    png = args.png or os.path.splitext(args.out)[0] + ".png"
    if plot(rows, png):
        print(f"wrote {png}")
    print_results(table, args)
    if not all(row["verified"] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
