#!/usr/bin/env python3
"""Kernel-time breakdown of one model step from an ncu CSV (gpu__time_duration.sum per kernel launch).

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file run.csv radixserve bench ... \\
        --disable-cuda-graph
    tools/ncu_step_breakdown.py run.csv [--step -1]

Steps are split at the embedding kernel (the first launch of every forward); the chosen step (default: the last
complete one, a decode step when the run ends with decoding) is summed by kernel family and printed as a table."""
import argparse
import collections
import csv
import re
import sys

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def family(name):
    lower = name.lower()
    if "gemm_tiled" not in lower and any(k in lower for k in ("gemm", "cutlass", "nvjet", "sm90_xmma")):
        return "cublas_gemm"
    base = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    base = re.sub(r"\(.*", "", base)  # drop arguments
    template = re.search(r"<([^<>]*)", base)
    base = re.sub(r"<.*", "", base).split("::")[-1].replace("void ", "")
    # Keep the leading template argument of our kernels (weight format, rows) to tell GEMV variants apart.
    return f"{base}<{template.group(1).split(',')[0].split('::')[-1]}>" if template and "gemv" in base else base


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--step", type=int, default=-1, help="step index (negative counts from the end)")
    args = ap.parse_args()
    launches = []
    with open(args.csv, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", "")) * UNITS.get(row["Metric Unit"], 1.0)
        launches.append((row["Kernel Name"], value))
    steps, current = [], []
    for name, us in launches:
        if "embedding_kernel" in name and current:
            steps.append(current)
            current = []
        current.append((name, us))
    if current:
        steps.append(current)
    if not steps:
        sys.exit("no kernels found")
    step = steps[args.step]
    by_family = collections.defaultdict(lambda: [0.0, 0])
    for name, us in step:
        by_family[family(name)][0] += us
        by_family[family(name)][1] += 1
    total = sum(v[0] for v in by_family.values())
    print(f"step {args.step} of {len(steps)}: {len(step)} launches, {total / 1000:.3f} ms of kernel time")
    print(f"{'kernel':<40} {'launches':>8} {'ms':>9} {'share':>7}")
    for fam, (us, n) in sorted(by_family.items(), key=lambda kv: -kv[1][0]):
        print(f"{fam[:40]:<40} {n:>8} {us / 1000:>9.3f} {100 * us / total:>6.1f}%")


if __name__ == "__main__":
    main()
