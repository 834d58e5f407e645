#!/usr/bin/env python3
"""Top-k on materialized rows: litetopk's GPU algorithms beside torch.topk and peers, one process.

For each shape and dtype (--dtypes, fp32 and bf16 by default): random normal rows made by torch on
the GPU; torch.topk (sorted=False), litetopk radix, sample-filter (k <= 8192), grid-radix and
auto, and with --peer-lib the peers it names (vLLM 0.33's persistent_topk and cooperative_topk,
fp32 only, k in {512, 1024, 2048}, from a harness library built outside this repository) timed
with CUDA events (median of --iters after --warmup, rotating through several input buffers when
one is under 256 MB so that L2 does not serve the input). litetopk auto and every peer are
verified against torch.topk (equal selected values, indices that point at them, no duplicates).
litetopk runs through its torch op (litetopk.ops.topk, out variant, algo forced), from the
installed package (`pip install .`) or python/ of this repository, or with --capi through its C
ABI (liblitetopk_c.so, no Python extension needed). Writes JSON (--out) and a markdown table
(--md); prints progress lines, then the table.
"""
import argparse
import ctypes
import datetime
import math
import sys

import torch

from litetopk_bench_common import (Progress, add_common_arguments, litetopk, print_results,
                                   require_cuda, result_record, time_cuda, write_results)

ALGO_CODES = {"auto": 0, "radix": 1, "sample-filter": 2, "grid-radix": 3}
ALGO_NAMES = {code: name for name, code in ALGO_CODES.items()}
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}

# (batch, n, k): the shapes of the select issues (many long rows, the DSA decode middle, few
# long rows).
DEFAULT_SHAPES = [
    (4096, 200000, 1024),
    (8192, 262144, 2048),
    (256, 524288, 256),
    (128, 131072, 2048),
    (64, 1048576, 2048),
    (64, 131072, 2048),
    (8, 131072, 2048),
    (1, 131072, 2048),
    (8, 1 << 20, 4096),
]
SAMPLE_FILTER_MAX_K = 8192
ROTATION_BYTES = 256 << 20
MAX_COPIES = 64
OURS = ["radix", "sample-filter", "grid-radix", "auto"]
PEERS = ["vllm-persistent", "vllm-cooperative"]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_inputs(batch, n, dtype, seed):
    """Enough copies of [batch, n] random normal rows that rotating through them defeats L2."""
    bytes_per_copy = batch * n * DTYPES[dtype].itemsize
    copies = 1 if bytes_per_copy >= ROTATION_BYTES else min(
        MAX_COPIES, math.ceil(ROTATION_BYTES / bytes_per_copy))
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(batch, n, device="cuda", generator=generator).to(DTYPES[dtype])
            for _ in range(copies)]


def verify(scores, indices, k):
    """'' when the indices select the same values as torch.topk, else what differs."""
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


class OpsBackend:
    """litetopk through its torch op (the installed package or python/ of this repository)."""

    def plan_algo(self, scores, k):
        return litetopk.ops.topk_plan(scores, k)["algo"]

    def runner(self, algo, indices, k):
        def run(scores):
            litetopk.ops.topk(scores, k, out=(indices, None), algo=algo)
        return run


