#!/usr/bin/env python3
"""One DSA layer (issue 23, item 4): litetopk's dsa_prefill against the pipelines an engine can
assemble from peers, side by side in one process.

The layer on a causal prefill chunk: T queries at the end of S tokens (ks = 0, ke = S - T + t + 1),
the indexer at H heads (DeepGEMM's input recipe, bench/deepgemm_peer.py: fp8 q, per-row fp8 keys
with fp32 scales, N(0, 1) weights) picks k tokens per query, then MLA sparse attention at h_q
heads (q and kv bf16 N(0, 1) / 10 as FlashMLA's test draws them, d_qk 576, d_v 512) attends over
them. Rows:
- litetopk: `torch.ops.litetopk.dsa_prefill` (one call: indexer, kv rows, attention, no host
  round trip), eager and replayed from a CUDA graph;
- deepgemm+select+flashmla: DeepGEMM's fp8_mqa_logits [T, S], litetopk's exact topk over each
  query's range, FlashMLA's flash_mla_sparse_fwd (q padded to 64 heads once, outside the timing,
  as engines keep it);
- deepgemm+torch.topk+flashmla: the same with torch.topk (positions of -inf logits made -1).
The peers run when bench/deepgemm_peer.py and bench/flashmla_peer.py find them (built outside the
tree); without them their rows say why. Timing: CUDA events, median (and min) of --iters after
--warmup. Each peer pipeline's out is compared with litetopk's (max |difference|; ties of the
indexer's scores may pick other tokens, so it is a sanity figure, not a check).

The share: on the index sets the indexer itself chose (litetopk's dsa_prefill indices, not
generated ones), how much neighbouring queries share (flashmla_peer.group_overlap, groups of
G = 64 / h_q at h_q 16 and 32 (LiteDSA's packing) and of 8 otherwise): mean overlap and the kv-row
reuse a union-packed kernel gets.

Writes JSON (--out) and a markdown table (--md). Needs a CUDA GPU and a litetopk build with its
CUDA backend.
"""
import argparse
import sys

import torch

import deepgemm_peer
import flashmla_peer
from litetopk_bench_common import (Progress, add_common_arguments, capture_graph, print_results,
                                   require_cuda, result_record, time_cuda, write_results)
from litetopk.ops import dsa_prefill, topk

KI = 1024
D_QK = 576
DEFAULT_SHAPES = [(8192, 128 * KI, 16), (8192, 128 * KI, 128)]  # T x S x h_q (issue 23)
QUICK_SHAPES = [(1024, 32 * KI, 16)]


