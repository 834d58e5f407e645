#!/usr/bin/env python3
"""DSA lightning indexer + top-k: litetopk unfused and fused against DeepGEMM's anchor numbers.

For each shape (T queries, S keys, H heads, D = 128, k), a causal prefill chunk (the T queries are
the last T of S tokens: ks = 0, ke = S - T + t + 1): random fp8 e4m3 q [T, H, D] and kv [S, D]
(torch.randn cast to torch.float8_e4m3fn), kv_scale [S] ~ U(0.5, 1.5), weights [T, H] ~
N(0, 1) / sqrt(H), made by torch on the GPU. litetopk's unfused and fused indexer_topk are timed
with CUDA events (median of --iters after --warmup, no state: a cold start) and checked on a few
queries against torch fp32 scores. Reports ms, TFLOP/s (2 * valid pairs * H * D / time), % of the
1322 TFLOP/s FP8 ceiling, auxiliary memory (the workspace), and DeepGEMM fp8_mqa_logits +
torch.topk from the anchor run (same H200, same shapes). litetopk runs through its torch ops
(litetopk.ops: fp8_mqa_logits_out, fp8_mqa_topk with algo forced), from the installed package
(`pip install .`) or python/ of this repository.

--peer deepgemm: when bench/deepgemm_peer.py's load() finds DeepGEMM (built outside the tree and
put on PYTHONPATH; run with its libstdc++ and JIT cache settings, see that file), three columns
are measured in this process on the same inputs: DeepGEMM logits (fp8 MQA logits, clean), + torch.topk
(then torch.topk(k, sorted=False) over the logits), + litetopk select (then litetopk's topk op
over DeepGEMM's logits with the rows' ranges); and litetopk's logits are checked bit for bit
against DeepGEMM's. Without DeepGEMM the columns stay empty and the reason is printed.

Writes JSON (--out) and a markdown table (--md); prints progress lines, then the table. A failing
algorithm or row is reported and the rest still run.
"""
import argparse
import math
import sys
import traceback

import torch

import deepgemm_peer
from litetopk_bench_common import (Progress, add_common_arguments, litetopk, print_results,
                                   require_cuda, result_record, time_cuda, write_results)

D = 128
FP8_PEAK_TFLOPS = 1322.0  # torch._scaled_mm 8192^3 on this H200 (shared/H200.md)
KI = 1024

# (T, S, H, k): the indexer issue's shapes, causal ranges.
DEFAULT_SHAPES = (
    [(8192, s * KI, h, 2048) for h in (64, 32) for s in (64, 128, 256, 512, 1024)]
    + [(8192, 256 * KI, 64, k) for k in (512, 8192)]
    + [(t, 256 * KI, 64, 2048) for t in (1024, 2048)]
)
QUICK_SHAPES = [(8192, 64 * KI, 64, 2048), (8192, 64 * KI, 32, 2048)]

# DeepGEMM fp8_fp4_mqa_logits (fp32 logits, clean_logits=True) then torch.topk(k, sorted=False)
# on this H200, causal chunk, median of 5 after 2 warm-ups. Copied from
# shared/anchors/h200_dsa_deepgemm_torchtopk.json (DeepGEMM @54e2261, torch 2.11.0+cu130,
# 2026-11-29), since shared/ does not travel to the GPU machine.
# (T, S, H, k) -> (logits_ms, topk_ms, total_ms, logits TFLOP/s, logits GB)
DEEPGEMM_ANCHORS = {
    (2048, 65536, 64, 2048): (1.942, 2.051, 3.994, 1114, 0.54),
    (2048, 131072, 64, 2048): (3.834, 3.918, 7.752, 1138, 1.07),
    (8192, 65536, 64, 2048): (7.917, 8.113, 16.03, 1042, 2.15),
    (8192, 131072, 64, 2048): (17.374, 15.207, 32.581, 981, 4.29),
    (8192, 262144, 64, 2048): (34.887, 32.099, 66.986, 993, 8.59),
    (8192, 524288, 64, 2048): (73.908, 63.464, 137.372, 945, 17.18),
    (8192, 1048576, 64, 2048): (154.078, 125.341, 279.419, 910, 34.36),
    (8192, 262144, 32, 2048): (18.862, 32.228, 51.089, 918, 8.59),
    (8192, 1048576, 32, 2048): (82.023, 125.371, 207.395, 855, 34.36),
}

