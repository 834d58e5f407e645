#!/usr/bin/env python3
"""A DeepSeek sparse attention (DSA) lightning indexer as a torch module, with litetopk.

`DSAIndexer(fused=False)` runs the path engines run today with DeepGEMM: the logits op writes the
[T, S] fp32 score matrix (litetopk.ops.fp8_mqa_logits, DeepGEMM's arguments), then a top-k op picks
k keys per query (litetopk.ops.topk, vLLM's top-k-per-row layout). `DSAIndexer(fused=True)` calls
litetopk.ops.fp8_mqa_topk, which scores and selects without writing the matrix. Both return the
same indices [T, k] int32 (relative to each query's ks, -1 padded), up to the order inside a row
and the choice among keys of equal score.

The module keeps the parts of DeepSeek-V3.2's indexer that shape the kernels' inputs: q from the
query LoRA ([T, H, D], H = 64, D = 128), one key per token from the hidden state (LayerNorm), fp8
e4m3 quantization with a scale per (token, head) for q (folded into the head weights, as the
engines do) and per token for k, and the head weights with the softmax scale. RoPE and the
Hadamard rotation are left out: they change the values, not the calls.

Run it (CPU tensors run litetopk's CPU backend; CUDA tensors the GPU kernels): it feeds both
paths the same prepared inputs, eagerly, compiled with torch.compile(fullgraph=True) (--compile)
or in a CUDA graph (--graph), and exits 1 when they select different keys (beyond ties).
  python3 examples/dsa_indexer.py [--device cpu|cuda] [--tokens 512] [--topk 64]
                                  [--compile] [--graph]
"""
import argparse
import sys

import torch
from torch import nn

from litetopk.ops import IndexerState, fp8_mqa_logits, fp8_mqa_topk, topk

FP8_MAX = 448.0


def quantize_fp8(x):
    """x [..., D] -> (e4m3 values, fp32 scale [...]) with one scale per row: amax / 448."""
    scale = x.abs().amax(dim=-1).float().clamp_min(1e-4) / FP8_MAX
    return (x.float() / scale.unsqueeze(-1)).to(torch.float8_e4m3fn), scale


class DSAIndexer(nn.Module):
    """Scores every key of [ks[t], ke[t]) for query token t and keeps the best `topk`."""

    def __init__(self, hidden_size=512, q_lora_rank=256, heads=64, head_dim=128, topk=2048,
                 fused=True):
        super().__init__()
        self.heads, self.head_dim, self.topk, self.fused = heads, head_dim, topk, fused
        self.wq_b = nn.Linear(q_lora_rank, heads * head_dim, bias=False)
        self.wk = nn.Linear(hidden_size, head_dim, bias=False)
        self.k_norm = nn.LayerNorm(head_dim)
        self.weights_proj = nn.Linear(hidden_size, heads, bias=False)
        self.softmax_scale = head_dim ** -0.5

    def prepare(self, x, q_lora):
        """The kernels' inputs from x [T, hidden] and q_lora [T, q_lora_rank] (this chunk's
        tokens, which are also the keys here; an engine passes its gathered key cache instead):
        q [T, H, D] e4m3, (kv [S, D] e4m3, kv_scale [S]), weights [T, H] fp32."""
        tokens = x.shape[0]
        q = self.wq_b(q_lora).view(tokens, self.heads, self.head_dim)
        q_fp8, q_scale = quantize_fp8(q)                        # [T, H, D], [T, H]
        k_fp8, k_scale = quantize_fp8(self.k_norm(self.wk(x)))  # [S, D], [S]
        weights = (self.weights_proj(x).float() * self.heads ** -0.5 * q_scale
                   * self.softmax_scale)                        # [T, H]
        return q_fp8, (k_fp8, k_scale), weights

    def select(self, q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, state=None):
        """indices [T, topk] int32 of the keys each query keeps (ks/ke [T] int32), from
        prepare()'s outputs: the litetopk ops of this module's path."""
        if self.fused:
            indices, _ = fp8_mqa_topk(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, self.topk,
                                      state=state)
        else:
            logits = fp8_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke)
            indices, _ = topk(logits, self.topk, cu_seqlen_ks, cu_seqlen_ke)
        return indices

    def forward(self, x, q_lora, cu_seqlen_ks, cu_seqlen_ke, state=None):
        return self.select(*self.prepare(x, q_lora), cu_seqlen_ks, cu_seqlen_ke, state)


