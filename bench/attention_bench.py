#!/usr/bin/env python3
"""Sparse MLA attention (issue 13): litetopk's sparse_attention, side by side with FlashMLA.

Issue 13's table: s_q 4096 queries, s_kv 128K kv rows, topk 2048, d_qk 576, d_v 512, h_q in
{16, 32, 64, 128}, and four index patterns: random rows, and groups of 8 neighbouring queries
sharing 50%, 80% or 100% of their indices. Inputs are drawn with torch on the GPU by
bench/flashmla_peer.py's generator, with the semantics of testkit/sparse_attention_workload.h
(q and kv N(0, 1) bf16, sm_scale 1 / sqrt(d_qk), every slot valid unless --padding or
--out-of-range ask otherwise); the overlap actually generated is measured with the testkit's
metric (group_overlap) and printed beside each row. One kv and one set of index rows per pattern
are shared by the four h_q; q is drawn per h_q.

litetopk: `torch.ops.litetopk.sparse_attention(q, kv, indices, sm_scale, 512, algo)` (outputs
allocated by each call, as FlashMLA's are), from the installed package (`pip install .`) or
python/ of this repository, one row per algorithm of --algos (default auto; e.g. --algos
per-query,union-packed,plain; union-packed takes h_q 16 and 32 only, elsewhere its row holds the
library's error as a note). Timing: CUDA events around each call, median (and min) of --iters
after --warmup. TFLOP/s = 2 * valid slots * heads * (d_qk + d_v) / time, heads being the real h_q
for litetopk and the heads FlashMLA computes (64 or 128) for FlashMLA. Each litetopk result is
checked against an fp32 torch reference on --check-queries evenly spaced queries.

--peer flashmla: when bench/flashmla_peer.py's load() finds FlashMLA (built outside the tree; its
build prints the PYTHONPATH to export), flash_mla_sparse_fwd is timed in this process on the same
inputs, at max(h_q, 64) heads: q is padded with zero heads for h_q 16 and 32 (as engines do; the
padding copy is made once and not timed) and the indices with -1 to a multiple of 128 when needed.
The columns: its ms and TFLOP/s, litetopk's speed relative to it (FlashMLA ms / litetopk ms) and
issue 13's target for that cell, and a check of litetopk's (out, max_logits, lse) against
FlashMLA's on the real heads, every query: FlashMLA's max_logits and lse are natural-log at the
commit we build (converted to base 2 here, litetopk's convention); out is compared with a bf16
tolerance (see compare()). Without FlashMLA the columns stay empty, the reason is printed, and the
ratio falls back to issue 13's FlashMLA numbers (marked "anchor") where the shape is the issue's.
FlashMLA runs once per (shape, h_q, pattern); each algorithm's row carries its time and its own
check against FlashMLA's result. No L2 flush between calls: kv (151 MB) and q (up to 604 MB)
exceed the 60 MB L2.

--peer flashinfer (with or without flashmla: --peer flashmla flashinfer): when
bench/flashinfer_peer.py's load() finds FlashInfer (its source unpacked outside the tree, see
docs/attention.md, "FlashInfer"), its SM90 MLA kernel is timed the way vLLM's
FLASHINFER_MLA_SPARSE_SM90 backend calls it (BatchMLAPagedAttentionWrapper, fa3, page size 1, one
batch row per query over its valid indices; the host plan is made once per (shape, h_q, pattern)
and not timed) at the real h_q, and litetopk's out and lse are checked against its out and base-2
lse (it returns no max_logits). Columns FlashInfer ms and litetopk vs FlashInfer (FlashInfer ms /
litetopk ms) join the table when it ran. Issue 23 asks for it at h_q 8 and 16 (--heads 8 16;
litetopk rows at h_q 8 hold the library's error as a note until it takes 8 heads).

Writes JSON (--json, alias --out) and a markdown table (--md); prints progress lines, then the
table last. A failing row or column is reported and the rest still run; the exit status is 1 when
a check failed. Needs a CUDA GPU and a litetopk build with its CUDA backend; `--help` works
anywhere, and `--device cpu` runs the script's logic on tiny shapes with litetopk's CPU reference
op (wall-clock timing: a smoke test, not a measurement).
"""
import argparse
import math
import statistics
import sys
import time
import traceback

