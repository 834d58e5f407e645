#!/usr/bin/env python3
"""Overlap study (issue 13, item 4): how much the top-k selections of G neighbouring queries
overlap on litetopk's own DSA indexer outputs. CPU only, numpy only (no torch, no GPU).

Each scenario is one causal prefill chunk: T queries at the end of S keys (ks = 0, ke[t] = S - T +
t + 1), H = 64 heads, D = 128, scored and selected by litetopk.indexer_topk, the CPU reference of
the indexer (fp64 scores rounded to fp32, exact selection). It runs once per scenario with k =
k_max (2048); the top k of a smaller k (256) are the k largest values of that selection, which is
the exact top k up to the choice among ties at the k-th value (--check verifies one scenario
against a direct call).

Inputs (fp8 e4m3 bytes, quantized as DeepSeek-V3.2 does: one fp32 scale per key row, amax / 448;
q rounded to e4m3 directly, values of standard deviation 1):
- keys "random": N(0, 1) rows. "clustered": the same, except that a fraction (--hot-fraction) of
  the keys belong to one of --clusters hot clusters: 0.8 * centre + 0.6 * noise (unit variance).
- queries: per head, a random walk over the chunk's positions, q[t+1] = sqrt(1 - a^2) q[t] + a *
  noise, q[0] ~ N(0, 1) (stationary: every q[t] is N(0, 1); neighbours' correlation is
  sqrt(1 - a^2), at distance d its d-th power). a = 1 gives independent queries (the worst case).
  Variants: "rope" rotates the first 64 columns of q and k by their positions (rotate-half RoPE,
  base 10000, as DeepSeek-V3.2's indexer does, without YaRN); "mean" gives every query a fixed
  per-head component: q = sqrt(m) * mu + sqrt(1 - m) * walk (m = --mean-fraction).
- weights [T, H]: a walk with the same a, divided by sqrt(H); "positive" takes its absolute value,
  "signed" keeps it.

Metrics, per k and per G in (2, 4, 8, 16), over groups [gG, (g + 1) G) of neighbouring queries
(the same definitions as testkit's measure_group_unions):
- union/k: the mean over groups of U / k, U = distinct selected tokens of the group (1 = all G
  selections identical, G = disjoint);
- overlap: the mean over groups of (sum n_q - U) / (sum n_q - max n_q) (1 identical, 0 disjoint;
  equal to shared_fraction on the generator's kGroupShared rows, so comparable with the issue's
  "X% shared");
- reuse: sum n_q / sum U (rows loaded per query unpacked / packed);
- chance: union/k of G independent uniform selections, (S / k)(1 - (1 - k / S)^G);
and the mean overlap |A_t & A_{t+d}| / k of queries d apart (d = 1 is the adjacent pairwise
overlap; chance k / S); and, per packing (h_q, G), the ideal tensor-core work ratio against
FlashMLA padded to 64 heads, 64 G / (union/k x max(64, G h_q)).

Writes JSON (--out) and a markdown summary (--md). Run from the repository root:
    python3 bench/overlap_study.py --check
(an installed litetopk, else python/ of this repository with its extension built; a CPU-only
build suffices). About 3 minutes on 2 cores.
"""
import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("litetopk") is None:
    # The source tree's package, with the extension a CMake build wrote into its build folder.
    sys.path.insert(0, os.path.join(REPO, "python"))
    sys.path.insert(1, os.path.join(os.environ.get("LITETOPK_BUILD",
                                                   os.path.join(REPO, "build", "release")),
                                    "python"))
import litetopk  # noqa: E402
from litetopk import fp8  # noqa: E402

GROUPS = (2, 4, 8, 16)
LAGS = (1, 2, 4, 8, 16)
ROPE_DIMS = 64
ROPE_BASE = 10000.0

# (keys, weights, a, variant): the main grid, then the variants.
A_VALUES = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02)
DEFAULT_SCENARIOS = (
    [(keys, weights, a, "") for keys in ("random", "clustered")
     for weights in ("positive", "signed") for a in A_VALUES]
    + [("clustered", "positive", a, "rope") for a in (1.0, 0.2, 0.05, 0.02)]
    + [(keys, "positive", a, "mean") for keys in ("random", "clustered") for a in (1.0, 0.2)]
)
QUICK_SCENARIOS = [("random", "signed", 1.0, ""), ("clustered", "positive", 0.05, ""),
                   ("clustered", "positive", 0.05, "rope")]


