"""The error study of sparse decoding on the CPU (docs/sparse_decode.md, "Bounded error"): kept
blocks, kept mass and rel L2 against fp64 dense attention for both selection rules (top-delta and
bounded mass) at contexts 16K..256K on every generated workload, and the delta and mass target
that hold rel L2 <= 1e-2 at every context.

It runs `litetopk decode --device cpu` (the fp64 CPU references: sparse_decode_cpu and
decode_fidelity_cpu) once per workload and context, with every selection in one process.
Shapes: batch 1, Llama-3.1-8B's GQA group (4 query heads per KV head), D 128, fp16, 128-token
blocks; 2 of the model's 8 KV heads (8 of its 32 query heads) to keep the run near ten minutes on
two cores: every figure is a mean (or the worst) over those heads, and the heads of a workload are
independent draws of the same generator, so more heads change the means little.

    python3 bench/decode_fidelity.py --cli build/<you>/litetopk \\
        --json docs/sparse_decode_fidelity.json --plot docs/sparse_decode_fidelity.png
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PATTERNS = ("synthetic", "spread", "passages", "rope", "flat")
CONTEXTS = (16384, 32768, 65536, 131072, 262144)
DELTAS = ("3", "5", "7", "9", "11", "13")
MASSES = ("0.05", "0.02", "0.01", "0.005", "0.002", "0.001")
TARGET = 1e-2


def run_one(cli, pattern, context, kv_heads, q_heads, selections, seed):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        cmd = [cli, "decode", "--device", "cpu", "--pattern", pattern, "--context", str(context),
               "--kv-heads", str(kv_heads), "--q-heads", str(q_heads), "--seed", str(seed),
               "--deltas", ",".join(selections), "--json", path]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)


def rows_of(record, pattern, context):
    out = []
    for row in record["rows"]:
        if row["kind"] != "sparse":
            continue
        rule = row["selection"]
        value = row["delta"] if rule == "delta" else row["mass_target"]
        out.append({
            "pattern": pattern, "context": context, "rule": rule,
            "value": "inf" if value == "inf" else float(f"{float(value):.6g}"),  # fp32 -> text
            "kept_fraction": row["kept_fraction"], "read_fraction": row["read_fraction"],
            "kept_mass_mean": row["kept_mass_mean"], "kept_mass_min": row["kept_mass_min"],
            "rel_l2": row["rel_l2"], "max_head_rel_l2": row["max_head_rel_l2"],
            "selection_rel_l2": row["selection_rel_l2"],
        })
    return out


def holding(rows, rule, patterns):
    """Per pattern (and 'all'): the sparsest setting of `rule` whose rel L2 is <= TARGET at every
    context (delta: the smallest; mass: the largest), with its worst rel L2 and kept fraction."""
    result = {}
    for name in list(patterns) + ["all"]:
        chosen = None
        values = sorted({r["value"] for r in rows if r["rule"] == rule and r["value"] != "inf"},
                        reverse=(rule == "mass"))
        for v in values:
            sel = [r for r in rows if r["rule"] == rule and r["value"] == v
                   and (name == "all" or r["pattern"] == name)]
            if sel and all(r["rel_l2"] <= TARGET for r in sel):
                chosen = {"value": v, "worst_rel_l2": max(r["rel_l2"] for r in sel),
                          "max_kept_fraction": max(r["kept_fraction"] for r in sel),
                          "mean_kept_fraction": sum(r["kept_fraction"] for r in sel) / len(sel)}
                break
        result[name] = chosen
    return result


def plot(rows, path, patterns):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    columns = 3
    rows_n = (len(patterns) + columns) // columns  # one spare panel for the legend
    fig, grid = plt.subplots(rows_n, columns, figsize=(5.0 * columns, 4.0 * rows_n), sharey=True)
    axes = list(grid.flat)
    for ax, pattern in zip(axes, patterns):
        for rule, marker in (("delta", "o"), ("mass", "s")):
            for context, alpha in ((32768, 0.45), (262144, 1.0)):
                sel = sorted((r for r in rows if r["pattern"] == pattern and r["rule"] == rule
                              and r["context"] == context and r["value"] != "inf"),
                             key=lambda r: r["kept_fraction"])
                if not sel:
                    continue
                label = f"{'top-delta' if rule == 'delta' else 'bounded mass'}, {context // 1024}K"
                ax.plot([r["kept_fraction"] for r in sel], [r["rel_l2"] for r in sel],
                        marker=marker, alpha=alpha, label=label,
                        color="tab:blue" if rule == "delta" else "tab:orange")
                for r in sel:
                    if context == 262144:
                        ax.annotate(f"{r['value']:g}", (r["kept_fraction"], r["rel_l2"]),
                                    fontsize=6, textcoords="offset points", xytext=(3, 3))
        floor = [r for r in rows if r["pattern"] == pattern and r["value"] == "inf"
                 and r["context"] == 262144]
        if floor:
            ax.axhline(floor[0]["rel_l2"], color="gray", lw=0.8, ls=":",
                       label="every block (quantization floor)")
        ax.axhline(TARGET, color="red", lw=0.8, ls="--", label="rel L2 1e-2")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(pattern)
        ax.set_xlabel("kept blocks (fraction)")
        ax.grid(True, which="both", lw=0.3)
    for ax in axes[::columns]:
        ax.set_ylabel("rel L2 vs fp64 dense attention")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[len(patterns):]:
        ax.axis("off")
    axes[-1].legend(handles, labels, fontsize=9, loc="center")
    fig.suptitle("Sparse decode error vs kept blocks (CPU reference, B=1, GQA 4, D 128, BS 128; "
                 "labels: delta or mass target at 256K)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(rows, patterns, contexts):
    lines = ["| workload | context | " + " | ".join(
        [f"delta {d}" for d in DELTAS] + [f"mass {m}" for m in MASSES] + ["every block"]) + " |",
        "| --- | ---: |" + " ---: |" * (len(DELTAS) + len(MASSES) + 1)]
    for pattern in patterns:
        for context in contexts:
            cells = []
            for rule, values in (("delta", DELTAS), ("mass", MASSES), ("delta", ("inf",))):
                for v in values:
                    key = v if v == "inf" else float(v)
                    match = [r for r in rows if r["pattern"] == pattern and r["context"] == context
                             and r["rule"] == rule and r["value"] == key]
                    cells.append(f"{match[0]['rel_l2']:.1e} ({match[0]['kept_fraction']:.3f})"
                                 if match else "-")
            lines.append(f"| {pattern} | {context // 1024}K | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default="build/release/litetopk", help="the litetopk binary")
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    parser.add_argument("--contexts", default=",".join(str(c) for c in CONTEXTS))
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--q-heads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", help="write the rows and the settings that hold here")
    parser.add_argument("--plot", help="write the PNG plot here")
    parser.add_argument("--from-json", help="no runs: the table and plot of a saved --json")
    args = parser.parse_args()
    patterns = args.patterns.split(",")
    contexts = [int(c) for c in args.contexts.split(",")]
    if args.from_json:
        with open(args.from_json) as f:
            rows = json.load(f)["rows"]
        if args.plot:
            plot(rows, args.plot, patterns)
        print(table(rows, patterns, contexts))
        return
    selections = list(DELTAS) + ["m" + m for m in MASSES] + ["inf"]
    rows, started = [], time.time()
    for pattern in patterns:
        for context in contexts:
            t0 = time.time()
            record = run_one(args.cli, pattern, context, args.kv_heads, args.q_heads, selections,
                             args.seed)
            rows += rows_of(record, pattern, context)
            print(f"{pattern} {context}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    result = {
        "what": "sparse decode error study, CPU fp64 references (bench/decode_fidelity.py)",
        "shapes": {"batch": 1, "kv_heads": args.kv_heads, "q_heads": args.q_heads,
                   "head_dim": 128, "block_size": 128, "dtype": "fp16", "seed": args.seed},
        "target_rel_l2": TARGET,
        "holding_delta": holding(rows, "delta", patterns),
        "holding_mass": holding(rows, "mass", patterns),
        "rows": rows,
        "seconds": round(time.time() - started, 1),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(rows, args.plot, patterns)
    print(table(rows, patterns, contexts))
    print()
    for rule in ("delta", "mass"):
        for name, chosen in result[f"holding_{rule}"].items():
            print(f"{rule} holding rel L2 <= {TARGET:g} at every context, {name}: "
                  + ("none" if chosen is None else
                     f"{chosen['value']:g} (worst rel L2 {chosen['worst_rel_l2']:.2e}, kept "
                     f"blocks mean {chosen['mean_kept_fraction']:.3f}, max "
                     f"{chosen['max_kept_fraction']:.3f})"))


if __name__ == "__main__":
    main()
