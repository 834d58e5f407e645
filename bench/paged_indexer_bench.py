#!/usr/bin/env python3
"""Paged decode indexer + top-k: litetopk auto / unfused / fused against DeepGEMM's paged logits.

For each shape (B requests of `context` tokens each, next_n query tokens per request, H heads,
D = 128, k), DeepGEMM's paged decode test inputs (bench/deepgemm_peer.py make_paged_inputs):
q [B, next_n, H, D] and keys bf16 randn cast to fp8 e4m3 (keys with a per-token scale), packed
into DeepGEMM's kv_cache [num_pages, 64, 1, D + 4] uint8, weights [B * next_n, H] randn,
context_lens [B] = context (query j of a request sees context - next_n + j + 1 tokens) and a
block table that is a random permutation of the pages. litetopk runs through its torch ops
(litetopk.ops.fp8_paged_mqa_topk with algo forced, fp8_paged_mqa_logits alone), from the
installed package (`pip install .`) or python/ of this repository.

Each column is timed with CUDA events (median of --iters after --warmup; with --graphs each call
is captured in a CUDA graph and the replays are timed, as engines run decode). Each algorithm's
indices are checked against torch.topk over litetopk's own logits (the multiset of selected
values, per row; when that differs, against a tolerance that bounds two fp32 evaluations of a
score). Reports ms, TFLOP/s (2 * valid pairs * H * D / time), % of the FP8 ceiling, GB/s (the
visible tokens' key bytes and scales, once per request, over the time) and auxiliary memory (the
workspace); the DeepGEMM anchor numbers (same H200, next_n = 1) are printed beside.

--peer deepgemm: when bench/deepgemm_peer.py's load() finds DeepGEMM (built outside the tree and
put on PYTHONPATH; run with its libstdc++ and JIT cache settings, see that file), three columns
are measured in this process on the same inputs: DeepGEMM paged logits alone (its schedule
computed once, outside the timing), + torch.topk(k, sorted=False) over them, + litetopk's topk op
over them (each row restricted to its visible tokens); and litetopk's logits are compared with
DeepGEMM's on every visible position (bit-identical or the largest difference). Without DeepGEMM
the columns stay empty and the reason is printed.

--contexts ragged: request 0 at `context` tokens, the others drawn uniformly in (context / 2,
context] (a seeded generator; max_context_len stays `context`), as a real batch; DeepGEMM gets the
lengths in its 2-D form with its schedule computed from them.

--state (needs --graphs): the decode state path, i.e. fp8_paged_mqa_topk(..., state=...) with a
state carried from replay to replay (the previous step's top-k gates the next step's scores),
algo fused and auto, on two workloads of STATE_STEPS query tensors, one CUDA graph each, replayed
in turn: "coherent", each step's q the previous one plus STATE_NOISE * randn (in fp32, then cast
to fp8 e4m3: q itself is randn, so about 10% of its spread; keys, weights and contexts fixed), and
"iid", every step's q drawn afresh (the previous top-k then says nothing: the worst case). The
result of the last replay is checked against torch.topk over the logits of its q.

Writes JSON (--json, alias --out) and a markdown table (--md); prints progress lines, then the
table. A failing column or row is reported and the rest still run. Needs a CUDA GPU and a
litetopk build with its CUDA backend; `--help` works anywhere.
"""
import argparse
import math
import sys
import traceback

import torch

import deepgemm_peer
from litetopk_bench_common import (Progress, add_common_arguments, capture_graph, litetopk,
                                   print_results, require_cuda, result_record, time_cuda,
                                   write_results)

D = 128
FP8_PEAK_TFLOPS = 1322.0  # torch._scaled_mm 8192^3 on this H200 (shared/H200.md)
HBM_TBPS = 4.2  # HBM copy (read + write) on this H200 (shared/H200.md)
KI = 1024
H_DEFAULT = 64
K_DEFAULT = 2048

