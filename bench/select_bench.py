#!/usr/bin/env python3
"""Top-k on materialized rows: litetopk's GPU algorithms beside torch.topk and peers, one process.

For each shape and dtype (--dtypes, fp32 and bf16 by default): random normal rows made by torch on
the GPU; torch.topk (sorted=False), litetopk radix, sample-filter (k <= 8192), grid-radix,
sieve, cluster, register and auto, and the peers of every --peer-lib (repeatable; harness libraries built
outside this repository: vLLM 0.33's persistent_topk and cooperative_topk through their own entry
points, any other peer through the generic ltk_peer_* ABI below) timed with CUDA events (median of
--iters after --warmup, rotating through several input buffers when one is under 256 MB so that L2
does not serve the input; with --graphs, replays of one CUDA graph of a call on every buffer, so
that no host work is timed). Every litetopk method and every peer is verified against the exact
top-k of each row (the selected multiset of values equal; -0 and +0 equal; NaN ranks below -inf, so
a NaN or a -1 may fill only the slots a row has no other value for; indices in range, no
duplicates).
With --adversarial, the families of tests/common/select_cases.cpp (ties at the k-th value,
constant rows, NaN/inf, -0/+0, denormals, few distinct values, mostly tied, ...) and an attention
row (sinks and a recent window) at --adv-shape go through litetopk auto and every peer; the JSON
records which are exact per family, and auto's time on each (one copy of the rows, L2-warm).
litetopk runs through its torch op (litetopk.ops.topk, out variant, algo forced), from the
installed package (`pip install .`) or python/ of this repository, or with --capi through its C
ABI (liblitetopk_c.so, no Python extension needed). Writes JSON (--out) and a markdown table
(--md); prints progress lines, then the table.

Generic peer ABI (C linkage; dtype 0 fp32, 1 bf16, 2 fp16; indices [batch, k] int32, contiguous):
  int ltk_peer_methods(void);                       number of methods in the library
  const char* ltk_peer_method_name(int m);          its label
  const char* ltk_peer_supports(int m, int dtype, int64_t batch, int64_t n, int64_t k);  "" or why
  size_t ltk_peer_workspace_bytes(int m, int64_t batch, int64_t n, int64_t k);
  int ltk_peer_topk(int m, const void* scores, int dtype, int64_t batch, int64_t n,
                    int64_t row_stride, int64_t k, int32_t* indices, void* workspace,
                    size_t workspace_bytes, void* stream);   >= 0 (the path taken) or < 0 (error)
"""
import argparse
import ctypes
import datetime
import math
import sys

import torch

from litetopk_bench_common import (Progress, add_common_arguments, capture_graph, litetopk,
                                   print_results, require_cuda, result_record, shape_parser,
                                   time_cuda, write_results)

ALGO_CODES = {"auto": 0, "radix": 1, "sample-filter": 2, "grid-radix": 3, "sieve": 4,
              "cluster": 5, "register": 6}
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
ROW_ALIGN_BYTES = 1024
OURS = ["radix", "sample-filter", "grid-radix", "sieve", "cluster", "register", "auto"]
NAN_KEY = -(1 << 40)  # below every rank key of a non-NaN fp32 value
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_inputs(batch, n, dtype, seed, pad_rows=False):
    """Enough copies of [batch, n] random normal rows that rotating through them defeats L2; with
    pad_rows, each a view of rows whose stride is a multiple of 1024 bytes (DeepSelect's TMA)."""
    itemsize = DTYPES[dtype].itemsize
    stride = -(-n * itemsize // ROW_ALIGN_BYTES) * ROW_ALIGN_BYTES // itemsize if pad_rows else n
    bytes_per_copy = batch * stride * itemsize
    copies = 1 if bytes_per_copy >= ROTATION_BYTES else min(
        MAX_COPIES, math.ceil(ROTATION_BYTES / bytes_per_copy))
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(batch, stride, device="cuda", generator=generator).to(DTYPES[dtype])[:, :n]
            for _ in range(copies)]