def walk(rng, steps, shape, a):
    """x[0] ~ N(0, 1); x[t+1] = sqrt(1 - a^2) x[t] + a N(0, 1): stationary N(0, 1) per entry."""
    noise = rng.standard_normal((steps,) + shape)
    x = np.empty_like(noise)
    x[0] = noise[0]
    keep = math.sqrt(max(0.0, 1.0 - a * a))
    for t in range(1, steps):
        x[t] = keep * x[t - 1] + a * noise[t]
    return x


def rope(x, positions):
    """Rotate-half RoPE on the first ROPE_DIMS columns of x [N, ..., D], row i at positions[i]."""
    half = ROPE_DIMS // 2
    freqs = ROPE_BASE ** (-np.arange(half) / half)
    angles = positions[:, None].astype(np.float64) * freqs[None, :]  # [N, half]
    shape = (len(positions),) + (1,) * (x.ndim - 2) + (half,)
    cos, sin = np.cos(angles).reshape(shape), np.sin(angles).reshape(shape)
    x = x.copy()
    x1, x2 = x[..., :half].copy(), x[..., half:ROPE_DIMS].copy()
    x[..., :half] = x1 * cos - x2 * sin
    x[..., half:ROPE_DIMS] = x2 * cos + x1 * sin
    return x


def make_inputs(args, keys, weights, a, variant, seed):
    rng = np.random.default_rng(seed)
    S, T, H, D = args.S, args.T, args.H, args.D
    kv = rng.standard_normal((S, D))
    if keys == "clustered":
        centres = rng.standard_normal((args.clusters, D))
        hot = rng.random(S) < args.hot_fraction
        which = rng.integers(0, args.clusters, S)
        kv[hot] = 0.8 * centres[which[hot]] + 0.6 * kv[hot]
    q = walk(rng, T, (H, D), a)
    if variant == "mean":
        mu = rng.standard_normal((H, D))
        q = math.sqrt(args.mean_fraction) * mu[None] + math.sqrt(1 - args.mean_fraction) * q
    if variant == "rope":
        q = rope(q, np.arange(S - T, S))
        kv = rope(kv, np.arange(S))
    w = walk(rng, T, (H,), a) / math.sqrt(H)
    if weights == "positive":
        w = np.abs(w)
    # Per-key fp8 quantization with an fp32 scale (amax / 448), q rounded directly.
    scale = np.maximum(np.abs(kv).max(axis=1), 1e-12) / fp8.E4M3_MAX
    kv_bytes = fp8.to_e4m3(kv / scale[:, None])
    q_bytes = fp8.to_e4m3(q)
    ks = np.zeros(T, np.int32)
    ke = np.arange(S - T + 1, S + 1, dtype=np.int32)
    return q_bytes, kv_bytes, scale.astype(np.float32), w.astype(np.float32), ks, ke


def top_of(indices, values, k):
    """The k largest of each row of a larger selection (rows hold distinct valid tokens)."""
    if k == indices.shape[1]:
        return indices
    part = np.argpartition(-values, k - 1, axis=1)[:, :k]
    return np.take_along_axis(indices, part, axis=1)


def selection_stats(sel, k, S):
    """Group unions and lagged pairwise overlaps of the rows of sel [T, k] (-1 = none)."""
    T = sel.shape[0]
    rows = [np.sort(r[r >= 0]) for r in sel]
    lags = {}
    for d in LAGS:
        if d < T:
            shared = [len(np.intersect1d(rows[t], rows[t + d], assume_unique=True))
                      for t in range(T - d)]
            lags[str(d)] = float(np.mean(shared) / k)
    groups = {}
    for G in GROUPS:
        unions, overlaps, total_n, total_u = [], [], 0, 0
        for g0 in range(0, T - G + 1, G):  # full groups only (T is a multiple of 16 here)
            members = rows[g0:g0 + G]
            n = [len(r) for r in members]
            U = len(np.unique(np.concatenate(members)))
            unions.append(U)
            total_n += sum(n)
            total_u += U
            if sum(n) > max(n):
                overlaps.append((sum(n) - U) / (sum(n) - max(n)))
        chance = (S / k) * (1.0 - (1.0 - k / S) ** G)
        groups[str(G)] = {
            "union_over_k": float(np.mean(unions) / k),
            "union_over_k_min": float(np.min(unions) / k),
            "union_over_k_max": float(np.max(unions) / k),
            "overlap": float(np.mean(overlaps)) if overlaps else None,
            "reuse": total_n / total_u,
            "chance_union_over_k": chance,
            "groups": len(unions),
        }
    return {"adjacent_overlap": lags.get("1"), "lag_overlap": lags, "groups": groups,
            "chance_pair_overlap": k / S}