# (B, context, next_n): the paged indexer issue's shapes.
DEFAULT_SHAPES = (
    [(b, c * KI, 1) for b, c in ((1, 32), (1, 128), (8, 128), (32, 32), (32, 128), (64, 128),
                                 (128, 32), (128, 128))]
    + [(32, 128 * KI, 2), (32, 128 * KI, 4)]
)
QUICK_SHAPES = [(1, 8 * KI, 1), (4, 16 * KI, 2), (8, 32 * KI, 1)]

# DeepGEMM fp8_fp4_paged_mqa_logits (64-token pages, next_n = 1, H = 64, fp32 logits,
# clean_logits=False), then torch.topk(2048, sorted=False) or litetopk's select over them, on this
# H200, uniform contexts, random pages, median of 20. Copied from
# shared/anchors/h200_dsa_paged_with_ltk_select_2026-11-30.json (DeepGEMM @54e2261), since shared/
# does not travel to the GPU machine.
# (B, context) -> (logits_ms, + torch.topk ms, + litetopk select ms)
DEEPGEMM_ANCHORS = {
    (1, 32768): (0.0254, 0.1354, 0.0822),
    (1, 131072): (0.0359, 0.1710, 0.0972),
    (8, 131072): (0.0567, 0.1867, 0.1231),
    (32, 32768): (0.0559, 0.1645, 0.1321),
    (32, 131072): (0.1580, 0.2840, 0.2275),
    (64, 131072): (0.2965, 0.4668, 0.3857),
    (128, 32768): (0.1674, 0.3264, 0.2512),
    (128, 131072): (0.6157, 0.9255, 0.7601),
}

ALGOS = ["auto", "unfused", "fused"]
STATE_STEPS = 8  # query tensors (and graphs) per decode-state workload
STATE_NOISE = 0.1  # coherent workload: q_{i+1} = fp8(q_i + STATE_NOISE * randn)
STATE_COLUMNS = [f"{algo}_{workload}" for workload in ("coherent", "iid")
                 for algo in ("fused_state", "auto_state")]
TOL_REL = 5e-4  # see tolerances()
CHECK_ROWS_CHUNK = 32  # rows of the check's torch.topk at a time


def row_ends(inputs):
    """[B * next_n] int32 on the GPU: the tokens query row b * next_n + j sees."""
    lens, next_n = inputs["context_lens"], inputs["q"].shape[1]
    j = torch.arange(next_n, device=lens.device, dtype=torch.int32)
    ends = (lens[:, None] - next_n + 1 + j[None, :]).clamp(min=0)
    return ends.clamp(max=inputs["max_context"]).reshape(-1).to(torch.int32).contiguous()


def tolerances(inputs):
    """[rows] bounds on the difference of two fp32-grade evaluations of a row's scores:
    TOL_REL * sum_h |w[r, h]| * |q[r, h]|_2 * max_p(scale[p] * |key[p]|_2) (Cauchy-Schwarz on each
    head's dot product; 5e-4 covers Hopper's fp8 accumulator, as in indexer_bench.py)."""
    cache = inputs["kv_cache"]
    pages, page_tokens = cache.shape[0], cache.shape[1]
    flat = cache.view(pages, -1)
    key_bound = 0.0
    for p0 in range(0, pages, 4096):  # in pieces: the keys as fp32 would be 4x the cache
        piece = flat[p0:p0 + 4096]
        keys = piece[:, :page_tokens * D].view(torch.float8_e4m3fn).float()
        scales = piece[:, page_tokens * D:].contiguous().view(torch.float32)
        norms = keys.view(-1, page_tokens, D).norm(dim=2)
        key_bound = max(key_bound, float((scales.abs() * norms).max()))
    q = inputs["q"].float().flatten(0, 1)  # [rows, H, D]
    return TOL_REL * (inputs["weights"].abs() * q.norm(dim=2)).sum(1) * key_bound


