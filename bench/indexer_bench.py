#!/usr/bin/env python3
"""DSA lightning indexer + top-k: litetopk unfused and fused against DeepGEMM's anchor numbers.

For each shape (T queries, S keys, H heads, D = 128, k), a causal prefill chunk (the T queries are
the last T of S tokens: ks = 0, ke = S - T + t + 1): random fp8 e4m3 q [T, H, D] and kv [S, D]
(torch.randn cast to torch.float8_e4m3fn), kv_scale [S] ~ U(0.5, 1.5), weights [T, H] ~
N(0, 1) / sqrt(H), made by torch on the GPU. litetopk's unfused and fused indexer_topk are timed
with CUDA events (median of --iters after --warmup, no state: a cold start) and checked on a few
queries against torch fp32 scores. Reports ms, TFLOP/s (2 * valid pairs * H * D / time), % of the
1322 TFLOP/s FP8 ceiling, auxiliary memory (the workspace), and DeepGEMM fp8_mqa_logits +
torch.topk from the anchor run (same H200, same shapes). litetopk is loaded from
build/release/liblitetopk_c.so through its C API (include/litetopk/c_api.h). Writes JSON (--out)
and a markdown table (--md); prints progress lines, then the table. A failing algorithm or row is
reported and the rest still run.

In a torch process, preload the system libstdc++ (see bench/run_h200.sh):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 python3 bench/indexer_bench.py
"""
import argparse
import ctypes
import math
import sys
import traceback

import torch

from litetopk_bench_common import (CLibrary, LiteTopKError, Progress, add_common_arguments,
                                   print_results, require_cuda, result_record, time_cuda,
                                   write_results)

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

ALGOS = {"auto": 0, "unfused": 1, "fused": 2}  # enum litetopk_indexer_algo
ALGO_NAMES = {code: name for name, code in ALGOS.items()}
TIMED_ALGOS = ["unfused", "fused"]
VERIFY_QUERIES = 4  # first, last and evenly spaced between
TOL_REL = 5e-4  # see verify()
FREE_MEMORY_MARGIN = 2 << 30  # bytes kept free besides the workspace


