#!/usr/bin/env python3
"""Exact retrieval (queries x corpus, top k) on the GPU: torch against litetopk, in one process.

For each shape (corpus rows N, batch B, k; d 768 by default; an fp16 corpus, or fp8 e4m3 with a
per-row fp32 scale) the same inputs, generated on the GPU (--workload clustered: unit-norm
cluster centres, one per 64 rows, plus noise, queries near random centres; normal: iid N(0, 1)),
go through
  matmul          torch.matmul alone (fp16 scores; fp8: the corpus widened to fp16, scaled)
  torch.topk      the same matmul, then torch.topk
  torch+select    the same matmul, then litetopk's select (torch.ops.litetopk.topk_out)
  unfused         litetopk.ops.retrieval_topk(path="unfused"): cuBLAS per corpus chunk into
                  fp32 scores, select, exact merge
  fused           path="fused": the gate in the GEMM's epilogue, no scores written (fp16 corpus)
  retrieval       path="auto": the one the cost model picks (named in the notes)
timed with CUDA events (median of --iters after --warmup). Each path is checked on up to
--check-queries queries against fp32 scores computed apart (fp32 matmul of the same fp16/fp8
values): `recall` is the share of the fp32 top-k a path returns, `exact` whether every row it
returns scores at least the fp32 k-th score minus 2^-12 (1 + max |score|) with k distinct rows.
torch's paths score in fp16 (matmul's output type), so ties and rounding cost them recall; the
retrieval scores in fp32. When the [B, N] fp16 score matrix of the torch paths would not fit in
free GPU memory, or run out of it, they go on over query chunks (said in the table's notes)
instead of failing.
Writes JSON (--json / --out) and a markdown table (--md); prints progress, then the table.
"""
import argparse
import math

import torch

from litetopk_bench_common import (Progress, add_common_arguments, litetopk, print_results,
                                   require_cuda, result_record, time_cuda, write_results)

DIM = 768
# (N, B, k, corpus): the targets of issue 22.
DEFAULT_SHAPES = [
    (1_000_000, 1, 1024, "fp16"),
    (1_000_000, 64, 1024, "fp16"),
    (1_000_000, 1024, 1024, "fp16"),
    (5_000_000, 64, 1024, "fp16"),
    (5_000_000, 1024, 1024, "fp16"),
    (1_000_000, 64, 16, "fp16"),
    (1_000_000, 64, 8192, "fp16"),
    (1_000_000, 1, 1024, "fp8"),
]
QUICK_SHAPES = [
    (100_000, 1, 1024, "fp16"),
    (100_000, 64, 1024, "fp16"),
    (100_000, 64, 16, "fp16"),
    (100_000, 64, 8192, "fp16"),
    (100_000, 1, 1024, "fp8"),
]
# The targets (ms), by (N, B, k, corpus).
TARGETS = {
    (1_000_000, 1, 1024, "fp16"): 0.40,
    (1_000_000, 64, 1024, "fp16"): 0.45,
    (1_000_000, 1024, 1024, "fp16"): 2.5,
    (5_000_000, 64, 1024, "fp16"): 2.1,
    (5_000_000, 1024, 1024, "fp16"): 12.0,
    (1_000_000, 1, 1024, "fp8"): 0.22,
}
METHODS = ["torch.topk", "torch+select", "unfused", "fused", "retrieval"]
TIMED = ["matmul"] + METHODS  # the matmul alone: the torch paths' floor, not checked
MEMORY_FRACTION = 0.8  # of free memory the torch paths' scores may take
DEVICE = "cuda"


