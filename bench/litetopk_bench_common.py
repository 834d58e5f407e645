"""What bench/select_bench.py, indexer_bench.py and decode_bench.py share: importing the litetopk
package (installed with `pip install .`, else python/ of this repository with the extension the
CMake build wrote into build/release/python, or $LITETOPK_BUILD/python), the common command-line options, CUDA-event timing and CUDA graphs,
progress lines and writing the results (JSON and a markdown table). Imported by the scripts; not a
script of its own."""
import argparse
import datetime
import importlib.util
import json
import os
import statistics
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("litetopk") is None:
    # The source tree's package, with the extension a CMake build wrote into its build folder.
    sys.path.insert(0, os.path.join(REPO, "python"))
    sys.path.insert(1, os.path.join(os.environ.get("LITETOPK_BUILD",
                                                   os.path.join(REPO, "build", "release")),
                                    "python"))
import litetopk  # noqa: E402  (after the path fallback)
import litetopk.ops  # noqa: E402,F401  (registers torch.ops.litetopk)


def shape_parser(layout, example):
    """An argparse type for shapes written like `layout` ('BxNxK'): 'AxBxC' -> (A, B, C)."""
    def parse(text):
        try:
            parts = tuple(int(part) for part in text.lower().split("x"))
        except ValueError:
            parts = ()
        if len(parts) != len(layout.split("x")):
            raise argparse.ArgumentTypeError(
                f"shape must be {layout} (e.g. {example}), got {text}")
        return parts
    return parse


def add_common_arguments(parser, name, layout, example, iters, warmup):
    """--shapes (written like `layout`, e.g. `example`), --only-shapes, --iters, --warmup, --seed,
    --out (default bench/results/<name>_h200_<date>.json) and --md."""
    today = datetime.date.today().isoformat()
    parser.add_argument("--shapes", nargs="*", type=shape_parser(layout, example), default=[],
                        help=f"extra shapes, {layout} (e.g. {example})")
    parser.add_argument("--only-shapes", action="store_true",
                        help="run only --shapes, not the default ones")
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out",
                        default=os.path.join(REPO, f"bench/results/{name}_h200_{today}.json"))
    parser.add_argument("--md", help="write the markdown table to this file")


def require_cuda(script):
    if not torch.cuda.is_available():
        sys.exit(f"{script} needs a CUDA GPU")
    if not litetopk.build_info()["cuda_compiled"]:
        sys.exit(f"{script}: this litetopk build has no CUDA backend")


def time_cuda(run, warmup, iters):
    """Median and min milliseconds of run(i) over the last `iters` of i = 0 .. warmup + iters - 1,
    timed with CUDA events."""
    for i in range(warmup):
        run(i)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    # Let the host queue ahead (about 100 us of host work a call) so that launch overhead is not
    # timed.
    torch.cuda._sleep(max(1_000_000, 200_000 * iters))
    for i in range(iters):
        starts[i].record()
        run(warmup + i)
        ends[i].record()
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) for start, end in zip(starts, ends)]
    return statistics.median(times), min(times)


def capture_graph(run):
    """run() once on a side stream (warm-up, as CUDA graph capture wants), then captured in a CUDA
    graph; returns the graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


class Progress:
    """Numbered progress lines: '[step/steps] text ...'."""

    def __init__(self, steps):
        self.steps = steps
        self.step = 0

    def __call__(self, text):
        self.step += 1
        print(f"[{self.step}/{self.steps}] {text} ...", flush=True)


def result_record(what, args, rows, **extra):
    """The JSON record of a run: what was measured, when, where, with which versions, `extra`,
    the timing options and the rows."""
    return {
        "what": what,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "litetopk": litetopk.build_info()["version"],
        **extra,
        "iters": args.iters,
        "warmup": args.warmup,
        "rows": rows,
    }


def write_results(record, table, args, md_title):
    """Writes the record to --out and, with --md, the markdown table under `md_title`."""
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(f"{md_title}\n\n{table}")


def print_results(table, args):
    """Says which files were written, then prints the table."""
    print(f"wrote {args.out}" + (f" and {args.md}" if args.md else ""))
    print()
    print(table, end="")