class IndexerProblem(ctypes.Structure):
    """struct litetopk_indexer_problem."""

    _fields_ = [
        ("q", ctypes.c_void_p),
        ("kv", ctypes.c_void_p),
        ("kv_scale", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("ks", ctypes.c_void_p),
        ("ke", ctypes.c_void_p),
        ("num_queries", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("num_keys", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("indices", ctypes.c_void_p),
        ("values", ctypes.c_void_p),
    ]


class LiteTopK(CLibrary):
    """The indexer part of liblitetopk_c.so's C API."""

    def __init__(self, path):
        super().__init__(path)
        problem_p = ctypes.POINTER(IndexerProblem)
        lib = self.lib
        lib.litetopk_indexer_topk_workspace_size.argtypes = [
            problem_p, ctypes.c_int32, ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t)]
        lib.litetopk_indexer_topk.argtypes = [
            problem_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        lib.litetopk_indexer_topk_dispatch.argtypes = [problem_p]
        lib.litetopk_indexer_logits.argtypes = [
            problem_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]

    def workspace_size(self, problem, algo):
        size = ctypes.c_size_t(0)
        self._check(self.lib.litetopk_indexer_topk_workspace_size(
            ctypes.byref(problem), ALGOS[algo], 0, ctypes.byref(size)), f"{algo} workspace size")
        return size.value

    def topk(self, problem, algo, workspace, workspace_bytes, stream):
        self._check(self.lib.litetopk_indexer_topk(
            ctypes.byref(problem), ALGOS[algo], 0, None, 0, workspace, workspace_bytes, stream),
            algo)

    def logits(self, problem, logits, stride, stream):
        self._check(self.lib.litetopk_indexer_logits(
            ctypes.byref(problem), logits, stride, stream), "logits")

    def dispatch(self, problem):
        return ALGO_NAMES.get(self.lib.litetopk_indexer_topk_dispatch(ctypes.byref(problem)), "?")


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


def bench_shape(lib, shape, args, progress):
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
    stream = torch.cuda.current_stream().cuda_stream
    problem = IndexerProblem(
        q=inputs["q"].data_ptr(), kv=inputs["kv"].data_ptr(),
        kv_scale=inputs["kv_scale"].data_ptr(), weights=inputs["weights"].data_ptr(),
        ks=inputs["ks"].data_ptr(), ke=inputs["ke"].data_ptr(), num_queries=T, num_heads=H,
        head_dim=D, num_keys=S, k=k, indices=indices.data_ptr(), values=None)
    row["dispatched"] = lib.dispatch(problem)

    # The logits kernel alone (the unfused path's first half), against DeepGEMM's logits.
    progress(f"logits T={T} S={S} H={H}")
    try:
        logits = torch.empty(T, S, dtype=torch.float32, device="cuda")
        median, _ = time_cuda(lambda _: lib.logits(problem, logits.data_ptr(), S, stream),
                              args.warmup, args.iters)
        row["logits_ms"] = median
        row["logits_tflops"] = flops / (median * 1e-3) / 1e12
        print(f"  logits {median:.3f} ms, {row['logits_tflops']:.0f} TFLOP/s", flush=True)
        del logits
    except (LiteTopKError, torch.cuda.OutOfMemoryError) as error:
        row["notes"]["logits"] = str(error).splitlines()[0]
    torch.cuda.empty_cache()

    for algo in TIMED_ALGOS:
        progress(f"{algo} T={T} S={S} H={H} k={k}")
        workspace = None
        try:
            workspace_bytes = lib.workspace_size(problem, algo)
            row["workspace_bytes"][algo] = workspace_bytes
            free, _ = torch.cuda.mem_get_info()
            if workspace_bytes + FREE_MEMORY_MARGIN > free:
                note = (f"skipped: workspace {workspace_bytes / 1e9:.1f} GB does not fit in "
                        f"{free / 1e9:.1f} GB free")
                row["notes"][algo] = note
                print(f"  {note}", flush=True)
                continue
            workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device="cuda")
            ws_ptr = workspace.data_ptr()

            def run():
                lib.topk(problem, algo, ws_ptr, workspace_bytes, stream)

            indices.fill_(-2)  # an unwritten slot fails the check
            run()
            torch.cuda.synchronize()
            mismatch = verify(inputs, indices, k)
            row["verified"][algo] = not mismatch
            if mismatch:
                row["notes"][algo] = "MISMATCH: " + mismatch
            median, fastest = time_cuda(lambda _: run(), args.warmup, args.iters)
        except LiteTopKError as error:
            row["notes"][algo] = str(error)
            print(f"  error: {error}", flush=True)
            continue
        except torch.cuda.OutOfMemoryError as error:
            row["notes"][algo] = f"skipped: out of GPU memory ({str(error).splitlines()[0]})"
            print(f"  {row['notes'][algo]}", flush=True)
            continue
        finally:
            del workspace
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


def markdown_table(rows):
    lines = [
        "| T x S, H, k | DeepGEMM logits ms | DeepGEMM + topk ms | logits ms | logits vs DeepGEMM "
        "| unfused ms | unfused TFLOP/s | unfused % peak | unfused aux GB | fused ms "
        "| fused TFLOP/s | fused % peak | fused aux GB | fused vs DeepGEMM + topk | exact "
        "| notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |",
    ]
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
            f"{notes.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "indexer", "TxSxHxK", "8192x131072x64x2048", iters=5, warmup=2)
    parser.add_argument("--shapes-quick", action="store_true",
                        help="only the two smallest shapes (T=8192, S=64K, H=64 and 32)")
    args = parser.parse_args()
    require_cuda("indexer_bench.py")
    torch.backends.cuda.matmul.allow_tf32 = False  # the check's reference scores in full fp32

    lib = LiteTopK(args.lib)
    if args.only_shapes:
        shapes = list(args.shapes)
    else:
        shapes = (QUICK_SHAPES if args.shapes_quick else DEFAULT_SHAPES) + args.shapes
    progress = Progress(len(shapes) * (2 + len(TIMED_ALGOS)))

    rows = []
    for shape in shapes:
        try:
            rows.append(bench_shape(lib, shape, args, progress))
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
        "(shared/anchors/h200_dsa_deepgemm_torchtopk.json)",
        lib, args, rows, fp8_peak_tflops=FP8_PEAK_TFLOPS)
    table = markdown_table(rows)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}, litetopk "
                  f"{record['litetopk']}")
    print_results(table, args)
    if any(not ok for row in rows for ok in row["verified"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
