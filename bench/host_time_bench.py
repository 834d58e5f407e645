"""Eager host time per call of litetopk's torch ops, beside torch.topk's, on the GPU.

Each op runs on small inputs (the kernels are short, so the host is what is measured), after a
warm-up that plans its signature; the GPU is first given a long spin kernel
(torch.cuda._sleep), so that the timed calls only enqueue and never wait for the device. A row is
the median over --rounds rounds of the mean host microseconds of --calls back-to-back calls.
Target: <= 5 us per op for topk_out, fp8_mqa_topk (out-variant) and sparse_attention_out.

    python3 bench/host_time_bench.py [--calls 200] [--rounds 7] [--md host_time.md]
"""
import argparse
import math
import statistics
import time

import torch

from litetopk_bench_common import REPO, print_results, require_cuda, result_record, write_results
import litetopk  # noqa: E402  (after litetopk_bench_common's path fallback)
from litetopk.ops import (SparseKvCache, dense_decode, fp8_mqa_topk, fp8_paged_mqa_topk,
                          sparse_attention, topk)

SPIN_CYCLES_PER_CALL = 40_000  # ~20 us of GPU spin per timed call at H200 clocks


def host_us(call, calls, rounds):
    """(median, min) over rounds of the mean host time of `calls` calls, in microseconds."""
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    means = []
    for _ in range(rounds):
        torch.cuda._sleep(SPIN_CYCLES_PER_CALL * calls)
        start = time.perf_counter()
        for _ in range(calls):
            call()
        means.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(means), min(means)


def inputs():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 4096, generator=g).cuda()
    indices = torch.empty(4, 64, dtype=torch.int32, device="cuda")
    T, S, H = 64, 1024, 64
    q = torch.randn(T, H, 128, generator=g).to(torch.float8_e4m3fn).cuda()
    kv = torch.randn(S, 128, generator=g).to(torch.float8_e4m3fn).cuda()
    kv_scale = (torch.rand(S, generator=g) + 0.5).cuda()
    weights = (torch.randn(T, H, generator=g) / math.sqrt(H)).cuda()
    ks = torch.zeros(T, dtype=torch.int32, device="cuda")
    ke = (S - T + 1 + torch.arange(T, dtype=torch.int32)).cuda()
    mqa_out = (torch.empty(T, 64, dtype=torch.int32, device="cuda"), None)
    s_q, h_q, d_qk, topk_slots = 16, 64, 576, 128
    aq = (torch.randn(s_q, h_q, d_qk, generator=g) / 10).to(torch.bfloat16).cuda()
    akv = (torch.randn(4096, 1, d_qk, generator=g) / 10).to(torch.bfloat16).cuda()
    aidx = torch.randint(0, 4096, (s_q, 1, topk_slots), generator=g, dtype=torch.int32).cuda()
    aout = (torch.empty(s_q, h_q, 512, dtype=torch.bfloat16, device="cuda"), None, None)
    batch, heads, capacity = 2, 2, 512
    dq = (torch.randn(batch, 8, 128, generator=g) * 0.3).half().cuda()
    keys = torch.randn(batch, heads, capacity, 128, generator=g).half().cuda()
    values = torch.randn(batch, heads, capacity, 128, generator=g).half().cuda()
    lengths = torch.tensor([capacity, capacity - 137], dtype=torch.int32, device="cuda")
    cache = SparseKvCache.empty(batch, heads, capacity // 128, device="cuda")
    cache.fill_from_dense(keys, values, lengths.clone())
    blocks, block_size = 32, 64
    pq = torch.randn(2, 1, H, 128, generator=g).to(torch.float8_e4m3fn).cuda()
    kv_cache = torch.randint(0, 255, (blocks, block_size, 1, 132), generator=g,
                             dtype=torch.uint8).cuda()
    kv_cache.view(blocks, -1)[:, block_size * 128:].view(torch.float32).fill_(1.0)
    pweights = torch.randn(2, H, generator=g).cuda()
    context_lens = torch.tensor([1000, 700], dtype=torch.int32, device="cuda")
    block_table = torch.arange(32, dtype=torch.int32, device="cuda").view(2, 16)
    lib = litetopk._ext.ext()
    problem = lib.SelectProblem()
    problem.dtype, problem.batch, problem.n, problem.k = lib.DType.float32, 4, 4096, 64
    plan = lib.select_topk_plan(problem, lib.SelectOptions())
    workspace = torch.empty(max(1, plan.workspace_bytes), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    bare = (plan, scores.data_ptr(), 0, 0, indices.data_ptr(), 0, workspace.data_ptr(), stream)
    return {
        "torch.topk (reference)": lambda: torch.topk(scores, 64, sorted=False),
        "torch.empty 4 x 64 on the GPU (allocator floor)":
            lambda: torch.empty(4, 64, dtype=torch.int32, device="cuda"),
        "select_topk_launch, the bare binding (no torch op)":
            lambda: lib.select_topk_launch(*bare),
        "topk": lambda: topk(scores, 64),
        "topk_out": lambda: topk(scores, 64, out=(indices, None)),
        "torch.ops.litetopk.topk_out (dispatcher)":
            lambda: torch.ops.litetopk.topk_out(scores, 64, indices),
        "fp8_mqa_topk": lambda: fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 64),
        "fp8_mqa_topk (out)": lambda: fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 64,
                                                   out=mqa_out),
        "sparse_attention": lambda: sparse_attention(aq, akv, aidx, 0.04),
        "sparse_attention_out": lambda: sparse_attention(aq, akv, aidx, 0.04, out=aout),
        "fp8_paged_mqa_topk": lambda: fp8_paged_mqa_topk(pq, kv_cache, pweights, context_lens,
                                                         block_table, 1024, 64),
        "dense_decode": lambda: dense_decode(dq, keys, values, lengths),
        "sparse_decode": lambda: cache.decode(dq),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=f"{REPO}/bench/results/host_time_h200.json")
    parser.add_argument("--md", help="write the markdown table to this file")
    args = parser.parse_args()
    args.iters, args.warmup = args.calls, 20
    require_cuda("host_time_bench.py")
    rows = []
    for name, call in inputs().items():
        median, best = host_us(call, args.calls, args.rounds)
        rows.append({"op": name, "host_us": round(median, 2), "host_us_min": round(best, 2)})
        print(f"{name:42s} {median:7.2f} us", flush=True)
    reference = rows[0]["host_us"]
    table = "| op | host us (median) | min | vs torch.topk |\n| --- | --- | --- | --- |\n" + "".join(
        f"| {r['op']} | {r['host_us']:.2f} | {r['host_us_min']:.2f} | "
        f"{r['host_us'] / reference:.2f}x |\n" for r in rows)
    write_results(result_record("eager host time per call", args, rows, calls=args.calls,
                                rounds=args.rounds), table, args,
                  "Eager host time per call (us)")
    print_results(table, args)


if __name__ == "__main__":
    main()