def verify(indices, logits, ends, k, tol):
    """'' when every row's indices are a top k of the logits over its visible tokens, else what
    differs. 'exact': the multiset of chosen logits equals torch.topk's; otherwise each chosen
    logit must be >= the row's k-th - 2 tol (the fused path's scores may round differently from
    the logits kernel's), and then the answer is 'within tol'."""
    rows = logits.shape[0]
    exact = True
    for r0 in range(0, rows, CHECK_ROWS_CHUNK):
        r1 = min(rows, r0 + CHECK_ROWS_CHUNK)
        block, idx, end = logits[r0:r1], indices[r0:r1], ends[r0:r1]
        cols = torch.arange(block.shape[1], device=block.device)
        masked = block.masked_fill(cols[None, :] >= end[:, None].long(), float("-inf"))
        want = torch.clamp(end, max=k).long()  # no NaN here: every page is in the cache
        ref = torch.topk(masked, min(k, block.shape[1]), dim=1, sorted=True).values
        for i in range(r1 - r0):
            row, n = r0 + i, int(want[i])
            got = idx[i]
            valid = got[:n]
            if (valid < 0).any() or (got[n:] != -1).any():
                return f"row {row}: {int((got >= 0).sum())} valid indices, expected {n} then -1"
            if (valid >= end[i]).any():
                return f"row {row}: an index is outside [0, {int(end[i])})"
            if valid.unique().numel() != n:
                return f"row {row}: an index is selected twice"
            chosen = block[i, valid.long()].sort(descending=True).values
            if torch.equal(chosen, ref[i, :n]):
                continue
            exact = False
            kth = float(ref[i, n - 1]) if n else math.inf
            if n and float(chosen.min()) < kth - 2 * float(tol[row]):
                return (f"row {row}: a chosen token scores {float(chosen.min()):.5g} < k-th "
                        f"{kth:.5g} - 2 * tol {float(tol[row]):.3g}")
    return "" if exact else "within tol"


def ragged_contexts(inputs, context, generator):
    """Request 0 at `context`, the others uniform in (context / 2, context], in place."""
    lens = inputs["context_lens"]
    if lens.numel() > 1:
        low = context // 2 + 1
        drawn = torch.randint(low, context + 1, (lens.numel() - 1,), device=lens.device,
                              generator=generator, dtype=torch.int64)
        lens[1:] = drawn.to(torch.int32)


def step_queries(q, coherent, generator):
    """STATE_STEPS query tensors like q: each the previous one plus noise (coherent) or fresh
    randn (iid), fp8 e4m3."""
    out, current = [], q.float()
    for _ in range(STATE_STEPS):
        noise = torch.randn(q.shape, device=q.device, generator=generator)
        current = current + STATE_NOISE * noise if coherent else noise
        out.append(current.to(torch.float8_e4m3fn))
        current = out[-1].float()
    return out


def gate_candidates(previous, logits, ends, k):
    """What the state path's gate admits per row, from the logits: the previous top-k's
    smallest new score when k distinct visible non-NaN positions count (else -inf), and the
    visible scores at or above it. {"mean", "max"} over the rows."""
    counts = []
    for r in range(logits.shape[0]):
        end = int(ends[r])
        row_scores = logits[r, :end]
        prev = previous[r].long()
        prev = prev[(prev >= 0) & (prev < end)].unique()
        scores = row_scores[prev]
        scores = scores[~scores.isnan()]
        bound = float(scores.min()) if scores.numel() >= k else -math.inf
        counts.append(int((row_scores >= bound).sum()))
    return {"mean": round(sum(counts) / max(len(counts), 1)), "max": max(counts, default=0)}