class SelectProblemC(ctypes.Structure):
    _fields_ = [("scores", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("batch", ctypes.c_int64),
                ("n", ctypes.c_int64), ("row_stride", ctypes.c_int64),
                ("row_starts", ctypes.c_void_p), ("row_ends", ctypes.c_void_p),
                ("k", ctypes.c_int64), ("flags", ctypes.c_uint32), ("indices", ctypes.c_void_p),
                ("values", ctypes.c_void_p)]


class CapiBackend:
    """litetopk through its C ABI (liblitetopk_c.so, --capi): no compiled Python extension."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.litetopk_last_error.restype = ctypes.c_char_p
        self.lib.litetopk_select_topk_workspace_size.argtypes = [
            ctypes.POINTER(SelectProblemC), ctypes.c_int32, ctypes.POINTER(ctypes.c_size_t)]
        self.lib.litetopk_select_topk.argtypes = [
            ctypes.POINTER(SelectProblemC), ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_void_p]
        self.lib.litetopk_select_topk_dispatch.argtypes = [ctypes.POINTER(SelectProblemC)]

    @staticmethod
    def problem(scores, indices, k):
        return SelectProblemC(scores.data_ptr(), DTYPE_CODES[scores.dtype], scores.shape[0],
                              scores.shape[1], scores.stride(0), None, None, k, 0,
                              indices.data_ptr(), None)

    def version(self):
        self.lib.litetopk_version.restype = ctypes.c_char_p
        return self.lib.litetopk_version().decode()

    def check(self, code):
        if code != 0:
            raise RuntimeError(self.lib.litetopk_last_error().decode())

    def plan_algo(self, scores, k):
        indices = torch.empty(1, dtype=torch.int32, device="cuda")
        return ALGO_NAMES[self.lib.litetopk_select_topk_dispatch(self.problem(scores, indices, k))]

    def runner(self, algo, indices, k):
        size = ctypes.c_size_t(0)
        cache = {}

        def run(scores):
            problem = self.problem(scores, indices, k)
            if "workspace" not in cache:
                self.check(self.lib.litetopk_select_topk_workspace_size(
                    ctypes.byref(problem), ALGO_CODES[algo], ctypes.byref(size)))
                cache["workspace"] = torch.empty(max(size.value, 1), dtype=torch.uint8,
                                                 device="cuda")
            workspace = cache["workspace"]
            self.check(self.lib.litetopk_select_topk(
                ctypes.byref(problem), ALGO_CODES[algo], workspace.data_ptr(), workspace.numel(),
                torch.cuda.current_stream().cuda_stream))
        return run


class VllmPeer:
    """vLLM's persistent_topk / cooperative_topk through the harness library (raw pointers)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        pointers = [ctypes.c_void_p] * 4 + [ctypes.c_size_t]
        self.lib.vllm_persistent_topk.argtypes = pointers + [ctypes.c_int64] * 5 + [ctypes.c_void_p]
        self.lib.vllm_cooperative_topk.argtypes = (pointers + [ctypes.c_int64] * 3 +
                                                   [ctypes.c_void_p])
        self.lib.vllm_workspace_bytes.restype = ctypes.c_size_t
        self.workspace = torch.empty(self.lib.vllm_workspace_bytes(), dtype=torch.uint8,
                                     device="cuda")

    def supports(self, method, batch, k, dtype):
        if dtype != "fp32" or k not in (512, 1024, 2048):
            return "fp32 and k in {512, 1024, 2048} only"
        if method == "vllm-cooperative" and batch > 64:
            return "cooperative_topk supports <= 64 rows"
        return ""

    def runner(self, method, scores, lengths, indices, k):
        stream = torch.cuda.current_stream().cuda_stream
        batch, n = scores.shape
        ws = self.workspace

        def run(x):
            if method == "vllm-persistent":
                path = self.lib.vllm_persistent_topk(
                    x.data_ptr(), lengths.data_ptr(), indices.data_ptr(), ws.data_ptr(),
                    ws.numel(), batch, x.stride(0), n, k, n, stream)
            else:
                path = self.lib.vllm_cooperative_topk(
                    x.data_ptr(), lengths.data_ptr(), indices.data_ptr(), ws.data_ptr(),
                    ws.numel(), batch, x.stride(0), k, stream)
            if path < 0:
                raise RuntimeError(f"{method} failed (code {path})")
            return path
        return run


def bench_shape(batch, n, k, dtype, args, ours, peer, progress):
    """One row of results: times of every method, the dispatched algorithm, verification."""
    inputs = make_inputs(batch, n, dtype, args.seed)
    indices = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    lengths = torch.full((batch,), n, dtype=torch.int32, device="cuda")
    row = {"batch": batch, "n": n, "k": k, "dtype": dtype,
           "bytes": batch * n * DTYPES[dtype].itemsize, "copies": len(inputs),
           "dispatched": ours.plan_algo(inputs[0], k), "ms": {}, "ms_min": {},
           "gbps": {}, "errors": {}, "exact": {}, "peer_path": {}}

    def torch_topk(scores):
        torch.topk(scores, k, dim=1, sorted=False)

    methods = ([] if args.no_torch else ["torch.topk"]) + [
        m for m in OURS if m != "sample-filter" or k <= SAMPLE_FILTER_MAX_K]
    if peer is not None:
        methods += PEERS
    for method in methods:
        progress(f"{method} {batch}x{n} k={k} {dtype}")
        try:
            if method in PEERS:
                why = peer.supports(method, batch, k, dtype)
                if why:
                    row["errors"][method] = why
                    print(f"  skipped: {why}", flush=True)
                    continue
                run = peer.runner(method, inputs[0], lengths, indices, k)
                row["peer_path"][method] = run(inputs[0])
            else:
                run = torch_topk if method == "torch.topk" else ours.runner(method, indices, k)
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
        if method != "torch.topk" and (method == "auto" or method in PEERS):
            indices.fill_(-2)  # an unwritten slot fails the check
            run(inputs[0])
            mismatch = verify(inputs[0], indices, k)
            row["exact"][method] = not mismatch
            if mismatch:
                row["errors"][f"verify {method}"] = mismatch
            print(f"  {'exact' if not mismatch else 'MISMATCH: ' + mismatch}", flush=True)
    row["verified"] = row["exact"].get("auto", False)
    return row


def fmt(value, digits=3, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def markdown_table(rows):
    lines = [
        "| B x N, k | dtype | torch.topk | radix | sample-filter | grid-radix | auto (algo) "
        "| auto GB/s | vLLM persistent | vLLM cooperative | best peer / auto | exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        ms = row["ms"]
        auto = ms.get("auto")
        peers = [ms[p] for p in PEERS if p in ms]
        best_peer = min(peers) if peers else None
        exact = all(row["exact"].values()) and row["verified"]
        lines.append(
            f"| {row['batch']} x {row['n']}, {row['k']} | {row['dtype']} | "
            f"{fmt(ms.get('torch.topk'))} | {fmt(ms.get('radix'))} | "
            f"{fmt(ms.get('sample-filter'))} | {fmt(ms.get('grid-radix'))} | "
            f"{fmt(auto)} ({row['dispatched']}) | {fmt(row['gbps'].get('auto'), 0)} | "
            f"{fmt(ms.get('vllm-persistent'))} | {fmt(ms.get('vllm-cooperative'))} | "
            f"{fmt(best_peer / auto if auto and best_peer else None, 2, 'x')} | "
            f"{'yes' if exact else 'NO'} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "select", "BxNxK", "8192x131072x2048", iters=20, warmup=3)
    parser.add_argument("--dtypes", default="fp32,bf16",
                        help="comma-separated score dtypes: fp32, bf16, fp16")
    parser.add_argument("--peer-lib", help="the peers' harness library (vLLM's top-k kernels)")
    parser.add_argument("--no-torch", action="store_true", help="do not time torch.topk")
    parser.add_argument("--capi", help="run litetopk through this liblitetopk_c.so (C ABI) "
                        "instead of its torch op")
    args = parser.parse_args()
    if args.capi:
        if not torch.cuda.is_available():
            sys.exit("select_bench.py needs a CUDA GPU")
        ours = CapiBackend(args.capi)
    else:
        require_cuda("select_bench.py")
        ours = OpsBackend()
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            sys.exit(f"--dtypes: unknown dtype {d} (fp32, bf16, fp16)")
    peer = VllmPeer(args.peer_lib) if args.peer_lib else None

    shapes = args.shapes if args.only_shapes else DEFAULT_SHAPES + args.shapes
    per_shape = len(OURS) + (0 if args.no_torch else 1) + (len(PEERS) if peer else 0)
    progress = Progress(len(shapes) * len(dtypes) * per_shape)

    rows = []
    for batch, n, k in shapes:
        for dtype in dtypes:
            rows.append(bench_shape(batch, n, k, dtype, args, ours, peer, progress))
            torch.cuda.empty_cache()

    what = ("top-k of random normal rows (unsorted): torch.topk, litetopk radix, sample-filter, "
            "grid-radix and auto, and vLLM 0.33's persistent and cooperative top-k; CUDA events, "
            "median of iters after warmup, inputs rotated through copies totalling >= 256 MB")
    if args.capi:
        # result_record's fields, with the version from the C ABI (no Python extension here).
        record = {"what": what, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec="seconds"), "device": torch.cuda.get_device_name(),
                  "torch": torch.__version__, "litetopk": ours.version(), "backend": "c_api",
                  "iters": args.iters, "warmup": args.warmup, "rows": rows}
    else:
        record = result_record(what, args, rows, backend="torch op")
    table = markdown_table(rows)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}")
    print_results(table, args)
    if not all(row["verified"] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