TIMED_ALGOS = ["unfused", "fused"]
VERIFY_QUERIES = 4  # first, last and evenly spaced between
TOL_REL = 5e-4  # see verify()
FREE_MEMORY_MARGIN = 2 << 30  # bytes kept free besides the workspace


def make_inputs(T, S, H, seed):
    """Causal-chunk inputs on the GPU (DeepGEMM's fp8_mqa_logits layouts)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    q = torch.randn(T, H, D, device=dev, generator=gen).to(torch.float8_e4m3fn)
    kv = torch.randn(S, D, device=dev, generator=gen).to(torch.float8_e4m3fn)
    kv_scale = torch.rand(S, device=dev, generator=gen) + 0.5
    weights = torch.randn(T, H, device=dev, generator=gen) / math.sqrt(H)
    ks = torch.zeros(T, dtype=torch.int32, device=dev)
    ke = torch.arange(S - T + 1, S + 1, dtype=torch.int32, device=dev)
    return {"q": q, "kv": kv, "kv_scale": kv_scale, "weights": weights, "ks": ks, "ke": ke}


def verify(inputs, indices, k):
    """'' when the checked queries' indices are a top k of torch fp32 scores, else what differs.

    Checked per query: the valid count is min(k, ke - ks) with -1 padding after it, indices lie
    in [0, ke - ks) without duplicates, and every chosen key's score is >= the reference's k-th
    score - 2 tol. tol bounds the difference between two fp32-ish evaluations of one score:
    tol = TOL_REL * sum_h |w[t,h]| * |q[t,h]|_2 * max_s(kv_scale[s] * |kv[s]|_2) (Cauchy-Schwarz
    on each head's dot product; TOL_REL = 5e-4 covers Hopper's fp8 wgmma accumulator, about 13
    fraction bits per k = 32 group: (128 / 32) * 2^-13 = 4.9e-4, derived in
    tests/common/indexer_testing.h). Loose but not vacuous.
    """
    q, kv, kv_scale, weights = inputs["q"], inputs["kv"], inputs["kv_scale"], inputs["weights"]
    ks, ke = inputs["ks"].tolist(), inputs["ke"].tolist()
    T = q.shape[0]
    kv32 = kv.float()
    kv_bound = float((kv_scale * kv32.norm(dim=1)).max())
    count = min(T, VERIFY_QUERIES)
    queries = sorted({i * (T - 1) // max(1, count - 1) for i in range(count)})
    for t in queries:
        begin, end = ks[t], ke[t]
        length = end - begin
        q32 = q[t].float()  # [H, D]
        w = weights[t]
        dots = kv32[begin:end] @ q32.T  # [length, H], exact products, fp32 sums
        scores = (dots.clamp_min(0) @ w) * kv_scale[begin:end]
        want = min(k, length)
        kth = float(torch.topk(scores, want).values.min()) if want else math.inf
        tol = TOL_REL * float((w.abs() * q32.norm(dim=1)).sum()) * kv_bound
        row = indices[t].tolist()
        valid = row[:want]
        if any(i == -1 for i in valid) or any(i != -1 for i in row[want:]):
            got = sum(1 for i in row if i != -1)
            return f"query {t}: {got} valid indices or bad -1 padding, expected {want} then -1"
        if any(i < 0 or i >= length for i in valid):
            return f"query {t}: an index is outside [0, {length})"
        if len(set(valid)) != len(valid):
            return f"query {t}: an index is selected twice"
        chosen = scores[torch.tensor(valid, dtype=torch.long, device=scores.device)]
        worst = float(chosen.min()) if want else math.inf
        if worst < kth - 2 * tol:
            return (f"query {t}: a chosen key scores {worst:.5g} < reference k-th {kth:.5g} "
                    f"- 2 * tol {tol:.3g}")
    return ""


def bench_peer(dg, inputs, logits, k, row, args, progress):
    """DeepGEMM's logits alone, + torch.topk, + litetopk's topk op, on the same inputs; and
    whether litetopk's logits (already in `logits`) equal DeepGEMM's bit for bit."""
    T, S, H = row["T"], row["S"], row["H"]
    q, kv, kv_scale, w, ks, ke = (inputs[name] for name in
                                  ("q", "kv", "kv_scale", "weights", "ks", "ke"))
    indices = torch.empty(T, k, dtype=torch.int32, device="cuda")

    def dg_logits():
        return deepgemm_peer.mqa_logits(dg, q, kv, kv_scale, w, ks, ke)

    runs = {
        "logits": lambda: dg_logits(),
        "torch_topk": lambda: torch.topk(dg_logits(), k, dim=1, sorted=False),
        "litetopk_select": lambda: litetopk.ops.topk(dg_logits(), k, ks, ke,
                                                     out=(indices, None)),
    }
    peer = row["peer"] = {"name": deepgemm_peer.describe(dg), "ms": {}, "notes": {}}
    if logits is not None:
        progress(f"DeepGEMM logits bit-identity T={T} S={S} H={H}")
        try:
            theirs = dg_logits()
            same = torch.equal(theirs, logits)
            peer["logits_bit_identical"] = same
            if not same:
                differ = theirs != logits
                count = int(differ.sum())
                largest = float((theirs - logits)[differ].abs().max()) if count else 0.0
                peer["notes"]["identity"] = (f"{count} of {T * S} logits differ, max |diff| "
                                             f"{largest:.3g}")
            print(f"  bit-identical: {same}", flush=True)
            del theirs
        except Exception as error:  # noqa: BLE001 (a peer failure is a note, not a crash)
            peer["notes"]["identity"] = str(error).splitlines()[0]
        torch.cuda.empty_cache()
    for name, run in runs.items():
        progress(f"DeepGEMM {name} T={T} S={S} H={H} k={k}")
        try:
            median, _ = time_cuda(lambda _: run(), args.warmup, args.iters)
            peer["ms"][name] = median
            print(f"  {median:.3f} ms", flush=True)
        except Exception as error:  # noqa: BLE001
            peer["notes"][name] = str(error).splitlines()[0]
            print(f"  error: {peer['notes'][name]}", flush=True)
        torch.cuda.empty_cache()


def bench_shape(dg, shape, args, progress):
    """One row: each algorithm's time, TFLOP/s, workspace and check; errors as notes."""
    T, S, H, k = shape
    valid_pairs = T * (S - T) + T * (T + 1) // 2
    flops = 2.0 * valid_pairs * H * D
    row = {"T": T, "S": S, "H": H, "k": k, "valid_pairs": valid_pairs, "flops": flops,
           "ms": {}, "ms_min": {}, "tflops": {}, "pct_fp8_peak": {}, "workspace_bytes": {},
           "verified": {}, "notes": {}, "deepgemm": None}
    anchor = DEEPGEMM_ANCHORS.get(shape)
    if anchor:
        row["deepgemm"] = dict(zip(
            ("logits_ms", "topk_ms", "total_ms", "logits_tflops", "logits_GB"), anchor))
    if S < T:
        row["notes"]["row"] = "causal ranges need S >= T"
        return row

    progress(f"inputs T={T} S={S} H={H} k={k}")
    inputs = make_inputs(T, S, H, args.seed)
    indices = torch.empty(T, k, dtype=torch.int32, device="cuda")
    operands = (inputs["q"], (inputs["kv"], inputs["kv_scale"]), inputs["weights"],
                inputs["ks"], inputs["ke"])
    row["dispatched"] = litetopk.ops.fp8_mqa_topk_plan(*operands, k)["algo"]

    # The logits kernel alone (the unfused path's first half), against DeepGEMM's logits.
    progress(f"logits T={T} S={S} H={H}")
    logits = None
    try:
        logits = torch.empty(T, S, dtype=torch.float32, device="cuda")
        flat = (inputs["q"], inputs["kv"], inputs["kv_scale"], inputs["weights"], inputs["ks"],
                inputs["ke"])
        median, _ = time_cuda(lambda _: torch.ops.litetopk.fp8_mqa_logits_out(*flat, logits),
                              args.warmup, args.iters)
        row["logits_ms"] = median
        row["logits_tflops"] = flops / (median * 1e-3) / 1e12
        print(f"  logits {median:.3f} ms, {row['logits_tflops']:.0f} TFLOP/s", flush=True)
    except (ValueError, RuntimeError, torch.cuda.OutOfMemoryError) as error:
        row["notes"]["logits"] = str(error).splitlines()[0]
        logits = None
    if dg is not None:
        bench_peer(dg, inputs, logits, k, row, args, progress)
    logits = None  # frees the [T, S] matrix before the timed algorithms
    torch.cuda.empty_cache()

    for algo in TIMED_ALGOS:
        progress(f"{algo} T={T} S={S} H={H} k={k}")
        try:
            workspace_bytes = litetopk.ops.fp8_mqa_topk_plan(*operands, k, algo=algo)[
                "workspace_bytes"]
            row["workspace_bytes"][algo] = workspace_bytes
            free, _ = torch.cuda.mem_get_info()
            if workspace_bytes + FREE_MEMORY_MARGIN > free:
                note = (f"skipped: workspace {workspace_bytes / 1e9:.1f} GB does not fit in "
                        f"{free / 1e9:.1f} GB free")
                row["notes"][algo] = note
                print(f"  {note}", flush=True)
                continue

            def run():
                litetopk.ops.fp8_mqa_topk(*operands, k, algo=algo, out=(indices, None))

            indices.fill_(-2)  # an unwritten slot fails the check
            run()
            torch.cuda.synchronize()
            mismatch = verify(inputs, indices, k)
            row["verified"][algo] = not mismatch
            if mismatch:
                row["notes"][algo] = "MISMATCH: " + mismatch
            median, fastest = time_cuda(lambda _: run(), args.warmup, args.iters)
        except (ValueError, RuntimeError) as error:
            row["notes"][algo] = str(error)
            print(f"  error: {error}", flush=True)
            continue
        except torch.cuda.OutOfMemoryError as error:
            row["notes"][algo] = f"skipped: out of GPU memory ({str(error).splitlines()[0]})"
            print(f"  {row['notes'][algo]}", flush=True)
            continue
        finally:
            torch.cuda.empty_cache()
        tflops = flops / (median * 1e-3) / 1e12
        row["ms"][algo] = median
        row["ms_min"][algo] = fastest
        row["tflops"][algo] = tflops
        row["pct_fp8_peak"][algo] = 100.0 * tflops / FP8_PEAK_TFLOPS
        check = "exact" if row["verified"][algo] else row["notes"][algo]
        print(f"  {median:.3f} ms, {tflops:.0f} TFLOP/s ({row['pct_fp8_peak'][algo]:.0f}% of FP8 "
              f"peak), workspace {row['workspace_bytes'][algo] / 1e9:.2f} GB, {check}", flush=True)
    return row