import torch

import flashinfer_peer
import flashmla_peer
from litetopk_bench_common import (Progress, add_common_arguments, litetopk, print_results,
                                   require_cuda, result_record, time_cuda, write_results)
from litetopk._ext import ext  # noqa: E402 (after the path fallback)

SPARSE_ATTENTION_ALGOS = tuple(ext().SparseAttentionAlgo.__members__)

KI = 1024
D_V = 512
HEADS = (16, 32, 64, 128)
HEAD_CHOICES = (8,) + HEADS  # 8: tensor-parallel slices of 64-head models (issue 23)
OVERLAPS = (None, 0.5, 0.8, 1.0)  # None: random rows
GROUP = 8
DEFAULT_SHAPES = [(4096, 128 * KI, 2048)]
QUICK_SHAPES = [(256, 32 * KI, 2048)]
CPU_SHAPES = [(16, 4096, 256)]  # --device cpu: the CPU reference op is slow

# Issue 13's targets: litetopk's speed over FlashMLA's (FlashMLA ms / litetopk ms) at h_q, by
# overlap (None: random rows). At 16 and 32 heads FlashMLA runs padded to 64.
TARGETS = {
    16: {0.5: 1.5, 0.8: 2.3, 1.0: 3.5},
    32: {0.5: 1.3, 0.8: 1.6, 1.0: 1.9},
    64: {None: 0.95, 0.5: 0.95, 0.8: 0.95, 1.0: 0.95},
    128: {None: 0.95, 0.5: 0.95, 0.8: 0.95, 1.0: 0.95},
}
# FlashMLA's ms in issue 13 (shared/H200.md; FlashMLA commit not recorded), at the heads it runs,
# for s_q 4096, s_kv 128K, topk 2048, d_qk 576: used only when the peer is not measured.
ANCHOR_SHAPE = (4096, 128 * KI, 2048, 576)
FLASHMLA_ANCHORS = {
    (64, None): 2.29, (64, 0.5): 2.09, (64, 1.0): 1.92,
    (128, None): 4.04, (128, 0.5): 3.85, (128, 1.0): 3.65,
}

# The out tolerance (compare()): per kernel, bf16 probabilities in the second product (each
# within 2^-9 relative: at most 2^-9 max|v| on an output) and out's own bf16 rounding (2^-9
# relative), with 25% margin on the first for fp32 accumulation and online rescaling; the two
# kernels' errors add. Those are bounds; the typical error is far smaller, so the relative RMS
# error must also stay below 2^-8 per kernel (about 2e-3 per kernel measured on a simulation of
# the rounding with N(0, 1) inputs). max_logits and lse (base 2, fp32 sums of exact bf16
# products): within 1e-4 + 2^-12 relative.
PROBABILITY_ROUNDING = 2.0 ** -9
OUT_ROUNDING = 2.0 ** -9
REL_RMS_PER_KERNEL = 2.0 ** -8
STATS_ABS, STATS_REL = 1e-4, 2.0 ** -12


def parse_overlap(text):
    """'random' -> None; '0.5' or '50' or '50%' -> 0.5."""
    text = text.strip().lower().rstrip("%")
    if text in ("random", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an overlap is 'random' or a fraction, got {text}")
    if value > 1.0:
        value /= 100.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"an overlap must be in [0, 1] (or 0-100%), got {text}")
    return value