def rank_keys(scores):
    """int64 keys that order the values of `scores` as top-k does: -0 == +0, NaN below -inf."""
    x = scores.float()
    x = torch.where(x == 0, torch.zeros_like(x), x)  # -0 -> +0
    bits = x.view(torch.int32).long()
    keys = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # order-preserving for non-NaN
    return torch.where(torch.isnan(x), torch.full_like(keys, NAN_KEY), keys)


def verify(scores, indices, k, rows_per_chunk=256):
    """'' when the indices select an exact top-k of every row, else what differs. A slot may hold
    -1 or a NaN's index only where the row has fewer than k other values."""
    n = scores.shape[1]
    indices = indices.long()
    if bool((indices < -1).any()) or bool((indices >= n).any()):
        return "an index is outside [0, n) and not -1"
    sorted_indices = torch.sort(indices, dim=1).values
    repeated = (sorted_indices[:, 1:] == sorted_indices[:, :-1]) & (sorted_indices[:, 1:] >= 0)
    if bool(repeated.any()):
        return "a row selects an index twice"
    bad = []
    for first in range(0, scores.shape[0], rows_per_chunk):
        keys = rank_keys(scores[first:first + rows_per_chunk])
        chunk = indices[first:first + rows_per_chunk]
        got = keys.gather(1, chunk.clamp(min=0))
        got = torch.where(chunk < 0, torch.full_like(got, NAN_KEY), got)
        got = torch.sort(got, dim=1, descending=True).values
        want = torch.sort(torch.topk(keys, k, dim=1, sorted=False).values, dim=1,
                          descending=True).values
        bad += [first + r for r in (got != want).any(dim=1).nonzero().flatten().tolist()]
    if bad:
        return f"selected values differ from the exact top-k in {len(bad)} rows (first: {bad[0]})"
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

    methods = ["vllm-persistent", "vllm-cooperative"]

    def __init__(self, lib, path):
        self.lib = lib
        self.path = path
        pointers = [ctypes.c_void_p] * 4 + [ctypes.c_size_t]
        self.lib.vllm_persistent_topk.argtypes = pointers + [ctypes.c_int64] * 5 + [ctypes.c_void_p]
        self.lib.vllm_cooperative_topk.argtypes = (pointers + [ctypes.c_int64] * 3 +
                                                   [ctypes.c_void_p])
        self.lib.vllm_workspace_bytes.restype = ctypes.c_size_t
        self.workspace = torch.empty(self.lib.vllm_workspace_bytes(), dtype=torch.uint8,
                                     device="cuda")

    def supports(self, method, batch, n, k, dtype):
        if dtype != "fp32" or k not in (512, 1024, 2048):
            return "fp32 and k in {512, 1024, 2048} only"
        if method == "vllm-cooperative" and batch > 64:
            return "cooperative_topk supports <= 64 rows"
        return ""

    def runner(self, method, scores, lengths, indices, k):
        batch, n = scores.shape
        ws = self.workspace

        def run(x):
            stream = torch.cuda.current_stream().cuda_stream  # the capture's stream in a graph
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


class AbiPeer:
    """A peer harness library with the generic ltk_peer_* ABI (see the module docstring)."""

    def __init__(self, lib, path):
        self.lib = lib
        self.path = path
        lib.ltk_peer_method_name.restype = ctypes.c_char_p
        lib.ltk_peer_method_name.argtypes = [ctypes.c_int]
        lib.ltk_peer_supports.restype = ctypes.c_char_p
        lib.ltk_peer_supports.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_int64] * 3
        lib.ltk_peer_workspace_bytes.restype = ctypes.c_size_t
        lib.ltk_peer_workspace_bytes.argtypes = [ctypes.c_int] + [ctypes.c_int64] * 3
        lib.ltk_peer_topk.argtypes = ([ctypes.c_int, ctypes.c_void_p, ctypes.c_int] +
                                      [ctypes.c_int64] * 4 +
                                      [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p])
        self.methods = [lib.ltk_peer_method_name(m).decode() for m in range(lib.ltk_peer_methods())]

    def supports(self, method, batch, n, k, dtype):
        code = DTYPE_CODES[DTYPES[dtype]]
        return self.lib.ltk_peer_supports(self.methods.index(method), code, batch, n, k).decode()

    def runner(self, method, scores, lengths, indices, k):
        m = self.methods.index(method)
        batch, n = scores.shape
        code = DTYPE_CODES[scores.dtype]
        ws = torch.empty(max(self.lib.ltk_peer_workspace_bytes(m, batch, n, k), 1),
                         dtype=torch.uint8, device="cuda")

        def run(x):
            stream = torch.cuda.current_stream().cuda_stream  # the capture's stream in a graph
            path = self.lib.ltk_peer_topk(m, x.data_ptr(), code, batch, n, x.stride(0), k,
                                          indices.data_ptr(), ws.data_ptr(), ws.numel(), stream)
            if path < 0:
                raise RuntimeError(f"{method} failed (code {path})")
            return path
        return run