def bench_state(inputs, logits_of, ends, k, row, args, record):
    """The decode state path on the coherent and iid workloads, fused and auto: graph replays
    cycling through STATE_STEPS queries with one state; the last replay checked."""
    from litetopk.ops.paged import paged_indexer_state  # noqa: PLC0415

    B, next_n = row["B"], row["next_n"]
    rest = (inputs["kv_cache"], inputs["weights"], inputs["context_lens"], inputs["block_table"])
    max_context = inputs["max_context"]
    gen = torch.Generator(device="cuda").manual_seed(args.seed + 1)
    tol = tolerances(inputs)
    for workload in ("coherent", "iid"):
        queries = step_queries(inputs["q"], workload == "coherent", gen)
        for algo in ("fused_state", "auto_state"):
            name = f"{algo}_{workload}"
            path = algo.split("_")[0]
            try:
                state = paged_indexer_state(B, next_n, k)
                indices = torch.empty(B * next_n, k, dtype=torch.int32, device="cuda")
                plan = litetopk.ops.fp8_paged_mqa_topk_plan(queries[0], *rest, max_context, k,
                                                            algo=path, state=state)
                row["workspace_bytes"][name] = plan["workspace_bytes"]
                row.setdefault("state_dispatched", {})[name] = plan["algo"]

                def step(q):
                    litetopk.ops.fp8_paged_mqa_topk(q, *rest, max_context, k, algo=path,
                                                    out=(indices, None), state=state)

                graphs = [capture_graph(lambda q=q: step(q)) for q in queries]
                median, _ = time_cuda(lambda i: graphs[i % STATE_STEPS].replay(), args.warmup,
                                      args.iters)
                # The last replay was graph (warmup + iters - 1) % STEPS: check the next one,
                # and count what its gate admits (the state holds the previous top-k).
                last = (args.warmup + args.iters - 1) % STATE_STEPS
                following = queries[(last + 1) % STATE_STEPS]
                previous = state.clone()
                indices.fill_(-2)
                graphs[(last + 1) % STATE_STEPS].replay()
                torch.cuda.synchronize()
                logits = logits_of(following)
                if algo == "fused_state":
                    row.setdefault("candidates", {})[workload] = gate_candidates(
                        previous, logits, ends, k)
                    print(f"  {workload}: candidates per row {row['candidates'][workload]}",
                          flush=True)
                mismatch = verify(indices, logits, ends, k, tol)
                row["verified"][name] = mismatch in ("", "within tol")
                if mismatch:
                    row["notes"][name] = ("" if row["verified"][name] else "MISMATCH: ") + mismatch
                del graphs
            except (ValueError, RuntimeError) as error:
                row["notes"][name] = str(error).splitlines()[0]
                print(f"  {name} error: {row['notes'][name]}", flush=True)
                continue
            finally:
                torch.cuda.empty_cache()
            record(name, median)
            print(f"  {name}: {median:.4f} ms ({plan['algo']}), "
                  f"{row['notes'].get(name) or 'exact'}", flush=True)


def timed(run, args):
    """Median ms of run() (in a CUDA graph with --graphs)."""
    if args.graphs:
        graph = capture_graph(run)
        median, _ = time_cuda(lambda _: graph.replay(), args.warmup, args.iters)
        del graph
        return median
    median, _ = time_cuda(lambda _: run(), args.warmup, args.iters)
    return median


