#!/usr/bin/env python3
"""Table (markdown, on stdout) and plot of the incremental decoding benchmark:
medians per implementation, the ratios the issue sets targets for, cache bytes.

Usage: bench_decoding_report.py CPP_JSON PYTHON_JSON [--plot PNG]
"""

import argparse
import json
import re

NAME = re.compile(r"decode/(\w+)/N:(\d+)/T:(\d+)/threads:(\d+)")


def read(cpp_path, py_path):
    """{(impl, n, t, threads): median microseconds}, cache bytes per (n, t)."""
    times, cache = {}, {}
    for b in json.load(open(cpp_path))["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        impl, n, t, k = NAME.match(b["run_name"]).groups()
        key = (impl, int(n), int(t), int(k))
        times[key] = b["real_time"]  # microseconds (Unit kMicrosecond)
        if impl == "cached":
            cache[(int(n), int(t))] = b["cache_bytes"]
    for b in json.load(open(py_path))["benchmarks"]:
        impl, n, t, k = NAME.match(b["name"]).groups()
        times[(impl, int(n), int(t), int(k))] = b["median_us"]
    return times, cache


def ratio(times, a, b, key):
    return times[(a,) + key] / times[(b,) + key] if (b,) + key in times else None


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def markdown(times, cache):
    rows = ["| N | T | threads | cached µs | floor µs | Python loop µs | Python prealloc µs "
            "| recompute µs | cached / floor | cached / Python | recompute / cached | cache MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in (1, 8):
        for t in (128, 1024, 4096):
            for k in (1, 2):
                key = (n, t, k)
                get = lambda impl: times.get((impl,) + key)
                rec = get("recompute")
                rows.append(
                    f"| {n} | {t} | {k} | {fmt(get('cached'), 1)} | {fmt(get('floor'), 1)} "
                    f"| {fmt(get('python'), 1)} | {fmt(get('python_prealloc'), 1)} "
                    f"| {fmt(rec, 0)} "
                    f"| {fmt(ratio(times, 'cached', 'floor', key))} "
                    f"| {fmt(ratio(times, 'cached', 'python', key))} "
                    f"| {fmt(rec / get('cached') if rec else None, 0)} "
                    f"| {fmt(cache[(n, t)] / 2**20, 1)} |")
    return "\n".join(rows)


def plot(times, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for impl, style in (("cached", "-o"), ("floor", ":x"), ("python", "--s")):
        for n in (1, 8):
            ts = [t for t in (128, 1024, 4096) if (impl, n, t, 1) in times]
            ax.plot(ts, [times[(impl, n, t, 1)] for t in ts], style, label=f"{impl} N={n}")
    ax.set_xlabel("cache length T")
    ax.set_ylabel("µs per token (1 thread)")
    ax.set_title("Incremental decoding, E=512, H=8, float32")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cpp")
    parser.add_argument("python")
    parser.add_argument("--plot")
    args = parser.parse_args()
    times, cache = read(args.cpp, args.python)
    print(markdown(times, cache))
    if args.plot:
        plot(times, args.plot)


if __name__ == "__main__":
    main()