def parse_algos(text):
    """'per-query, union-packed' -> ('per-query', 'union-packed'): litetopk's sparse attention
    algorithms, in order, each once."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    bad = [name for name in names if name not in SPARSE_ATTENTION_ALGOS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"algos must be a comma list of {', '.join(SPARSE_ATTENTION_ALGOS)}, got {text!r}")
    return names


def overlap_cell(overlap, group):
    return "random" if overlap is None else f"{group} x {overlap * 100:g}%"


# --- checks ---------------------------------------------------------------------------------------

def _stats_close(got, want):
    """(ok, max abs error, message) for max_logits or lse in base 2: same -inf/+inf/NaN pattern,
    finite values within STATS_ABS + STATS_REL |want|."""
    got, want = got.float(), want.float()
    for name, test in (("+inf", torch.isposinf), ("-inf", torch.isneginf), ("NaN", torch.isnan)):
        if not torch.equal(test(got), test(want)):
            return False, math.inf, f"{name} pattern differs"
    finite = torch.isfinite(want)
    if not bool(finite.any()):
        return True, 0.0, "no finite values"
    err = (got[finite] - want[finite]).abs()
    bad = err > STATS_ABS + STATS_REL * want[finite].abs()
    worst = float(err.max())
    if bool(bad.any()):
        return False, worst, f"{int(bad.sum())} off (max abs err {worst:.3g})"
    return True, worst, f"max abs err {worst:.2e}"


def compare(got, want, v_max, kernels, chunk=256):
    """litetopk's (out, max_logits, lse) against `want`'s, both base 2 over the same heads.

    kernels: how many bf16 kernels the difference spans (1 against the fp32 reference, 2 against
    FlashMLA). out passes when every element is within kernels * (PROBABILITY_ROUNDING * 1.25 *
    v_max + OUT_ROUNDING * |want|) + 1e-6 (v_max = max |value| over kv's value columns) and the
    relative RMS error ||got - want|| / ||want|| is at most kernels * REL_RMS_PER_KERNEL; also
    reported: the max abs error and the cosine difference 1 - cos(got, want). Returns a dict with
    ok and a one-line message."""
    out, max_logits, lse = got
    want_out, want_max_logits, want_lse = want
    s_q = out.shape[0]
    violations, worst = 0, 0.0
    err2 = want2 = got2 = dot = 0.0
    finite = True
    for s0 in range(0, s_q, chunk):
        a = out[s0:s0 + chunk].float()
        b = want_out[s0:s0 + chunk].float()
        finite &= bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all())
        err = (a - b).abs()
        bound = kernels * (PROBABILITY_ROUNDING * 1.25 * v_max + OUT_ROUNDING * b.abs()) + 1e-6
        violations += int((err > bound).sum())
        worst = max(worst, float(err.max()) if err.numel() else 0.0)
        err2 += float(err.double().square().sum())
        want2 += float(b.double().square().sum())
        got2 += float(a.double().square().sum())
        dot += float((a.double() * b.double()).sum())
        del a, b, err, bound
    rel_rms = math.sqrt(err2 / want2) if want2 > 0 else math.sqrt(err2)
    cos_diff = 1.0 - dot / math.sqrt(got2 * want2) if got2 > 0 and want2 > 0 else 0.0
    m_ok, m_err, m_msg = _stats_close(max_logits, want_max_logits)
    l_ok, l_err, l_msg = _stats_close(lse, want_lse)
    out_ok = finite and violations == 0 and rel_rms <= kernels * REL_RMS_PER_KERNEL
    out_msg = (f"out max abs err {worst:.2e}, rel RMS {rel_rms:.1e}, cos diff {cos_diff:.1e}"
               + ("" if finite else ", NON-FINITE values")
               + (f", {violations} elements beyond the bound" if violations else ""))
    return {"ok": out_ok and m_ok and l_ok, "out_ok": out_ok, "out_max_abs_err": worst,
            "out_rel_rms": rel_rms, "out_cos_diff": cos_diff, "out_bound_violations": violations,
            "max_logits_ok": m_ok, "max_logits_max_abs_err": m_err, "lse_ok": l_ok,
            "lse_max_abs_err": l_err,
            "message": f"{out_msg}; max_logits {m_msg}; lse {l_msg}"}


def check_against_reference(q, kv, indices, sm_scale, result, v_max, count):
    """compare() of litetopk's result on `count` evenly spaced queries against the fp32 torch
    reference (natural log there, converted to base 2)."""
    s_q = q.shape[0]
    picks = torch.linspace(0, s_q - 1, min(count, s_q)).round().long().unique().to(q.device)
    ref_out, ref_m, ref_l = flashmla_peer.reference(q[picks], kv, indices[picks], sm_scale, D_V)
    ref_m, ref_l = flashmla_peer.to_base2(ref_m, ref_l)
    out, max_logits, lse = result
    return compare((out[picks], max_logits[picks], lse[picks]), (ref_out, ref_m, ref_l), v_max,
                   kernels=1)


# --- timing ---------------------------------------------------------------------------------------

def make_timer(args):
    """timer(fn) -> (median ms, min ms): CUDA events on the GPU, wall clock with --device cpu."""
    if args.device == "cuda":
        return lambda fn: time_cuda(lambda _: fn(), args.warmup, args.iters)

    def wall(fn):
        for _ in range(args.warmup):
            fn()
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), min(times)
    return wall


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


# --- one row per algo -----------------------------------------------------------------------------

def run_flashmla(fm, q, kv, indices, topk, sm_scale, valid, h_q, args, progress, timer, label):
    """FlashMLA at one (shape, h_q, overlap): (its record for the rows: heads, ms, TFLOP/s,
    notes; its first result on litetopk's heads and base-2 stats, and its raw stats on those
    heads, for each algo's check; None, None when it failed)."""
    progress(f"FlashMLA {label}")
    peer = {"heads": flashmla_peer.padded_heads(h_q), "ms": None, "ms_min": None,
            "tflops": None, "check": None, "notes": {}}
    want = raw = None
    try:
        q_p, kv_p, idx_p = flashmla_peer.prepare(q, kv, indices)
        if idx_p.shape[-1] != topk:
            peer["notes"]["topk"] = f"indices padded with -1 to {idx_p.shape[-1]} slots"

        def theirs():
            return flashmla_peer.sparse_prefill(q_p, kv_p, idx_p, sm_scale, D_V)

        first = flashmla_peer.sparse_prefill(q_p, kv_p, idx_p, sm_scale, D_V, check=True)
        synchronize(args.device)
        want = flashmla_peer.as_litetopk(first, h_q)
        raw = (first[0][:, :h_q], first[1][:, :h_q], first[2][:, :h_q])
        del first
        median, fastest = timer(theirs)
        peer["ms"], peer["ms_min"] = median, fastest
        peer["tflops"] = 2.0 * valid * peer["heads"] * (args.d_qk + D_V) / (median * 1e-3) / 1e12
        print(f"  {median:.3f} ms at {peer['heads']} heads, {peer['tflops']:.0f} TFLOP/s",
              flush=True)
        del q_p, idx_p
    except Exception as error:  # noqa: BLE001 (a peer failure is a note, not a crash)
        peer["notes"]["error"] = str(error).splitlines()[0]
        print(f"  FlashMLA error: {peer['notes']['error']}", flush=True)
    return peer, want, raw


def check_against_flashmla(result, want, raw, v_max):
    """compare() of litetopk's result against FlashMLA's on the real heads."""
    check = compare(result, want, v_max, kernels=2)
    if not (check["max_logits_ok"] and check["lse_ok"]):
        # An older FlashMLA (before its 2026-01 refactor) returns base-2 stats.
        if compare(result, raw, v_max, kernels=2)["ok"]:
            check["message"] += ("; FlashMLA's stats match as base 2 without conversion: an "
                                 "older FlashMLA build?")
    return check


def run_flashinfer(fi, q, kv, indices, sm_scale, valid, args, progress, timer, label):
    """FlashInfer at one (shape, h_q, overlap): (its record for the rows: ms, TFLOP/s over the
    real heads, plan seconds, notes; its first result as (out, None, lse) for each algo's check,
    None when it failed)."""
    progress(f"FlashInfer {label}")
    peer = {"heads": q.shape[1], "ms": None, "ms_min": None, "tflops": None, "plan_s": None,
            "check": None, "notes": {}}
    want = None
    try:
        t0 = time.perf_counter()
        call = flashinfer_peer.SparsePrefill(q, kv, indices, sm_scale)
        synchronize(args.device)
        peer["plan_s"] = time.perf_counter() - t0
        want = flashinfer_peer.as_litetopk(call())
        synchronize(args.device)
        median, fastest = timer(call)
        peer["ms"], peer["ms_min"] = median, fastest
        peer["tflops"] = 2.0 * valid * peer["heads"] * (args.d_qk + D_V) / (median * 1e-3) / 1e12
        print(f"  {median:.3f} ms, {peer['tflops']:.0f} TFLOP/s (plan {peer['plan_s']:.2f} s, "
              f"untimed)", flush=True)
        del call
    except Exception as error:  # noqa: BLE001 (a peer failure is a note, not a crash)
        peer["notes"]["error"] = str(error).splitlines()[0]
        print(f"  FlashInfer error: {peer['notes']['error']}", flush=True)
    return peer, want


def check_against_flashinfer(result, want, v_max):
    """compare() of litetopk's out and lse against FlashInfer's (two kernels); FlashInfer returns
    no max_logits, so litetopk's own stand in for them and pass trivially."""
    check = compare(result, (want[0], result[1], want[2]), v_max, kernels=2)
    check["message"] += " (max_logits: FlashInfer returns none)"
    return check


def bench_rows(fm, shape, h_q, overlap, kv, indices, pattern, v_max, args, progress, timer,
               fi=None):
    """litetopk under each of --algos (and FlashMLA and FlashInfer with --peer, each run once
    and shared by the rows) at one (shape, h_q, overlap): one row per algo with its times,
    TFLOP/s and checks; errors become notes."""
    s_q, s_kv, topk = shape
    d_qk = args.d_qk
    sm_scale = d_qk ** -0.5
    valid = pattern["valid_pairs"]
    label = f"h_q={h_q} {flashmla_peer.overlap_label(overlap, args.group)}"
    q = flashmla_peer.make_q(s_q, h_q, d_qk, args.q_std, args.seed, args.device)
    peer = want = raw = None
    if fm is not None:
        peer, want, raw = run_flashmla(fm, q, kv, indices, topk, sm_scale, valid, h_q, args,
                                       progress, timer, label)
    fi_peer = fi_want = None
    if fi is not None:
        fi_peer, fi_want = run_flashinfer(fi, q, kv, indices, sm_scale, valid, args, progress,
                                          timer, label)
    rows = []
    for algo in args.algos:
        row = {"s_q": s_q, "s_kv": s_kv, "topk": topk, "h_q": h_q, "algo": algo, "d_qk": d_qk,
               "d_v": D_V, "overlap": overlap, "group": args.group, "pattern": pattern,
               "valid_pairs": valid, "flops": 2.0 * valid * h_q * (d_qk + D_V), "ms": None,
               "ms_min": None, "tflops": None, "check_reference": None,
               "flashmla": None if peer is None else dict(peer, notes=dict(peer["notes"])),
               "flashinfer": None if fi_peer is None else dict(fi_peer,
                                                                notes=dict(fi_peer["notes"])),
               "notes": {}}

        def ours():
            return torch.ops.litetopk.sparse_attention(q, kv, indices, sm_scale, D_V, algo)

        progress(f"litetopk {algo} {label}")
        try:
            result = ours()
            synchronize(args.device)
            if args.check_queries > 0:
                row["check_reference"] = check_against_reference(q, kv, indices, sm_scale,
                                                                 result, v_max, args.check_queries)
                if not row["check_reference"]["ok"]:
                    row["notes"]["reference"] = "MISMATCH: " + row["check_reference"]["message"]
            if want is not None:
                check = row["flashmla"]["check"] = check_against_flashmla(result, want, raw,
                                                                          v_max)
                if not check["ok"]:
                    row["notes"]["flashmla check"] = "MISMATCH: " + check["message"]
            if fi_want is not None:
                check = row["flashinfer"]["check"] = check_against_flashinfer(result, fi_want,
                                                                              v_max)
                if not check["ok"]:
                    row["notes"]["flashinfer check"] = "MISMATCH: " + check["message"]
            del result
            median, fastest = timer(ours)
            row["ms"], row["ms_min"] = median, fastest
            row["tflops"] = row["flops"] / (median * 1e-3) / 1e12
            checks = [(name, row_check) for name, row_check in
                      (("reference", row["check_reference"]),
                       ("FlashMLA", (row["flashmla"] or {}).get("check")),
                       ("FlashInfer", (row["flashinfer"] or {}).get("check"))) if row_check]
            print(f"  {median:.3f} ms, {row['tflops']:.0f} TFLOP/s"
                  + "".join(f"; vs {name}: {'ok' if c['ok'] else 'MISMATCH'} ({c['message']})"
                            for name, c in checks), flush=True)
        except (RuntimeError, ValueError, torch.cuda.OutOfMemoryError) as error:
            row["notes"]["litetopk"] = str(error).splitlines()[0]
            print(f"  error: {row['notes']['litetopk']}", flush=True)

        # litetopk's speed over FlashMLA's, measured or from issue 13's numbers, and the target.
        flashmla_ms, source = None, None
        if row["flashmla"] and row["flashmla"]["ms"]:
            flashmla_ms, source = row["flashmla"]["ms"], "measured"
        elif (s_q, s_kv, topk, d_qk) == ANCHOR_SHAPE and not args.padding and not args.out_of_range:
            flashmla_ms = FLASHMLA_ANCHORS.get((flashmla_peer.padded_heads(h_q), overlap))
            source = "anchor" if flashmla_ms else None
        row["speedup"] = flashmla_ms / row["ms"] if flashmla_ms and row["ms"] else None
        flashinfer_ms = (row["flashinfer"] or {}).get("ms")
        row["speedup_flashinfer"] = (flashinfer_ms / row["ms"] if flashinfer_ms and row["ms"]
                                     else None)
        row["speedup_source"] = source
        row["target"] = TARGETS.get(h_q, {}).get(overlap)
        row["target_met"] = (None if row["target"] is None or row["speedup"] is None
                             else row["speedup"] >= row["target"])
        rows.append(row)
    return rows


def failed_rows(shape, h_q, overlap, args, error):
    """One failed row per algo."""
    return [failed_row(shape, h_q, algo, overlap, args, error) for algo in args.algos]


def failed_row(shape, h_q, algo, overlap, args, error):
    s_q, s_kv, topk = shape
    return {"s_q": s_q, "s_kv": s_kv, "topk": topk, "h_q": h_q, "algo": algo, "d_qk": args.d_qk,
            "d_v": D_V,
            "overlap": overlap, "group": args.group, "pattern": None, "ms": None, "tflops": None,
            "check_reference": None, "flashmla": None, "flashinfer": None, "speedup": None,
            "speedup_source": None, "speedup_flashinfer": None,
            "target": TARGETS.get(h_q, {}).get(overlap), "target_met": None,
            "notes": {"row": f"failed: {error!r}"}}


# --- output ---------------------------------------------------------------------------------------

def fmt(value, digits=3, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def size_cell(n):
    return f"{n // KI}K" if n >= KI and n % KI == 0 else str(n)


def check_cell(row):
    parts = []
    for name, check in (("ref", row.get("check_reference")),
                        ("FlashMLA", (row.get("flashmla") or {}).get("check")),
                        ("FlashInfer", (row.get("flashinfer") or {}).get("check"))):
        if check:
            parts.append(f"{name} {'ok' if check['ok'] else 'NO'}"
                         + (f" (rel {check['out_rel_rms']:.1e})" if name != "ref" else ""))
    return ", ".join(parts) or "-"


def markdown_table(rows):
    head = ("| s_q x s_kv, topk | h_q | algo | indices | overlap measured | litetopk ms "
            "| litetopk TFLOP/s | FlashMLA heads | FlashMLA ms | FlashMLA TFLOP/s "
            "| litetopk vs FlashMLA | target | met | check | notes |")
    with_flashinfer = any(row.get("flashinfer") for row in rows)
    if with_flashinfer:
        head += " FlashInfer ms | FlashInfer TFLOP/s | litetopk vs FlashInfer |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for row in rows:
        peer = row.get("flashmla") or {}
        pattern = row.get("pattern") or {}
        measured = pattern.get("mean_overlap")
        notes = dict(row["notes"])
        notes.update({f"FlashMLA {key}": text for key, text in (peer.get("notes") or {}).items()})
        fi_peer = row.get("flashinfer") or {}
        notes.update({f"FlashInfer {key}": text
                      for key, text in (fi_peer.get("notes") or {}).items()})
        speedup = row.get("speedup")
        speed_cell = fmt(speedup, 2, "x") + (" (anchor)" if speedup and
                                             row.get("speedup_source") == "anchor" else "")
        met = row.get("target_met")
        cells = [
            f"{row['s_q']} x {size_cell(row['s_kv'])}, {row['topk']}", str(row["h_q"]),
            row.get("algo", "auto"), overlap_cell(row["overlap"], row["group"]),
            "-" if measured is None else f"{measured:.2f}",
            fmt(row.get("ms")), fmt(row.get("tflops"), 0),
            str(peer["heads"]) if peer else str(flashmla_peer.padded_heads(row["h_q"])),
            fmt(peer.get("ms")), fmt(peer.get("tflops"), 0), speed_cell,
            f">= {row['target']:.2f}x" if row.get("target") else "-",
            "-" if met is None else ("yes" if met else "no"), check_cell(row),
            "; ".join(f"{key}: {text}" for key, text in notes.items()).replace("|", "/"),
        ]
        if with_flashinfer:
            cells += [fmt(fi_peer.get("ms")), fmt(fi_peer.get("tflops"), 0),
                      fmt(row.get("speedup_flashinfer"), 2, "x")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def make_record(what, args, rows, **extra):
    if args.device == "cuda":
        return result_record(what, args, rows, **extra)
    import datetime  # noqa: PLC0415
    return {"what": what,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": "cpu (smoke run, not a measurement)", "torch": torch.__version__,
            "litetopk": litetopk.build_info()["version"], **extra, "iters": args.iters,
            "warmup": args.warmup, "rows": rows}


# --- main -----------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "attention", "SQxSKVxTOPK", "4096x131072x2048", iters=10,
                         warmup=3)
    parser.add_argument("--json", dest="out", default=argparse.SUPPRESS,
                        help="write the JSON record here (the same as --out)")
    parser.add_argument("--quick", action="store_true",
                        help="small shapes instead of issue 13's: "
                             + ", ".join("x".join(map(str, s)) for s in QUICK_SHAPES))
    parser.add_argument("--heads", type=int, nargs="+", default=list(HEADS),
                        choices=HEAD_CHOICES, help="h_q values, of 8 16 32 64 128 (default: 16 "
                        "32 64 128)")
    parser.add_argument("--overlaps", type=parse_overlap, nargs="+", default=list(OVERLAPS),
                        help="index patterns: 'random' and/or shared fractions of a group "
                             "(0.5 or 50; default: random 0.5 0.8 1)")
    parser.add_argument("--group", type=int, default=GROUP,
                        help="G, the neighbouring queries that share indices (default 8)")
    parser.add_argument("--d-qk", type=int, choices=(576, 512), default=576)
    parser.add_argument("--q-std", type=float, default=1.0)
    parser.add_argument("--kv-std", type=float, default=1.0)
    parser.add_argument("--padding", type=float, default=0.0,
                        help="fraction of each row's slots left as trailing -1 (default 0)")
    parser.add_argument("--out-of-range", type=float, default=0.0,
                        help="fraction of each row's slots holding out-of-range indices "
                             "(skipped; default 0)")
    parser.add_argument("--check-queries", type=int, default=8,
                        help="queries of each litetopk result checked against the fp32 torch "
                             "reference (0: none; default 8)")
    parser.add_argument("--peer", nargs="+", choices=["flashmla", "flashinfer"], default=[],
                        help="also time FlashMLA's flash_mla_sparse_fwd and/or FlashInfer's SM90 "
                             "MLA (vLLM's FLASHINFER_MLA_SPARSE_SM90 call) in this process and "
                             "check litetopk against them, when bench/flashmla_peer.py and "
                             "bench/flashinfer_peer.py can load them")
    parser.add_argument("--algos", type=parse_algos, default="auto",
                        help="litetopk's kernels to time, a comma list of "
                             + ", ".join(SPARSE_ATTENTION_ALGOS)
                             + " (e.g. per-query,union-packed; default auto): one row each; "
                             "union-packed takes h_q 16 and 32 only (a note elsewhere)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a smoke test of this script on tiny shapes with litetopk's "
                             "CPU reference op (wall clock; not a measurement)")
    args = parser.parse_args()
    if args.device == "cuda":
        require_cuda("attention_bench.py")
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference in full fp32

    fm = flashmla_peer.load() if "flashmla" in args.peer else None
    fi = flashinfer_peer.load() if "flashinfer" in args.peer else None
    peer_lines = ([flashmla_peer.describe(fm)] if "flashmla" in args.peer else []) + (
        [flashinfer_peer.describe(fi)] if "flashinfer" in args.peer else [])
    for line in peer_lines:
        print(line, flush=True)
    if args.only_shapes:
        shapes = list(args.shapes)
    elif args.device == "cpu":
        shapes = CPU_SHAPES + list(args.shapes)
    else:
        shapes = (QUICK_SHAPES if args.quick else DEFAULT_SHAPES) + list(args.shapes)
    heads = sorted(set(args.heads))
    overlaps = list(dict.fromkeys(args.overlaps))
    timer = make_timer(args)
    progress = Progress(len(shapes) * len(overlaps) * len(heads)
                        * (len(args.algos) + (fm is not None) + (fi is not None)))

    rows = []
    for shape in shapes:
        s_q, s_kv, topk = shape
        kv = flashmla_peer.make_kv(s_kv, args.d_qk, args.kv_std, args.seed, args.device)
        v_max = float(kv[:, 0, :D_V].abs().max().float())
        for overlap in overlaps:
            try:
                t0 = time.perf_counter()
                indices = flashmla_peer.make_indices(s_q, s_kv, topk, overlap, args.group,
                                                     args.seed, args.padding, args.out_of_range,
                                                     args.device)
                pattern = flashmla_peer.group_overlap(indices, s_kv, args.group)
                synchronize(args.device)
                print(f"indices {s_q} x {topk} over {s_kv}, "
                      f"{flashmla_peer.overlap_label(overlap, args.group)}: measured overlap "
                      f"{fmt(pattern['mean_overlap'], 3)}, mean union {pattern['mean_union']:.0f}"
                      f", reuse {fmt(pattern['reuse'], 2)} ({time.perf_counter() - t0:.1f} s)",
                      flush=True)
            except Exception as error:  # noqa: BLE001 (one bad pattern must not stop the rest)
                print(f"  indices failed: {error!r}", flush=True)
                rows += [row for h_q in heads for row in failed_rows(shape, h_q, overlap, args,
                                                                        error)]
                continue
            for h_q in heads:
                try:
                    rows += bench_rows(fm, shape, h_q, overlap, kv, indices, pattern, v_max,
                                       args, progress, timer, fi)
                except Exception as error:  # noqa: BLE001 (one bad row must not stop the others)
                    print(f"  row h_q={h_q} failed: {error!r}", flush=True)
                    traceback.print_exc()
                    rows += failed_rows(shape, h_q, overlap, args, error)
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            del indices
        del kv

    peer_line = "; ".join(peer_lines) or None
    record = make_record(
        "Sparse MLA attention (issue 13): litetopk torch.ops.litetopk.sparse_attention (one row "
        "per algo: " + ", ".join(args.algos) + "), and "
        "with --peer flashmla FlashMLA flash_mla_sparse_fwd at max(h_q, 64) heads (q padded "
        "with zero heads, untimed), same inputs; q, kv N(0, q_std^2 / kv_std^2) bf16, sm_scale "
        "1/sqrt(d_qk), index rows from bench/flashmla_peer.py's generator (testkit semantics: "
        "random, or groups of G sharing a fraction), CUDA events, median of iters after warmup; "
        "TFLOP/s = 2 * valid slots * heads * (d_qk + d_v) / time; speedup = FlashMLA ms / "
        "litetopk ms (anchor: issue 13's FlashMLA numbers when not measured); with --peer "
        "flashinfer FlashInfer's SM90 MLA (BatchMLAPagedAttentionWrapper fa3, page size 1, one "
        "row per query, host plan untimed) at h_q heads, speedup_flashinfer = its ms / litetopk "
        "ms",
        args, rows, peer=peer_line, algos=list(args.algos), d_qk=args.d_qk, d_v=D_V,
        group=args.group, q_std=args.q_std, kv_std=args.kv_std, padding=args.padding,
        out_of_range=args.out_of_range, targets={str(h): {str(k): v for k, v in t.items()}
                                                 for h, t in TARGETS.items()})
    table = markdown_table(rows)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}, litetopk "
                  f"{record['litetopk']}" + (f"; {peer_line}" if peer_line else ""))
    print_results(table, args)
    checks = [row.get("check_reference") for row in rows]
    checks += [(row.get(peer) or {}).get("check") for row in rows
               for peer in ("flashmla", "flashinfer")]
    if any(check and not check["ok"] for check in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