def bench_peer(dg, inputs, logits, ends, k, row, args, progress):
    """DeepGEMM's paged logits alone, + torch.topk, + litetopk's topk op, on the same inputs; and
    whether litetopk's logits (in `logits`) equal DeepGEMM's on every visible position."""
    B, context, next_n = row["B"], row["context"], row["next_n"]
    q, cache, w = inputs["q"], inputs["kv_cache"], inputs["weights"]
    lens, table, max_context = inputs["context_lens"], inputs["block_table"], inputs["max_context"]
    rows = B * next_n
    peer = row["peer"] = {"name": deepgemm_peer.describe(dg), "ms": {}, "notes": {}}
    try:
        lens_2d = deepgemm_peer._context_lens_2d(lens, next_n)
        schedule = deepgemm_peer.paged_metadata(dg, lens_2d, next_n, cache.shape[1])
    except Exception as error:  # noqa: BLE001 (a peer failure is a note, not a crash)
        peer["notes"]["schedule"] = str(error).splitlines()[0]
        print(f"  DeepGEMM schedule failed: {peer['notes']['schedule']}", flush=True)
        return
    indices = torch.empty(rows, k, dtype=torch.int32, device="cuda")

    def dg_logits():
        return deepgemm_peer.paged_mqa_logits(dg, q, cache, w, lens_2d, table, max_context,
                                              schedule_meta=schedule)

    if logits is not None:
        progress(f"DeepGEMM logits vs litetopk's B={B} context={context} next_n={next_n}")
        try:
            theirs = dg_logits()
            cols = torch.arange(max_context, device="cuda")
            visible = cols[None, :] < ends[:, None].long()
            same = torch.equal(theirs[:, :max_context][visible], logits[visible])
            peer["logits_bit_identical"] = same
            if not same:
                diff = (theirs[:, :max_context] - logits).abs().masked_fill(~visible, 0)
                count = int((diff != 0).sum())
                peer["notes"]["identity"] = (f"{count} of {int(visible.sum())} visible logits "
                                             f"differ, max |diff| {float(diff.max()):.3g}")
            print(f"  bit-identical on visible positions: {same}", flush=True)
            del theirs
        except Exception as error:  # noqa: BLE001
            peer["notes"]["identity"] = str(error).splitlines()[0]
        torch.cuda.empty_cache()
    runs = {
        "logits": dg_logits,
        # DeepGEMM leaves the columns past a row's tokens unspecified: torch.topk reads them
        # anyway (a timing column, as engines' torch fallback), litetopk's select skips them.
        "torch_topk": lambda: torch.topk(dg_logits(), k, dim=1, sorted=False),
        "litetopk_select": lambda: litetopk.ops.topk(dg_logits(), k, None, ends,
                                                     out=(indices, None)),
    }
    for name, run in runs.items():
        progress(f"DeepGEMM {name} B={B} context={context} next_n={next_n} k={k}")
        try:
            peer["ms"][name] = timed(run, args)
            print(f"  {peer['ms'][name]:.4f} ms", flush=True)
        except Exception as error:  # noqa: BLE001
            peer["notes"][name] = str(error).splitlines()[0]
            print(f"  error: {peer['notes'][name]}", flush=True)
        torch.cuda.empty_cache()