def load_peer(path):
    """The peer object for one --peer-lib: vLLM's harness or a generic ltk_peer_* library."""
    lib = ctypes.CDLL(path)
    if hasattr(lib, "vllm_persistent_topk"):
        return VllmPeer(lib, path)
    if hasattr(lib, "ltk_peer_topk"):
        return AbiPeer(lib, path)
    sys.exit(f"--peer-lib {path}: neither vllm_persistent_topk nor ltk_peer_topk is exported")


def peer_methods(peers):
    """[(label, peer)] of every method of every --peer-lib, in the order given."""
    return [(method, peer) for peer in peers for method in peer.methods]


def check(run, scores, indices, k):
    """Runs once into indices (pre-filled with -2: an unwritten slot fails) and verifies."""
    indices.fill_(-2)
    run(scores)
    return verify(scores, indices, k)


def bench_shape(batch, n, k, dtype, args, ours, peers, progress):
    """One row of results: times of every method, the dispatched algorithm, verification."""
    inputs = make_inputs(batch, n, dtype, args.seed, args.pad_rows)
    indices = torch.empty(batch, k, dtype=torch.int32, device="cuda")
    lengths = torch.full((batch,), n, dtype=torch.int32, device="cuda")
    row = {"batch": batch, "n": n, "k": k, "dtype": dtype, "row_stride": inputs[0].stride(0),
           "bytes": batch * n * DTYPES[dtype].itemsize, "copies": len(inputs),
           "dispatched": ours.plan_algo(inputs[0], k), "ms": {}, "ms_min": {},
           "gbps": {}, "errors": {}, "exact": {}, "peer_path": {}}

    def torch_topk(scores):
        torch.topk(scores, k, dim=1, sorted=False)

    by_peer = dict(peer_methods(peers))
    methods = ([] if args.no_torch else ["torch.topk"]) + [
        m for m in args.algos if m != "sample-filter" or k <= SAMPLE_FILTER_MAX_K] + list(by_peer)
    for method in methods:
        progress(f"{method} {batch}x{n} k={k} {dtype}")
        try:
            if method in by_peer:
                why = by_peer[method].supports(method, batch, n, k, dtype)
                if why:
                    row["errors"][method] = why
                    print(f"  skipped: {why}", flush=True)
                    continue
                run = by_peer[method].runner(method, inputs[0], lengths, indices, k)
                row["peer_path"][method] = run(inputs[0])
            else:
                run = torch_topk if method == "torch.topk" else ours.runner(method, indices, k)
            if args.graphs:
                # One graph of a call on every copy (capture_graph runs it once first); a call's
                # time is a replay's over the copies.
                graph = capture_graph(lambda: [run(scores) for scores in inputs])
                median, fastest = (t / len(inputs) for t in time_cuda(
                    lambda _: graph.replay(), args.warmup, args.iters))
            else:
                median, fastest = time_cuda(lambda i: run(inputs[i % len(inputs)]),
                                            args.warmup, args.iters)
            row["ms"][method] = median
            row["ms_min"][method] = fastest
            row["gbps"][method] = row["bytes"] / (median * 1e6)
            print(f"  {median:.4f} ms, {row['gbps'][method]:.0f} GB/s", flush=True)
            if method != "torch.topk":
                mismatch = check(run, inputs[0], indices, k)
                row["exact"][method] = not mismatch
                if mismatch:
                    row["errors"][f"verify {method}"] = mismatch
                print(f"  {'exact' if not mismatch else 'MISMATCH: ' + mismatch}", flush=True)
        except (RuntimeError, ValueError) as error:
            row["errors"][method] = str(error)
            print(f"  error: {error}", flush=True)
    # Every litetopk method that ran is exact (peers are reported, not required to be).
    ours_ran = [m for m in row["exact"] if m in OURS]
    row["verified"] = bool(ours_ran) and all(row["exact"][m] for m in ours_ran)
    return row


