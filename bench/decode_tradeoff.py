"""Sparse decoding's error against its speed on the GPU (docs/sparse_decode.md, "Error against
speed"): from the JSON that bench/decode_bench.py wrote on the H200, rel L2 against the speed-up
over torch SDPA in the same run, for both selection rules (top-delta and bounded mass, one line
per context through their settings), with dense and "every block" as reference points; one panel
per workload and batch. No GPU or torch needed:

    python3 bench/decode_tradeoff.py bench/results/decode_h200_2026-12-01_ad50736.json \\
        --plot docs/sparse_decode_tradeoff.png
"""
import argparse
import json
import sys

TARGET = 1e-2
RULES = (("delta", "top-delta", "o", "tab:blue"), ("mass", "bounded mass", "s", "tab:orange"))


def rule_of(selection):
    """('delta', 7.0), ('mass', 0.01), ('every', None) or None for a decode_bench selection."""
    if not selection:
        return None
    if selection == "every block":
        return ("every", None)
    name, _, value = selection.partition(" ")
    if name in ("delta", "mass") and value:
        return (name, float(value))
    return None


def series(rows):
    """{(pattern, batch): {context: {"delta": [...], "mass": [...], "every": row, "dense": row}}},
    the rule lists ordered by speed-up; rows without a rel L2 or a speed-up are left out."""
    panels = {}
    for row in rows:
        if row.get("rel_l2") is None or row.get("speedup") is None:
            continue
        by_context = panels.setdefault((row["pattern"], row["batch"]), {})
        entry = by_context.setdefault(row["context"], {"delta": [], "mass": []})
        if row["kernel"] == "litetopk dense":
            entry["dense"] = row
            continue
        rule = rule_of(row.get("selection"))
        if rule is None:
            continue
        if rule[0] == "every":
            entry["every"] = row
        else:
            entry[rule[0]].append(dict(row, value=rule[1]))
    for by_context in panels.values():
        for entry in by_context.values():
            for name in ("delta", "mass"):
                entry[name].sort(key=lambda r: r["speedup"])
    return panels


def plot(panels, path, source):
    import matplotlib  # noqa: PLC0415 (only the plot needs it)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    keys = sorted(panels)
    columns = min(3, len(keys))
    rows_n = (len(keys) + columns - 1) // columns
    fig, grid = plt.subplots(rows_n, columns, figsize=(5.2 * columns, 4.2 * rows_n),
                             sharey=True, squeeze=False)
    axes = list(grid.flat)
    for ax, key in zip(axes, keys):
        contexts = sorted(panels[key])
        for i, context in enumerate(contexts):
            entry = panels[key][context]
            shade = 0.35 + 0.65 * i / max(1, len(contexts) - 1)
            for name, label, marker, color in RULES:
                sel = entry[name]
                if not sel:
                    continue
                ax.plot([r["speedup"] for r in sel], [r["rel_l2"] for r in sel], marker=marker,
                        color=color, alpha=shade, lw=1.2,
                        label=f"{label}, {context // 1024}K")
                for r in sel:
                    ax.annotate(f"{r['value']:g}", (r["speedup"], r["rel_l2"]), fontsize=6,
                                textcoords="offset points", xytext=(3, 3), alpha=shade)
            for ref, marker in (("every", "x"), ("dense", "d")):
                if ref in entry:
                    ax.scatter([entry[ref]["speedup"]], [entry[ref]["rel_l2"]], marker=marker,
                               color="gray", alpha=shade, s=22,
                               label=("every block" if ref == "every" else "litetopk dense")
                               if i == len(contexts) - 1 else None)
        ax.axhline(TARGET, color="red", lw=0.8, ls="--", label="rel L2 1e-2")
        ax.axvline(1.0, color="black", lw=0.6, ls=":", label="SDPA")
        ax.set_yscale("log")
        ax.set_title(f"{key[0]}, batch {key[1]}")
        ax.set_xlabel("speed-up over torch SDPA (same run)")
        ax.grid(True, which="both", lw=0.3)
        ax.legend(fontsize=6, loc="best")
    for ax in axes[::columns]:
        ax.set_ylabel("rel L2 vs fp64 dense attention")
    for ax in axes[len(keys):]:
        ax.axis("off")
    fig.suptitle(f"Sparse decode on the H200: error against speed ({source}); "
                 "labels: delta or mass target", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", help="a JSON file written by bench/decode_bench.py")
    parser.add_argument("--plot", required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    with open(args.json) as f:
        data = json.load(f)
    panels = series(data["rows"])
    if not panels:
        sys.exit(f"{args.json}: no rows with rel L2 and speed-up")
    plot(panels, args.plot, f"{data.get('device', 'GPU')}, litetopk {data.get('litetopk', '?')}")
    print(f"wrote {args.plot}: {len(panels)} panels")


if __name__ == "__main__":
    main()