# (h_q, G): packings the issue plans (G x h_q = 64 or 128 MMA rows) at the small head counts.
PACKINGS = ((16, 4), (16, 8), (32, 2), (32, 4))


def ideal_work_ratio(union_over_k, h_q, G):
    """FlashMLA's tensor-core work (each query: k rows x 64 padded heads) over a packed kernel's
    (each group: U rows x max(64, G h_q) MMA rows): an upper bound on the speedup that ignores
    building the union, the masks and every other cost."""
    return 64.0 * G / (union_over_k * max(64, G * h_q))


def scenario_name(keys, weights, a, variant):
    return f"{keys} keys, {weights} w, a={a:g}" + (f", {variant}" if variant else "")


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rounded(x):
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {key: rounded(value) for key, value in x.items()}
    if isinstance(x, list):
        return [rounded(value) for value in x]
    return x


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(result):
    meta = result["meta"]
    lines = [
        "# Overlap study: neighbouring queries' top-k on litetopk's indexer (CPU reference)",
        "",
        f"{meta['date']}, litetopk {meta['litetopk']['version']} @ {meta['commit']} "
        f"(CPU build), {meta['machine']}, {meta['seconds']:.0f} s.",
        f"Command: `{meta['command']}`",
        "",
        f"Causal chunk: T = {meta['T']} queries at the end of S = {meta['S']} keys, "
        f"H = {meta['H']}, D = {meta['D']}; clustered keys: {meta['clusters']} hot clusters "
        f"holding {meta['hot_fraction']:.0%} of the keys; mean variant: m = "
        f"{meta['mean_fraction']}. a: the queries' random-walk step (neighbours' correlation "
        "sqrt(1 - a^2); a = 1: independent). union/k: mean distinct tokens of a group of G "
        "neighbours over k (1 = identical selections, G = disjoint); overlap: (sum n - U) / "
        "(sum n - max n), comparable with the issue's \"X% shared\"; adj: mean |A_t & A_t+1| / k.",
        "",
    ]
    for k in meta["ks"]:
        chance = result["scenarios"][0]["k"][str(k)]
        lines += [
            f"## k = {k} (chance: adj {chance['chance_pair_overlap']:.3f}, union/k at G = 2, 4, "
            f"8, 16: " + ", ".join(f"{chance['groups'][str(G)]['chance_union_over_k']:.2f}"
                                   for G in GROUPS) + ")",
            "",
            "| scenario | adj | union/k G=2 | G=4 | G=8 | G=16 | overlap G=2 | G=4 | G=8 | G=16 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in result["scenarios"]:
            st = s["k"][str(k)]
            g = st["groups"]
            lines.append(
                f"| {s['name']} | {fmt(st['adjacent_overlap'])} | "
                + " | ".join(fmt(g[str(G)]["union_over_k"]) for G in GROUPS) + " | "
                + " | ".join(fmt(g[str(G)]["overlap"]) for G in GROUPS) + " |")
        lines.append("")
    lines += [
        "## Ideal tensor-core work ratio against FlashMLA padded to 64 heads",
        "",
        "64 G / (union/k x max(64, G h_q)): FlashMLA's MMA work (k rows x 64 heads per query) "
        "over a packed group's (U rows x G h_q rows, at least 64); an upper bound on the speedup "
        "that ignores the union, the masks and every other cost. Issue 13's targets: h_q 16 >= "
        "1.5x / 2.3x / 3.5x and h_q 32 >= 1.3x / 1.6x / 1.9x at 50% / 80% / 100% overlap.",
        "",
        "| scenario | k | " + " | ".join(f"h_q {h} G={G}" for h, G in PACKINGS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in PACKINGS) + " |",
    ]
    for s in result["scenarios"]:
        for k in meta["ks"][:1]:  # k_max only: FlashMLA's k is 2048
            g = s["k"][str(k)]["groups"]
            lines.append(f"| {s['name']} | {k} | " + " | ".join(
                f"{ideal_work_ratio(g[str(G)]['union_over_k'], h, G):.2f}x"
                for h, G in PACKINGS) + " |")
    lines.append("")
    return "\n".join(lines)


def main():
    today = datetime.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--S", type=int, default=32768)
    p.add_argument("--T", type=int, default=256)
    p.add_argument("--H", type=int, default=64)
    p.add_argument("--D", type=int, default=128)
    p.add_argument("--ks", type=int, nargs="+", default=[2048, 256])
    p.add_argument("--clusters", type=int, default=8)
    p.add_argument("--hot-fraction", type=float, default=0.1)
    p.add_argument("--mean-fraction", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="three scenarios, S = 8192, T = 64")
    p.add_argument("--check", action="store_true",
                   help="also call the indexer directly at each smaller k on the first scenario "
                        "and compare the selections")
    p.add_argument("--out", default=os.path.join(REPO, f"bench/results/overlap_study_{today}.json"))
    p.add_argument("--md", default=None, help="markdown output (default: --out with .md)")
    args = p.parse_args()
    if args.quick:
        args.S, args.T = 8192, 64
    scenarios = QUICK_SCENARIOS if args.quick else DEFAULT_SCENARIOS
    ks = sorted(set(args.ks), reverse=True)
    k_max = ks[0]
    if args.T % max(GROUPS) or args.S - args.T + 1 < k_max:
        sys.exit("T must be a multiple of 16 and every query must see at least k_max keys")
    md_path = args.md or os.path.splitext(args.out)[0] + ".md"

    start = time.time()
    out = []
    for i, (keys, weights, a, variant) in enumerate(scenarios):
        t0 = time.time()
        inputs = make_inputs(args, keys, weights, a, variant, args.seed + i)
        t1 = time.time()
        indices, values = litetopk.indexer_topk(*inputs, k_max)
        t2 = time.time()
        record = {"name": scenario_name(keys, weights, a, variant), "keys": keys,
                  "weights": weights, "a": a, "neighbour_correlation": math.sqrt(1 - a * a),
                  "variant": variant, "seed": args.seed + i, "k": {},
                  "seconds": {"inputs": t1 - t0, "indexer": t2 - t1}}
        for k in ks:
            sel = top_of(indices, values, k)
            stats = selection_stats(sel, k, args.S)
            stats["ideal_work_ratio"] = {
                f"h_q{h}_G{G}": ideal_work_ratio(stats["groups"][str(G)]["union_over_k"], h, G)
                for h, G in PACKINGS}
            record["k"][str(k)] = stats
            if args.check and i == 0 and k != k_max:
                direct, _ = litetopk.indexer_topk(*inputs, k)
                same = all(set(x) == set(y) for x, y in zip(direct, sel))
                record["k"][str(k)]["direct_call_matches"] = bool(same)
                print(f"  check k={k}: direct call {'matches' if same else 'DIFFERS'}")
        record["seconds"]["total"] = time.time() - t0
        out.append(record)
        g = record["k"][str(k_max)]["groups"]
        print(f"[{i + 1}/{len(scenarios)}] {record['name']}: k={k_max} adj "
              f"{record['k'][str(k_max)]['adjacent_overlap']:.3f}, union/k "
              + " ".join(f"G{G}={g[str(G)]['union_over_k']:.2f}" for G in GROUPS)
              + f" ({record['seconds']['total']:.1f} s)", flush=True)

    command = "python3 bench/overlap_study.py" + "".join(f" {x}" for x in sys.argv[1:])
    result = {
        "meta": {"date": today, "command": command, "commit": git_commit(),
                 "litetopk": litetopk.build_info(), "machine": f"{platform.machine()}, "
                 f"{os.cpu_count()} CPUs", "S": args.S, "T": args.T, "H": args.H, "D": args.D,
                 "ks": ks, "groups": list(GROUPS), "lags": list(LAGS), "clusters": args.clusters,
                 "hot_fraction": args.hot_fraction, "mean_fraction": args.mean_fraction,
                 "rope": {"dims": ROPE_DIMS, "base": ROPE_BASE, "layout": "rotate-half"},
                 "seconds": time.time() - start},
        "scenarios": out,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        # One scenario per line, floats to 4 decimals: a small file that still diffs well.
        head = json.dumps(rounded(result["meta"]))
        body = ",\n  ".join(json.dumps(rounded(s)) for s in result["scenarios"])
        f.write('{"meta": ' + head + ',\n "scenarios": [\n  ' + body + "\n ]}\n")
    text = markdown(result)
    with open(md_path, "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"wrote {args.out} and {md_path}")


if __name__ == "__main__":
    main()
