"""bench/decode_tradeoff.py's grouping of decode_bench rows into the error-against-speed plot's
series (no GPU, no torch)."""
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "decode_tradeoff", os.path.join(REPO, "bench", "decode_tradeoff.py"))
tradeoff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tradeoff)


def row(kernel, selection, speedup, rel_l2, context=131072, batch=1, pattern="synthetic"):
    return {"pattern": pattern, "batch": batch, "context": context, "kernel": kernel,
            "selection": selection, "speedup": speedup, "rel_l2": rel_l2}


def test_rules_parse():
    assert tradeoff.rule_of("delta 7") == ("delta", 7.0)
    assert tradeoff.rule_of("mass 0.005") == ("mass", 0.005)
    assert tradeoff.rule_of("every block") == ("every", None)
    assert tradeoff.rule_of(None) is None
    assert tradeoff.rule_of("-") is None


def test_series_group_sort_and_skip():
    rows = [
        row("torch SDPA (enable_gqa)", None, 1.0, 2e-4),
        row("litetopk dense", None, 0.9, 2e-4),
        row("litetopk sparse", "delta 9", 1.3, 3e-3),
        row("litetopk sparse", "delta 5", 2.0, 2e-2),
        row("litetopk sparse", "delta 7", 1.7, 7e-3),
        row("litetopk sparse", "mass 0.01", 1.2, 8e-3),
        row("litetopk sparse", "every block", 0.95, 2e-3),
        row("litetopk sparse", "delta 3", None, 1e-1),  # no speed-up: left out
        row("litetopk sparse", "delta 7", 3.0, 9e-3, batch=8),
    ]
    panels = tradeoff.series(rows)
    assert set(panels) == {("synthetic", 1), ("synthetic", 8)}
    entry = panels[("synthetic", 1)][131072]
    assert [r["value"] for r in entry["delta"]] == [9.0, 7.0, 5.0]  # by speed-up
    assert [r["value"] for r in entry["mass"]] == [0.01]
    assert entry["every"]["speedup"] == 0.95
    assert entry["dense"]["speedup"] == 0.9
    assert [r["value"] for r in panels[("synthetic", 8)][131072]["delta"]] == [7.0]