def bench_shape(dg, shape, args, progress):
    """One row: the logits kernel alone and each algorithm's time, TFLOP/s, GB/s, workspace and
    check; errors as notes."""
    B, context, next_n = shape
    H, k = args.heads, args.k
    row = {"B": B, "context": context, "next_n": next_n, "H": H, "k": k, "ms": {},
           "tflops": {}, "pct_fp8_peak": {}, "gbps": {}, "workspace_bytes": {}, "verified": {},
           "notes": {}, "deepgemm": None}
    anchor = DEEPGEMM_ANCHORS.get((B, context)) if (next_n, H, k) == (1, 64, 2048) else None
    if anchor:
        row["deepgemm"] = dict(zip(("logits_ms", "torch_topk_total_ms",
                                    "litetopk_select_total_ms"), anchor))

    progress(f"inputs B={B} context={context} next_n={next_n} H={H}")
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    inputs = deepgemm_peer.make_paged_inputs(B, context, next_n, H, D, generator=gen)
    if args.contexts == "ragged":
        ragged_contexts(inputs, context, gen)
    max_context = inputs["max_context"]
    ends = row_ends(inputs)
    rows = B * next_n
    valid_pairs = int(ends.sum())
    flops = 2.0 * valid_pairs * H * D
    # Each request's visible keys and scales, read once for its next_n queries, plus q and
    # the weights.
    cache_bytes = int(inputs["context_lens"].clamp(max=max_context).sum()) * (D + 4) + \
        rows * H * (D + 4)
    row.update(valid_pairs=valid_pairs, flops=flops, bytes=cache_bytes, max_context=max_context)
    operands = (inputs["q"], inputs["kv_cache"], inputs["weights"], inputs["context_lens"],
                inputs["block_table"])
    tol = tolerances(inputs)
    try:
        row["dispatched"] = litetopk.ops.fp8_paged_mqa_topk_plan(*operands, max_context, k)["algo"]
    except (ValueError, RuntimeError) as error:
        row["notes"]["plan"] = str(error).splitlines()[0]

    def record(name, median):
        row["ms"][name] = median
        row["tflops"][name] = flops / (median * 1e-3) / 1e12
        row["pct_fp8_peak"][name] = 100.0 * row["tflops"][name] / FP8_PEAK_TFLOPS
        row["gbps"][name] = cache_bytes / (median * 1e-3) / 1e9

    # The logits kernel alone (the unfused path's first half), kept for the checks.
    progress(f"logits B={B} context={context} next_n={next_n}")
    logits = torch.empty(rows, max_context, dtype=torch.float32, device="cuda")
    try:
        litetopk.ops.fp8_paged_mqa_logits(*operands, max_context, out=logits)
        median = timed(lambda: litetopk.ops.fp8_paged_mqa_logits(*operands, max_context,
                                                                 out=logits), args)
        record("logits", median)
        print(f"  {median:.4f} ms, {row['tflops']['logits']:.0f} TFLOP/s, "
              f"{row['gbps']['logits']:.0f} GB/s", flush=True)
    except (ValueError, RuntimeError) as error:
        row["notes"]["logits"] = str(error).splitlines()[0]
        print(f"  error: {row['notes']['logits']}", flush=True)
        logits = None
    if dg is not None:
        bench_peer(dg, inputs, logits, ends, k, row, args, progress)

    indices = torch.empty(rows, k, dtype=torch.int32, device="cuda")
    for algo in ALGOS:
        progress(f"{algo} B={B} context={context} next_n={next_n} k={k}")
        try:
            plan = litetopk.ops.fp8_paged_mqa_topk_plan(*operands, max_context, k, algo=algo)
            row["workspace_bytes"][algo] = plan["workspace_bytes"]

            def run():
                litetopk.ops.fp8_paged_mqa_topk(*operands, max_context, k, algo=algo,
                                                out=(indices, None))

            indices.fill_(-2)  # an unwritten slot fails the check
            run()
            torch.cuda.synchronize()
            if logits is not None:
                mismatch = verify(indices, logits, ends, k, tol)
                row["verified"][algo] = mismatch in ("", "within tol")
                if mismatch:
                    row["notes"][algo] = ("" if row["verified"][algo] else "MISMATCH: ") + mismatch
            median = timed(run, args)
        except (ValueError, RuntimeError) as error:
            row["notes"][algo] = str(error).splitlines()[0]
            print(f"  error: {row['notes'][algo]}", flush=True)
            continue
        finally:
            torch.cuda.empty_cache()
        record(algo, median)
        check = row["notes"].get(algo) or ("exact" if row["verified"].get(algo) else
                                           "not checked")
        print(f"  {median:.4f} ms, {row['tflops'][algo]:.0f} TFLOP/s, "
              f"{row['gbps'][algo]:.0f} GB/s, workspace "
              f"{row['workspace_bytes'][algo] / 1e6:.2f} MB, {check}", flush=True)
    if args.state and logits is not None:
        progress(f"decode state B={B} context={context} next_n={next_n} k={k}")

        def logits_of(q):
            litetopk.ops.fp8_paged_mqa_logits(q, *operands[1:], max_context, out=logits)
            return logits

        bench_state(inputs, logits_of, ends, k, row, args, record)
    return row