def make_inputs(n, batch, workload, seed):
    """queries [B, d] and corpus [N, d] fp16 on the GPU (made in slices to bound the fp32
    temporaries)."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    corpus = torch.empty(n, DIM, dtype=torch.float16, device=DEVICE)
    if workload == "normal":
        for start in range(0, n, 1 << 20):
            rows = min(1 << 20, n - start)
            corpus[start:start + rows] = torch.randn(rows, DIM, device=DEVICE, generator=g)
        queries = torch.randn(batch, DIM, device=DEVICE, generator=g).half()
        return queries, corpus
    clusters = max(1, n // 64)
    centres = torch.nn.functional.normalize(
        torch.randn(clusters, DIM, device=DEVICE, generator=g), dim=1)
    for start in range(0, n, 1 << 20):
        rows = min(1 << 20, n - start)
        ids = torch.arange(start, start + rows, device=DEVICE) % clusters
        noise = torch.randn(rows, DIM, device=DEVICE, generator=g) * (0.25 / math.sqrt(DIM))
        corpus[start:start + rows] = torch.nn.functional.normalize(centres[ids] + noise, dim=1)
    picks = torch.randint(0, clusters, (batch,), device=DEVICE, generator=g)
    noise = torch.randn(batch, DIM, device=DEVICE, generator=g) * (0.1 / math.sqrt(DIM))
    queries = torch.nn.functional.normalize(centres[picks] + noise, dim=1).half()
    return queries, corpus


def quantize_fp8(corpus):
    """e4m3 rows and per-row fp32 scales (max |x| / 448) of an fp16 corpus."""
    scales = corpus.float().abs().amax(dim=1).clamp_min(1e-30) / 448.0
    codes = torch.empty(corpus.shape, dtype=torch.float8_e4m3fn, device=DEVICE)
    for start in range(0, corpus.shape[0], 1 << 20):
        rows = slice(start, start + (1 << 20))
        codes[rows] = (corpus[rows].float() / scales[rows, None]).to(torch.float8_e4m3fn)
    return codes, scales


def fp32_scores(queries, corpus, scales):
    """[b, N] fp32 scores of the (few) queries: fp32 matmul of the same values, in corpus
    slices."""
    out = torch.empty(queries.shape[0], corpus.shape[0], device=DEVICE)
    q = queries.float()
    for start in range(0, corpus.shape[0], 1 << 20):
        rows = slice(start, start + (1 << 20))
        out[:, rows] = q @ corpus[rows].float().T
        if scales is not None:
            out[:, rows] *= scales[rows]
    return out


def check(indices, reference, k):
    """(recall against the fp32 top-k, exact) of indices [b, k] for fp32 scores reference [b, N]."""
    want = torch.topk(reference, k, dim=1).indices
    kth = reference.gather(1, want[:, -1:])
    tolerance = 2.0 ** -12 * (1 + reference.abs().max().item())
    idx = indices.long()
    valid = bool(((idx >= 0) & (idx < reference.shape[1])).all())
    if not valid:
        return 0.0, False
    distinct = bool((torch.sort(idx, dim=1).values.diff(dim=1) != 0).all())
    got = reference.gather(1, idx)
    exact = distinct and bool((got >= kth - tolerance).all())
    rows = torch.arange(idx.shape[0], device=idx.device)[:, None] * reference.shape[1]
    hits = torch.isin(rows + want, rows + idx).sum().item()
    return hits / want.numel(), exact


def query_chunks(n, batch, k):
    """Queries per chunk of the torch paths: all, unless the [B, N] fp16 scores (twice: torch.topk
    keeps temporaries) would pass MEMORY_FRACTION of free memory."""
    free, _ = torch.cuda.mem_get_info()
    per_query = n * 2 * 2 + k * 16
    fits = max(1, int(free * MEMORY_FRACTION // per_query))
    return min(batch, fits)


def bench_shape(n, batch, k, corpus_kind, args, progress):
    label = f"{n}x{batch}x{k} {corpus_kind}"
    progress(f"{label}: generating {args.workload} inputs")
    queries, corpus = make_inputs(n, batch, args.workload, args.seed)
    scales = None
    if corpus_kind == "fp8":
        corpus, scales = quantize_fp8(corpus)
    torch.cuda.synchronize()
    chunk = query_chunks(n, batch, k)
    notes = []
    if chunk < batch:
        notes.append(f"torch paths over {math.ceil(batch / chunk)} query chunks of {chunk}: the "
                     f"[{batch}, {n}] fp16 scores ({batch * n * 2 / 1e9:.1f} GB) do not fit")
    indices = torch.empty(batch, k, dtype=torch.int32, device=DEVICE)
    row = {"n": n, "batch": batch, "k": k, "dim": DIM, "corpus": corpus_kind,
           "workload": args.workload, "target_ms": TARGETS.get((n, batch, k, corpus_kind)),
           "query_chunk": chunk, "ms": {}, "ms_min": {}, "recall": {}, "exact": {},
           "errors": {}, "notes": notes}

    def matmul(q):
        if scales is None:
            return q @ corpus.T
        return (q @ corpus.to(torch.float16).T) * scales.to(torch.float16)

    def torch_topk(_):
        for start in range(0, batch, chunk):
            torch.topk(matmul(queries[start:start + chunk]), k, dim=1, sorted=False)

    def torch_select(_):
        for start in range(0, batch, chunk):
            litetopk.ops.topk(matmul(queries[start:start + chunk]), k,
                              out=(indices[start:start + chunk], None))

    def retrieval_path(path):
        def run(_):
            litetopk.ops.retrieval_topk(queries, corpus, k, out=(indices, None),
                                        corpus_scales=scales, path=path)
        return run

    checked = min(batch, args.check_queries)
    reference = fp32_scores(queries[:checked], corpus, scales)
    def matmul_only(_):
        for start in range(0, batch, chunk):
            matmul(queries[start:start + chunk])

    row["retrieval_plan"] = litetopk.ops.retrieval_topk_plan(queries, corpus, k, scores=False,
                                                             corpus_scales=scales)
    paths = [("unfused", retrieval_path("unfused"))]
    if scales is None:
        paths.append(("fused", retrieval_path("fused")))
    paths.append(("retrieval", retrieval_path("auto")))
    for name, run in [("matmul", matmul_only), ("torch.topk", torch_topk),
                      ("torch+select", torch_select)] + paths:
        progress(f"{label}: {name}")
        while True:
            try:
                ms, ms_min = time_cuda(run, args.warmup, args.iters)
                break
            except torch.cuda.OutOfMemoryError as error:
                torch.cuda.empty_cache()
                if name in ("unfused", "fused", "retrieval") or chunk == 1:
                    row["errors"][name] = str(error).splitlines()[0]
                    break
                chunk = max(1, chunk // 4)  # the torch paths' temporaries: fewer queries a time
                row["query_chunk"] = chunk
                notes.append(f"{name} ran out of memory: the torch paths go on with query "
                             f"chunks of {chunk}")
            except (RuntimeError, ValueError) as error:
                row["errors"][name] = str(error).splitlines()[0]
                break
        if name in row["errors"]:
            continue
        row["ms"][name], row["ms_min"][name] = ms, ms_min
        if name == "matmul":
            continue
        if name == "torch.topk":
            got = torch.topk(matmul(queries[:checked]), k, dim=1).indices
        else:
            run(0)
            got = indices[:checked]
        row["recall"][name], row["exact"][name] = check(got, reference, k)
    return row


def table(rows):
    head = ("| N | B | k | corpus | " + " | ".join(f"{m} ms" for m in TIMED) +
            " | retrieval vs torch.topk | vs torch+select | target ms | recall (torch.topk / "
            "select / unfused / fused / auto) | exact |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    notes = []
    for r in rows:
        ms = r["ms"]
        cells = [f"{ms[m]:.3f}" if m in ms else "error" for m in TIMED]

        def ratio(base):
            if base in ms and "retrieval" in ms:
                return f"{ms[base] / ms['retrieval']:.2f}x"
            return "-"

        recall = " / ".join(f"{r['recall'][m]:.4f}" if m in r["recall"] else "-" for m in METHODS)
        exact = " / ".join(("yes" if r["exact"][m] else "NO") if m in r["exact"] else "-"
                           for m in METHODS)
        target = "-" if r["target_ms"] is None else f"{r['target_ms']:.2f}"
        lines.append(f"| {r['n']} | {r['batch']} | {r['k']} | {r['corpus']} | "
                     + " | ".join(cells) + f" | {ratio('torch.topk')} | {ratio('torch+select')} "
                     f"| {target} | {recall} | {exact} |")
        plan = r.get("retrieval_plan")
        if plan is not None:
            shape = (f"{plan['chunks']} chunks of {plan['chunk_rows']} rows"
                     if plan["path"] == "unfused" else
                     f"{plan['fused_splits']} splits, a sample of {plan['fused_sample_tiles']} "
                     f"tiles (every {plan['fused_sample_stride']}th)")
            notes.append(f"- {r['n']}x{r['batch']}x{r['k']} {r['corpus']}: auto runs "
                         f"{plan['path']}, {shape}, workspace "
                         f"{plan['workspace_bytes'] / 1e6:.0f} MB")
        for note in r["notes"]:
            notes.append(f"- {r['n']}x{r['batch']}x{r['k']} {r['corpus']}: {note}")
        for method, error in r["errors"].items():
            notes.append(f"- {r['n']}x{r['batch']}x{r['k']} {r['corpus']}: {method} failed: {error}")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, "retrieval", "NxBxK", "1000000x64x1024", iters=10, warmup=3)
    parser.add_argument("--json", dest="out", help="write the JSON record here (same as --out)")
    parser.add_argument("--quick", action="store_true", help="small shapes (100k rows)")
    parser.add_argument("--workload", choices=["clustered", "normal"], default="clustered")
    parser.add_argument("--check-queries", type=int, default=64,
                        help="queries checked against fp32 scores per shape")
    args = parser.parse_args()
    require_cuda("retrieval_bench.py")
    shapes = [] if args.only_shapes else (QUICK_SHAPES if args.quick else DEFAULT_SHAPES)
    shapes = shapes + [tuple(s) + ("fp16",) for s in args.shapes]
    progress = Progress(7 * len(shapes))
    rows = []
    for n, b, k, c in shapes:
        try:
            rows.append(bench_shape(n, b, k, c, args, progress))
        except (RuntimeError, ValueError) as error:  # the inputs or the reference: say so, go on
            rows.append({"n": n, "batch": b, "k": k, "corpus": c, "target_ms": None, "ms": {},
                         "recall": {}, "exact": {}, "notes": [],
                         "errors": {"shape": str(error).splitlines()[0]}})
        torch.cuda.empty_cache()  # the shape's inputs are gone with bench_shape's frame
    md = table(rows)
    record = result_record("retrieval top-k: torch matmul + topk, + litetopk select, litetopk "
                           "retrieval_topk", args, rows, dim=DIM, workload=args.workload,
                           quick=args.quick)
    write_results(record, md, args, "## retrieval_topk on the H200")
    print_results(md, args)


if __name__ == "__main__":
    main()