def tie_run(batch, n, above, ties, generator):
    """Rows of `above` values in (2, 3], `ties` copies of 1.0 and the rest in (-12, -10],
    positions shuffled per row (the k-th best value is 1.0 when above < k <= above + ties)."""
    u = torch.rand(batch, n, device="cuda", generator=generator)
    x = torch.where(torch.arange(n, device="cuda") < above, 2 + u, -12 + 2 * u)
    x[:, above:above + ties] = 1.0
    order = torch.argsort(torch.rand(batch, n, device="cuda", generator=generator), dim=1)
    return x.gather(1, order)


def nan_bits(shape, generator):
    """NaN of random payloads and signs, as fp32."""
    payload = torch.randint(1, 1 << 22, shape, device="cuda", generator=generator,
                            dtype=torch.int32)
    sign = torch.randint(0, 2, shape, device="cuda", generator=generator, dtype=torch.int32)
    return (0x7FC00000 | payload | (sign << 31)).view(torch.float32)


def make_family(family, batch, n, k, dtype, seed):
    """[batch, n] rows of one adversarial family (tests/common/select_cases.cpp's patterns)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    shape = (batch, n)
    if family == "random":
        x = torch.randn(shape, device="cuda", generator=g)
    elif family == "constant":
        x = torch.full(shape, 0.5, device="cuda")
    elif family == "ties-at-kth":
        above = k // 2
        x = tie_run(batch, n, above, min(n - above, 2 * (k - above) + 1), g)
    elif family == "mostly-tied":
        above = k // 2
        x = tie_run(batch, n, above, max(n * 9 // 10, min(n - above, k)), g)
    elif family == "nan-inf":
        x = torch.randn(shape, device="cuda", generator=g)
        u = torch.rand(shape, device="cuda", generator=g)
        x = torch.where(u < 0.01, nan_bits(shape, g), x)
        x = torch.where((u >= 0.01) & (u < 0.015), float("inf"), x)
        x = torch.where((u >= 0.015) & (u < 0.02), float("-inf"), x)
    elif family == "all-neg-inf":
        x = torch.full(shape, float("-inf"), device="cuda")
    elif family == "all-nan":
        x = nan_bits(shape, g)
    elif family == "signed-zeros":
        # k/4 positives, then -0 and +0 mixed (the k-th best is a zero), then negatives.
        u = torch.rand(shape, device="cuda", generator=g)
        x = torch.where(u < 0.5, -0.0, 0.0) * torch.ones(shape, device="cuda")
        x = torch.where(u > 0.9, -1 - u, x)
        x[:, :k // 4] = 1 + u[:, :k // 4]
    elif family == "denormals":
        bits = torch.randint(1, 1 << 23, shape, device="cuda", generator=g, dtype=torch.int32)
        sign = torch.randint(0, 2, shape, device="cuda", generator=g, dtype=torch.int32)
        x = (bits | (sign << 31)).view(torch.float32)
        x[:, ::97] = 0.0
        x[:, 1::97] = -0.0
    elif family == "sink-window":
        # An attention row: a few sink tokens far above, a recent window of 4096 above the rest.
        x = torch.randn(shape, device="cuda", generator=g)
        x[:, :4] += 10
        x[:, -min(n, 4096):] += 2
    elif family == "few-distinct":
        x = torch.randint(-2, 3, shape, device="cuda", generator=g).float()
    elif family == "ascending":
        x = (torch.arange(n, device="cuda") - n // 2).float().expand(shape).contiguous()
    elif family == "descending":
        x = (n // 2 - torch.arange(n, device="cuda")).float().expand(shape).contiguous()
    else:
        raise ValueError(f"unknown family {family}")
    return x.to(DTYPES[dtype])


FAMILIES = ["random", "constant", "ties-at-kth", "mostly-tied", "nan-inf", "all-neg-inf",
            "all-nan", "signed-zeros", "denormals", "sink-window", "few-distinct", "ascending",
            "descending"]


def adversarial(shape, dtypes, args, ours, peers, progress):
    """Exact yes/no of litetopk auto and every peer on each family: one record per family/dtype."""
    batch, n, k = shape
    by_peer = dict(peer_methods(peers))
    records = []
    for family in FAMILIES:
        for dtype in dtypes:
            progress(f"adversarial {family} {batch}x{n} k={k} {dtype}")
            record = {"family": family, "batch": batch, "n": n, "k": k, "dtype": dtype,
                      "exact": {}, "errors": {}}
            try:
                scores = make_family(family, batch, n, k, dtype, args.seed)
            except (RuntimeError, ValueError) as error:
                record["errors"]["input"] = str(error)
                records.append(record)
                continue
            indices = torch.empty(batch, k, dtype=torch.int32, device="cuda")
            lengths = torch.full((batch,), n, dtype=torch.int32, device="cuda")
            for method in ["auto"] + list(by_peer):
                try:
                    if method == "auto":
                        run = ours.runner("auto", indices, k)
                    else:
                        why = by_peer[method].supports(method, batch, n, k, dtype)
                        if why:
                            record["errors"][method] = why
                            continue
                        run = by_peer[method].runner(method, scores, lengths, indices, k)
                    mismatch = check(run, scores, indices, k)
                except (RuntimeError, ValueError) as error:
                    record["errors"][method] = str(error)
                    continue
                record["exact"][method] = not mismatch
                if mismatch:
                    record["errors"][f"verify {method}"] = mismatch
                elif method == "auto":  # one copy of the rows, so L2-warm: families side by side
                    record["auto_ms"] = time_cuda(lambda i: run(scores), args.warmup,
                                                  args.iters)[0]
            print("  " + ", ".join(f"{m}: {'exact' if ok else 'NOT exact'}"
                                   for m, ok in record["exact"].items()), flush=True)
            records.append(record)
            del scores
            torch.cuda.empty_cache()
    return records


def fmt(value, digits=3, suffix=""):
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def markdown_table(rows, peer_names, records):
    """The timing table (a column per peer method) and, with --adversarial, the exactness one."""
    peer_heads = "".join(f" {name} |" for name in peer_names)
    lines = [
        "| B x N, k | dtype | torch.topk | radix | sample-filter | grid-radix | sieve | cluster "
        f"| register | auto (algo) | auto GB/s |{peer_heads} best peer / auto | exact |",
        "|" + " --- |" * (13 + len(peer_names)),
    ]
    for row in rows:
        ms = row["ms"]
        auto = ms.get("auto")
        peers = [ms[p] for p in peer_names if p in ms]
        best_peer = min(peers) if peers else None
        exact = all(row["exact"].values()) and row["verified"]
        peer_cells = "".join(f" {fmt(ms.get(name))} |" for name in peer_names)
        lines.append(
            f"| {row['batch']} x {row['n']}, {row['k']} | {row['dtype']} | "
            f"{fmt(ms.get('torch.topk'))} | {fmt(ms.get('radix'))} | "
            f"{fmt(ms.get('sample-filter'))} | {fmt(ms.get('grid-radix'))} | "
            f"{fmt(ms.get('sieve'))} | {fmt(ms.get('cluster'))} | {fmt(ms.get('register'))} | "
            f"{fmt(auto)} ({row['dispatched']}) | {fmt(row['gbps'].get('auto'), 0)} |"
            f"{peer_cells} "
            f"{fmt(best_peer / auto if auto and best_peer else None, 2, 'x')} | "
            f"{'yes' if exact else 'NO'} |")
    table = "\n".join(lines) + "\n"
    if records:
        methods = ["auto"] + list(peer_names)
        lines = ["", f"Exact on the adversarial families ({records[0]['batch']} x "
                 f"{records[0]['n']}, k = {records[0]['k']}; - = not supported or failed):", "",
                 "| family | dtype | auto ms (L2-warm) |" + "".join(f" {m} |" for m in methods),
                 "|" + " --- |" * (3 + len(methods))]
        for r in records:
            cells = "".join(
                f" {'-' if m not in r['exact'] else 'yes' if r['exact'][m] else 'NO'} |"
                for m in methods)
            lines.append(f"| {r['family']} | {r['dtype']} | {fmt(r.get('auto_ms'))} |{cells}")
        table += "\n".join(lines) + "\n"
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, "select", "BxNxK", "8192x131072x2048", iters=20, warmup=3)
    parser.add_argument("--dtypes", default="fp32,bf16",
                        help="comma-separated score dtypes: fp32, bf16, fp16")
    parser.add_argument("--peer-lib", "--peer", dest="peer_lib", action="append", default=[],
                        help="a peer harness library (repeatable): vLLM's harness or one with "
                        "the ltk_peer_* ABI")
    parser.add_argument("--no-torch", action="store_true", help="do not time torch.topk")
    parser.add_argument("--algos", type=lambda text: [a for a in text.split(",") if a],
                        default=OURS, help="comma-separated litetopk algorithms to time (default: "
                        "all of " + ",".join(OURS) + ")")
    parser.add_argument("--graphs", action="store_true",
                        help="time CUDA graph replays (one graph of a call on every input copy, "
                        "as engines run decode) instead of eager calls")
    parser.add_argument("--capi", help="run litetopk through this liblitetopk_c.so (C ABI) "
                        "instead of its torch op")
    parser.add_argument("--pad-rows", action="store_true",
                        help="row strides a multiple of 1024 bytes (DeepSelect needs it), for all")
    parser.add_argument("--adversarial", action="store_true",
                        help="also run the adversarial families through auto and every peer")
    parser.add_argument("--adv-shape", type=shape_parser("BxNxK", "64x131072x2048"),
                        default=(64, 131072, 2048), help="the adversarial families' shape")
    args = parser.parse_args()
    unknown = [a for a in args.algos if a not in OURS]
    if unknown:
        sys.exit(f"--algos: unknown algorithm {unknown[0]} ({', '.join(OURS)})")
    if args.capi:
        if not torch.cuda.is_available():
            sys.exit("select_bench.py needs a CUDA GPU")
        ours = CapiBackend(args.capi)
    else:
        require_cuda("select_bench.py")
        ours = OpsBackend()
    device = torch.cuda.get_device_name()  # before any peer can leave a sticky CUDA error
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            sys.exit(f"--dtypes: unknown dtype {d} (fp32, bf16, fp16)")
    peers = [load_peer(path) for path in args.peer_lib]
    peer_names = [method for method, _ in peer_methods(peers)]

    shapes = args.shapes if args.only_shapes else DEFAULT_SHAPES + args.shapes
    per_shape = len(args.algos) + (0 if args.no_torch else 1) + len(peer_names)
    progress = Progress(len(shapes) * len(dtypes) * per_shape +
                        (len(FAMILIES) * len(dtypes) if args.adversarial else 0))

    rows = []
    for batch, n, k in shapes:
        for dtype in dtypes:
            rows.append(bench_shape(batch, n, k, dtype, args, ours, peers, progress))
            torch.cuda.empty_cache()
    records = (adversarial(args.adv_shape, dtypes, args, ours, peers, progress)
               if args.adversarial else [])

    what = ("top-k of random normal rows (unsorted): torch.topk, litetopk radix, sample-filter, "
            "grid-radix, sieve, cluster, register and auto, and the peers " +
            ", ".join(peer_names or ["(none)"]) +
            "; CUDA events, median of iters after warmup, inputs rotated through copies "
            "totalling >= 256 MB")
    extra = {"peer_libs": {method: peer.path for method, peer in peer_methods(peers)},
             "adversarial": records}
    if args.capi:
        # result_record's fields, with the version from the C ABI (no Python extension here).
        record = {"what": what, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec="seconds"), "device": device,
                  "torch": torch.__version__, "litetopk": ours.version(), "backend": "c_api",
                  **extra, "iters": args.iters, "warmup": args.warmup, "rows": rows}
    else:
        record = result_record(what, args, rows, backend="torch op", **extra)
    table = markdown_table(rows, peer_names, records)
    write_results(record, table, args,
                  f"{record['device']}, {record['date']}, torch {record['torch']}")
    print_results(table, args)
    ours_exact = all(r["exact"].get("auto", False) for r in records)
    if not all(row["verified"] for row in rows) or not ours_exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
