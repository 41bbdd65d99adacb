#!/usr/bin/python3
"""Draws two or more `radixserve bench` JSON reports side by side as one PNG (matplotlib, from Debian).

    tools/plot_bench.py A.json B.json [...] [--label NAME ...] --out plot.png [--title TEXT]

`bench serve` reports (any server): output tok/s, TTFT, ITL and end-to-end latency (p50 solid, p99 dashed) against
the concurrency or request rate of each level. `bench one-batch` reports: decode tok/s (aggregate and per sequence),
prefill tok/s and the fraction of the memory-bandwidth bound against the batch size. All reports of one plot must be
of the same kind. Labels default to the file names without .json. Runs with Debian's python3 (scripts/setup installs
python3-matplotlib there; a pyenv or venv interpreter does not see it)."""
import argparse
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def kind_of(report: dict) -> str:
    if "levels" in report:
        return "serve"
    if "results" in report and report["results"] and "batch_size" in report["results"][0]:
        return "one-batch"
    raise SystemExit("not a `bench serve` or `bench one-batch` report (no 'levels' or 'results')")


def serve_axes(figure, reports):
    panels = [("output_throughput", None, "output tok/s"), ("ttft", "ms", "time to first token"),
              ("itl", "ms", "inter-token latency"), ("e2e_latency", "ms", "end-to-end latency")]
    axes = figure.subplots(2, 2).flatten()
    for (key, unit, title), ax in zip(panels, axes):
        for index, (label, report) in enumerate(reports):
            color = f"C{index}"
            x = [float(level["level"]) for level in report["levels"]]
            if unit is None:
                ax.plot(x, [level[key] for level in report["levels"]], "o-", color=color, label=label)
            else:
                ax.plot(x, [level[key]["p50_ms"] for level in report["levels"]], "o-", color=color,
                        label=f"{label} p50")
                ax.plot(x, [level[key]["p99_ms"] for level in report["levels"]], "s--", color=color,
                        label=f"{label} p99")
        mode = reports[0][1].get("mode", "concurrency")
        ax.set_xlabel("requests/s" if mode == "request_rate" else "concurrency")
        ax.set_ylabel(unit or "tok/s")
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")


def one_batch_axes(figure, reports):
    panels = [("decode_tokens_per_s", "decode tok/s (all sequences)"),
              ("decode_tokens_per_s_per_seq", "decode tok/s per sequence"),
              ("prefill_tokens_per_s", "prefill tok/s"), ("fraction_of_bound", "fraction of the bandwidth bound")]
    axes = figure.subplots(2, 2).flatten()
    for (key, title), ax in zip(panels, axes):
        for index, (label, report) in enumerate(reports):
            rows = sorted(report["results"], key=lambda r: r["batch_size"])
            ax.plot([r["batch_size"] for r in rows], [r[key] for r in rows], "o-", color=f"C{index}", label=label)
        ax.set_xlabel("batch size")
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", type=pathlib.Path)
    ap.add_argument("--label", action="append", default=[], help="one per report, in order")
    ap.add_argument("--out", required=True, type=pathlib.Path, help="the PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    if args.label and len(args.label) != len(args.reports):
        sys.exit(f"{len(args.label)} labels for {len(args.reports)} reports")
    labels = args.label or [path.stem for path in args.reports]
    reports = [(label, json.loads(path.read_text())) for label, path in zip(labels, args.reports)]
    kinds = {kind_of(report) for _, report in reports}
    if len(kinds) != 1:
        sys.exit(f"reports of different kinds cannot share a plot: {sorted(kinds)}")
    figure = plt.figure(figsize=(12, 8), layout="constrained")
    (serve_axes if kinds == {"serve"} else one_batch_axes)(figure, reports)
    figure.suptitle(args.title or " vs ".join(labels))
    figure.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