def make_layer(T, S, H, h_q, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    index = deepgemm_peer.make_prefill_inputs(T, S, H, generator=g)
    ks = torch.zeros(T, dtype=torch.int32, device="cuda")
    ke = (S - T + 1 + torch.arange(T, device="cuda")).to(torch.int32)
    q = flashmla_peer.make_q(T, h_q, D_QK, std=0.1, seed=seed)
    kv = flashmla_peer.make_kv(S, D_QK, std=0.1, seed=seed)
    return {"index": index, "ks": ks, "ke": ke, "q": q, "kv": kv, "sm_scale": D_QK ** -0.5}


def litetopk_layer(layer, k, indexer_algo, attention_algo, out=None):
    i = layer["index"]
    return dsa_prefill(i["q"], (i["kv"], i["kv_scale"]), i["weights"], layer["ks"], layer["ke"],
                       k, layer["q"], layer["kv"], layer["sm_scale"], indexer_algo=indexer_algo,
                       attention_algo=attention_algo, out=out)


def torch_topk_rows(logits, k):
    values, rows = torch.topk(logits, k, dim=1)
    return torch.where(values == float("-inf"), -1, rows).to(torch.int32)


def peer_layer(dg, fm, layer, k, select, padded_q):
    """DeepGEMM's logits, `select`, FlashMLA: (out over the real heads, rows)."""
    i = layer["index"]
    logits = deepgemm_peer.mqa_logits(dg, i["q"], i["kv"], i["kv_scale"], i["weights"],
                                      layer["ks"], layer["ke"])
    if select == "select":
        rows, _ = topk(logits, k, layer["ks"], layer["ke"])  # ks = 0: positions are kv rows
    else:
        rows = torch_topk_rows(logits, k)
    indices = rows.view(rows.shape[0], 1, k)
    if k % flashmla_peer.TOPK_MULTIPLE:
        indices = flashmla_peer.pad_topk(indices)
    out, _, _ = flashmla_peer.sparse_prefill(padded_q, layer["kv"], indices, layer["sm_scale"])
    return out[:, :layer["q"].shape[1]], rows


def share(rows, S, h_q):
    group = 64 // h_q if h_q in (16, 32) else 8
    return flashmla_peer.group_overlap(rows, S, group)


def bench_shape(dg, fm, shape, args, progress):
    T, S, h_q = shape
    label = f"T={T} S={S} h_q={h_q} H={args.indexer_heads} k={args.topk}"
    layer = make_layer(T, S, args.indexer_heads, h_q, args.seed)
    rows = []
    progress(f"{label}: litetopk dsa_prefill")
    out, _, _, indices = litetopk_layer(layer, args.topk, args.indexer_algo, args.attention_algo)
    torch.cuda.synchronize()
    overlap = share(indices, S, h_q)
    median, best = time_cuda(lambda _: litetopk_layer(layer, args.topk, args.indexer_algo,
                                                      args.attention_algo),
                             args.warmup, args.iters)
    base = {"T": T, "S": S, "h_q": h_q, "H": args.indexer_heads, "k": args.topk,
            "share_group": overlap["group"], "share_overlap": overlap["mean_overlap"],
            "share_reuse": overlap["reuse"]}
    rows.append({**base, "pipeline": "litetopk dsa_prefill", "ms": median, "ms_min": best})
    buffers = (torch.empty_like(out), None, None, torch.empty_like(indices))
    graph = capture_graph(lambda: litetopk_layer(layer, args.topk, args.indexer_algo,
                                                 args.attention_algo, out=buffers))
    median, best = time_cuda(lambda _: graph.replay(), args.warmup, args.iters)
    rows.append({**base, "pipeline": "litetopk dsa_prefill (CUDA graph)", "ms": median,
                 "ms_min": best})
    padded_q = flashmla_peer.pad_heads(layer["q"]) if fm is not None else None
    for select, name in (("select", "deepgemm+select+flashmla"),
                         ("torch", "deepgemm+torch.topk+flashmla")):
        if dg is None or fm is None:
            why = deepgemm_peer.describe(dg) if dg is None else flashmla_peer.describe(fm)
            rows.append({**base, "pipeline": name, "ms": None, "ms_min": None, "note": why})
            continue
        progress(f"{label}: {name}")
        theirs, _ = peer_layer(dg, fm, layer, args.topk, select, padded_q)
        diff = float((theirs.float() - out.float()).abs().max())
        median, best = time_cuda(lambda _: peer_layer(dg, fm, layer, args.topk, select, padded_q),
                                 args.warmup, args.iters)
        rows.append({**base, "pipeline": name, "ms": median, "ms_min": best,
                     "max_abs_diff_vs_litetopk": diff})
    ours = rows[0]["ms"]
    for row in rows:
        row["litetopk_speedup"] = row["ms"] / ours if row["ms"] else None
    return rows


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(rows):
    lines = ["| shape | pipeline | ms | min ms | litetopk speed-up | share (group) | reuse | "
             "note |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        shape = f"T={r['T']} S={r['S']} h_q={r['h_q']}"
        lines.append(f"| {shape} | {r['pipeline']} | {fmt(r['ms'])} | {fmt(r['ms_min'])} | "
                     f"{fmt(r['litetopk_speedup'], 2)} | {fmt(r['share_overlap'], 3)} "
                     f"({r['share_group']}) | {fmt(r['share_reuse'], 2)} | "
                     f"{r.get('note', '')} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, "dsa", "TxSxH_Q", "8192x131072x16", iters=10, warmup=2)
    parser.add_argument("--quick", action="store_true", help=f"shapes {QUICK_SHAPES} instead")
    parser.add_argument("--topk", type=int, default=2048)
    parser.add_argument("--indexer-heads", type=int, default=64)
    parser.add_argument("--indexer-algo", default="auto")
    parser.add_argument("--attention-algo", default="auto")
    args = parser.parse_args()
    require_cuda("bench/dsa_bench.py")
    shapes = list(args.shapes) if args.only_shapes else (
        (QUICK_SHAPES if args.quick else DEFAULT_SHAPES) + list(args.shapes))
    dg, fm = deepgemm_peer.load(), flashmla_peer.load()
    print(deepgemm_peer.describe(dg))
    print(flashmla_peer.describe(fm))
    progress = Progress(len(shapes) * 3)
    rows = []
    for shape in shapes:
        rows += bench_shape(dg, fm, shape, args, progress)
    table = markdown_table(rows)
    record = result_record("dsa layer: litetopk dsa_prefill vs DeepGEMM + select/torch.topk + "
                           "FlashMLA", args, rows, deepgemm=deepgemm_peer.describe(dg),
                           flashmla=flashmla_peer.describe(fm))
    write_results(record, table, args, "## DSA layer (bench/dsa_bench.py)")
    print_results(table, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