def fmt(value, digits=3, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def markdown_table(rows, peer_rows):
    head = ("| B x context, next_n | DeepGEMM logits ms (anchor) | + torch.topk ms (anchor) "
            "| logits ms | logits GB/s | auto ms | unfused ms | fused ms | fused TFLOP/s "
            "| fused GB/s | fused aux MB | auto picks | best vs DeepGEMM + torch.topk | exact ")
    if peer_rows:
        head += ("| DeepGEMM logits ms (run) | + torch.topk ms | + litetopk select ms "
                 "| logits bit-identical ")
    head += "| notes |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for row in rows:
        ms, dg = row["ms"], row.get("deepgemm") or {}
        peer = row.get("peer") or {"ms": {}}
        ours = [ms[a] for a in ALGOS if a in ms]
        best = min(ours) if ours else None
        baseline = peer["ms"].get("torch_topk") or dg.get("torch_topk_total_ms")
        checked = row["verified"]
        exact = "-" if not checked else ("yes" if all(checked.values()) else "NO")
        notes = "; ".join(f"{key}: {text}" for key, text in row["notes"].items())
        cells = [
            f"{row['B']} x {row['context'] // KI}K, {row['next_n']}",
            fmt(dg.get("logits_ms")), fmt(dg.get("torch_topk_total_ms")), fmt(ms.get("logits")),
            fmt(row["gbps"].get("logits"), 0), fmt(ms.get("auto")), fmt(ms.get("unfused")),
            fmt(ms.get("fused")), fmt(row["tflops"].get("fused"), 0),
            fmt(row["gbps"].get("fused"), 0),
            fmt(row["workspace_bytes"].get("fused", 0) / 1e6 if "fused" in
                row["workspace_bytes"] else None, 2),
            row.get("dispatched", "-"),
            fmt(baseline / best if best and baseline else None, 2, "x"), exact,
        ]
        if peer_rows:
            same = peer.get("logits_bit_identical")
            cells += [fmt(peer["ms"].get("logits")), fmt(peer["ms"].get("torch_topk")),
                      fmt(peer["ms"].get("litetopk_select")),
                      "-" if same is None else ("yes" if same else "NO")]
        cells.append(notes.replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def decode_table(rows):
    """The decode table: DeepGEMM's logits and + our topk beside our unfused and the state path
    (fused and auto, coherent and iid)."""
    head = ("| B x ctx, next_n | DG logits | DG + our topk | DG + torch.topk | our logits "
            "| unfused | fused, coherent | auto, coherent | fused, iid | auto, iid | auto picks "
            "| exact | notes |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for row in rows:
        ms, peer = row["ms"], (row.get("peer") or {"ms": {}})
        picks = row.get("state_dispatched", {}).get("auto_state_coherent", "-")
        checked = row["verified"]
        exact = "-" if not checked else ("yes" if all(checked.values()) else "NO")
        notes = "; ".join(f"{key}: {text}" for key, text in row["notes"].items())
        cells = [f"{row['B']} x {row['context'] // KI}K, {row['next_n']}",
                 fmt(peer["ms"].get("logits"), 4), fmt(peer["ms"].get("litetopk_select"), 4),
                 fmt(peer["ms"].get("torch_topk"), 4), fmt(ms.get("logits"), 4),
                 fmt(ms.get("unfused"), 4), fmt(ms.get("fused_state_coherent"), 4),
                 fmt(ms.get("auto_state_coherent"), 4), fmt(ms.get("fused_state_iid"), 4),
                 fmt(ms.get("auto_state_iid"), 4), picks, exact, notes.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "paged_indexer", "BxCONTEXTxNEXT_N", "32x131072x1", iters=20,
                         warmup=5)
    parser.add_argument("--json", dest="out", default=argparse.SUPPRESS,
                        help="write the JSON record here (the same as --out)")
    parser.add_argument("--quick", action="store_true",
                        help=f"only small shapes: {', '.join('x'.join(map(str, s)) for s in QUICK_SHAPES)}")
    parser.add_argument("--heads", type=int, default=H_DEFAULT, help="H (32 or 64)")
    parser.add_argument("--k", type=int, default=K_DEFAULT)
    parser.add_argument("--graphs", action="store_true",
                        help="time each call as a CUDA graph replay (as engines run decode)")
    parser.add_argument("--contexts", choices=["full", "ragged"], default="full",
                        help="every request at the context (full) or request 0 at it and the "
                             "others in (context / 2, context] (ragged)")
    parser.add_argument("--state", action="store_true",
                        help="also the decode state path (fused and auto with a state carried "
                             "between graph replays) on a coherent and an iid workload; needs "
                             "--graphs")
    parser.add_argument("--peer", choices=["deepgemm"],
                        help="also measure DeepGEMM's paged logits (+ torch.topk, + litetopk "
                             "select) in this process, when bench/deepgemm_peer.py can load it")
    args = parser.parse_args()
    if args.state and not args.graphs:
        parser.error("--state needs --graphs (the state is carried between graph replays)")
    require_cuda("paged_indexer_bench.py")
    torch.backends.cuda.matmul.allow_tf32 = False

    dg = deepgemm_peer.load() if args.peer == "deepgemm" else None
    if args.peer:
        print(deepgemm_peer.describe(dg), flush=True)
    if args.only_shapes:
        shapes = list(args.shapes)
    else:
        shapes = (QUICK_SHAPES if args.quick else DEFAULT_SHAPES) + list(args.shapes)
    progress = Progress(len(shapes) * (2 + len(ALGOS) + (4 if dg is not None else 0)
                                       + (1 if args.state else 0)))

    rows = []
    for shape in shapes:
        try:
            rows.append(bench_shape(dg, shape, args, progress))
        except Exception as error:  # one bad row must not stop the others
            B, context, next_n = shape
            print(f"  row B={B} context={context} next_n={next_n} failed: {error!r}", flush=True)
            traceback.print_exc()
            rows.append({"B": B, "context": context, "next_n": next_n, "H": args.heads,
                         "k": args.k, "ms": {}, "tflops": {}, "pct_fp8_peak": {}, "gbps": {},
                         "workspace_bytes": {}, "verified": {},
                         "notes": {"row": f"failed: {error!r}"}, "deepgemm": None})
        torch.cuda.empty_cache()

    record = result_record(
        "Paged decode indexer + top-k (DeepGEMM fp8_paged_mqa_logits layouts, 64-token pages, "
        "D=128; DeepGEMM's test inputs: bf16 randn cast to fp8, per-token key scales, random "
        "page permutation, every request `context` tokens): litetopk fp8_paged_mqa_topk auto / "
        "unfused / fused and fp8_paged_mqa_logits alone, CUDA events, median of iters after "
        "warmup" + (", CUDA graph replays" if args.graphs else "") + "; TFLOP/s = 2 * valid "
        "pairs * H * D / time; GB/s = visible key bytes and scales (once per request) + q + "
        "weights over time; deepgemm: anchor numbers (shared/anchors/"
        "h200_dsa_paged_with_ltk_select_2026-11-30.json); peer: measured in this run "
        "(--peer deepgemm)",
        args, rows, fp8_peak_tflops=FP8_PEAK_TFLOPS, hbm_tbps=HBM_TBPS, graphs=args.graphs,
        peer=deepgemm_peer.describe(dg) if args.peer else None)
    table = (decode_table(rows) if args.state else
             markdown_table(rows, any(row.get("peer") for row in rows)))
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}, litetopk "
                  f"{record['litetopk']}" + (", CUDA graphs" if args.graphs else ""))
    print_results(table, args)
    if any(not ok for row in rows for ok in row["verified"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