def fmt(value, digits=2, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def peer_cells(row):
    peer = row.get("peer") or {"ms": {}}
    same = peer.get("logits_bit_identical")
    return (f"{fmt(peer['ms'].get('logits'))} | {fmt(peer['ms'].get('torch_topk'))} | "
            f"{fmt(peer['ms'].get('litetopk_select'))} | "
            f"{'-' if same is None else ('yes' if same else 'NO')} | ")


def markdown_table(rows):
    lines = [
        "| T x S, H, k | DeepGEMM logits ms | DeepGEMM + topk ms | logits ms | logits vs DeepGEMM "
        "| unfused ms | unfused TFLOP/s | unfused % peak | unfused aux GB | fused ms "
        "| fused TFLOP/s | fused % peak | fused aux GB | fused vs DeepGEMM + topk | exact "
        "| notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |",
    ]
    peer_rows = any(row.get("peer") for row in rows)
    if peer_rows:  # the columns measured in this run with --peer deepgemm
        lines[0] = lines[0].replace("| notes |", "| DeepGEMM logits ms (run) | + torch.topk ms "
                                    "| + litetopk select ms | logits bit-identical | notes |")
        lines[1] += " --- | --- | --- | --- |"
    for row in rows:
        ms, dg = row["ms"], row.get("deepgemm") or {}
        ws = {a: b / 1e9 for a, b in row["workspace_bytes"].items()}
        fused, total = ms.get("fused"), dg.get("total_ms")
        logits, dg_logits = row.get("logits_ms"), dg.get("logits_ms")
        checked = row["verified"]
        exact = "-" if not checked else ("yes" if all(checked.values()) else "NO")
        notes = "; ".join(f"{key}: {text}" for key, text in row["notes"].items())
        lines.append(
            f"| {row['T']} x {row['S']}, {row['H']}, {row['k']} | {fmt(dg.get('logits_ms'))} | "
            f"{fmt(total)} | {fmt(logits)} | "
            f"{fmt(dg_logits / logits if logits and dg_logits else None, 2, 'x')} | "
            f"{fmt(ms.get('unfused'))} | {fmt(row['tflops'].get('unfused'), 0)} | "
            f"{fmt(row['pct_fp8_peak'].get('unfused'), 0, '%')} | {fmt(ws.get('unfused'))} | "
            f"{fmt(fused)} | {fmt(row['tflops'].get('fused'), 0)} | "
            f"{fmt(row['pct_fp8_peak'].get('fused'), 0, '%')} | {fmt(ws.get('fused'), 3)} | "
            f"{fmt(total / fused if fused and total else None, 2, 'x')} | {exact} | "
            + (peer_cells(row) if peer_rows else "") + f"{notes.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def side_by_side_table(rows):
    """The issue's side-by-side table: DeepGEMM (this run) beside litetopk's logits, unfused,
    fused and auto (the time of the path auto dispatched to, and which)."""
    lines = [
        "| T x S, H, k | DG logits | DG + our select | DG + torch.topk | our logits | unfused "
        "| fused | auto (path) | fused / unfused | fused aux GB | exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        ms = row["ms"]
        peer = (row.get("peer") or {}).get("ms", {})
        fused, unfused = ms.get("fused"), ms.get("unfused")
        dispatched = row.get("dispatched")
        auto = ms.get(dispatched) if dispatched else None
        checked = row["verified"]
        exact = "-" if not checked else ("yes" if all(checked.values()) else "NO")
        aux = row["workspace_bytes"].get("fused")
        lines.append(
            f"| {row['T']} x {row['S']}, {row['H']}, {row['k']} | {fmt(peer.get('logits'))} | "
            f"{fmt(peer.get('litetopk_select'))} | {fmt(peer.get('torch_topk'))} | "
            f"{fmt(row.get('logits_ms'))} | {fmt(unfused)} | {fmt(fused)} | "
            f"{fmt(auto)} ({dispatched or '-'}) | "
            f"{fmt(fused / unfused if fused and unfused else None, 3)} | "
            f"{fmt(aux / 1e9 if aux else None, 3)} | {exact} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "indexer", "TxSxHxK", "8192x131072x64x2048", iters=5, warmup=2)
    parser.add_argument("--shapes-quick", action="store_true",
                        help="only the two smallest shapes (T=8192, S=64K, H=64 and 32)")
    parser.add_argument("--peer", choices=["deepgemm"],
                        help="also measure DeepGEMM's logits (+ torch.topk, + litetopk select) "
                             "in this process, when bench/deepgemm_peer.py can load it")
    args = parser.parse_args()
    require_cuda("indexer_bench.py")
    torch.backends.cuda.matmul.allow_tf32 = False  # the check's reference scores in full fp32

    dg = deepgemm_peer.load() if args.peer == "deepgemm" else None
    if args.peer:
        print(deepgemm_peer.describe(dg), flush=True)
    if args.only_shapes:
        shapes = list(args.shapes)
    else:
        shapes = (QUICK_SHAPES if args.shapes_quick else DEFAULT_SHAPES) + args.shapes
    progress = Progress(len(shapes) * (2 + len(TIMED_ALGOS) + (4 if dg is not None else 0)))

    rows = []
    for shape in shapes:
        try:
            rows.append(bench_shape(dg, shape, args, progress))
        except Exception as error:  # one bad row must not stop the others
            T, S, H, k = shape
            print(f"  row T={T} S={S} H={H} k={k} failed: {error!r}", flush=True)
            traceback.print_exc()
            rows.append({"T": T, "S": S, "H": H, "k": k, "ms": {}, "ms_min": {}, "tflops": {},
                         "pct_fp8_peak": {}, "workspace_bytes": {}, "verified": {},
                         "notes": {"row": f"failed: {error!r}"},
                         "deepgemm": None})
        torch.cuda.empty_cache()

    record = result_record(
        "DSA indexer + top-k, causal chunk (ks=0, ke=S-T+t+1), D=128, random normal fp8 "
        "q/kv, kv_scale U(0.5,1.5), weights N(0,1)/sqrt(H): litetopk unfused and fused "
        "(no state: cold start), CUDA events, median of iters after warmup; TFLOP/s = "
        "2 * valid pairs * H * D / time; deepgemm: anchor numbers "
        "(shared/anchors/h200_dsa_deepgemm_torchtopk.json); peer: measured in this run "
        "(--peer deepgemm)",
        args, rows, fp8_peak_tflops=FP8_PEAK_TFLOPS,
        peer=deepgemm_peer.describe(dg) if args.peer else None)
    table = markdown_table(rows) + "\n" + side_by_side_table(rows)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}, litetopk "
                  f"{record['litetopk']}")
    print_results(table, args)
    if any(not ok for row in rows for ok in row["verified"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