def make_inputs(tokens, hidden_size=512, q_lora_rank=256, device="cpu", seed=0):
    """A causal prefill chunk: x, q_lora and ks = 0, ke = t + 1."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(tokens, hidden_size, generator=generator).to(device)
    q_lora = torch.randn(tokens, q_lora_rank, generator=generator).to(device)
    ks = torch.zeros(tokens, dtype=torch.int32, device=device)
    ke = torch.arange(1, tokens + 1, dtype=torch.int32, device=device)
    return x, q_lora, ks, ke


def same_selection(a, b, scores=None, row_starts=None):
    """True when two [T, k] index sets agree row by row (order free); with scores [T, S] (the
    logits; indices are relative to row_starts, 0 when None), rows that differ only among keys of
    equal score count as equal."""
    a_sorted, b_sorted = a.sort(dim=1).values, b.sort(dim=1).values
    if torch.equal(a_sorted, b_sorted):
        return True
    if scores is None:
        return False
    for row in (a_sorted != b_sorted).any(dim=1).nonzero().flatten().tolist():
        start = 0 if row_starts is None else int(row_starts[row])
        ia, ib = a[row][a[row] >= 0].long() + start, b[row][b[row] >= 0].long() + start
        if len(ia) != len(ib):
            return False
        va = scores[row, ia].sort().values
        vb = scores[row, ib].sort().values
        if not torch.equal(va, vb):
            return False
    return True


def capture(run):
    """run() warmed up on a side stream (as graph capture wants), then captured in a CUDA graph:
    (graph, the outputs that each replay rewrites)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = run()
    return graph, outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--topk", type=int, default=64)
    parser.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True)")
    parser.add_argument("--graph", action="store_true", help="capture and replay a CUDA graph")
    args = parser.parse_args()
    if args.graph and torch.device(args.device).type != "cuda":
        parser.error("--graph needs a CUDA device")

    torch.manual_seed(0)
    fused = DSAIndexer(topk=args.topk, fused=True).to(args.device).eval()
    unfused = DSAIndexer(topk=args.topk, fused=False).to(args.device).eval()
    unfused.load_state_dict(fused.state_dict())
    x, q_lora, ks, ke = make_inputs(args.tokens, device=args.device)
    state = IndexerState(args.topk, device=args.device)

    # An engine calls (or compiles) forward(). To compare the two paths, both get the same
    # prepared tensors: compiled apart, each module's prepare() (LayerNorm, fp8 casts and scales)
    # may round differently, and keys near a row's k-th score may then legitimately differ.
    prepare, select_fused, select_unfused = fused.prepare, fused.select, unfused.select
    if args.compile:
        prepare, select_fused, select_unfused = (torch.compile(f, fullgraph=True)
                                                 for f in (prepare, select_fused, select_unfused))

    with torch.no_grad():
        q, kv, weights = prepare(x, q_lora)
        scores = fp8_mqa_logits(q, kv, weights, ks, ke)  # what both paths select from

        def run():
            state.reset()
            return (select_fused(q, kv, weights, ks, ke, state),
                    select_unfused(q, kv, weights, ks, ke))

        got, want = run()
        checks = {"call": (got, want)}
        if args.graph:
            graph, replayed = capture(run)
            graph.replay()
            torch.cuda.synchronize()
            checks["graph replay"] = replayed
            checks["graph replay against call (fused)"] = (replayed[0], got)
    # Same keys up to ties: rows may differ only among keys of equal score (same_selection).
    failed = [name for name, (a, b) in checks.items() if not same_selection(a, b, scores, ks)]
    ok = not failed
    print(f"{args.device}: T = {args.tokens}, k = {args.topk}, compile = {args.compile}, "
          f"graph = {args.graph}: fused and logits + topk select "
          f"{'the same keys' if ok else 'DIFFERENT keys: ' + ', '.join(failed)}")
    print("last query's first keys:", got[-1][got[-1] >= 0].sort().values.tolist()[:16])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
