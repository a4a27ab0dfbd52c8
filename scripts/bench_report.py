#!/usr/bin/env python3
"""Merge the raw outputs of scripts/bench.sh into one results JSON, its tables
(bench/results/<date>.md, the summary in docs/benchmarks.md) and a PNG plot.

Input: one directory of group files per sweep: cpp_NN.json (mha_bench,
Google Benchmark JSON) and py_NN.json (bench_python.py) for the same group NN.
Each timing is the median over repetitions (C++) or blocks (Python), in
microseconds. Each group carries its own GEMM peak, and every ratio and every
% of peak is taken within one group, i.e. from measurements seconds apart.
With several directories (the same groups measured again on a noisy
machine), each implementation keeps its fastest per-sweep median, and the
ratios are taken between those (merge_sweeps).

Only the part of docs/benchmarks.md between the GENERATED markers is rewritten
(the targets and one summary row per shape); the analysis around it is kept.
Every configuration goes to a markdown file next to the results JSON
(bench/results/<date>.md). --from-json rebuilds both from a results JSON.

Usage:
    bench_report.py --raw DIR [DIR ...] --json OUT.json --markdown docs/benchmarks.md
                    [--tables OUT.md] --plot docs/benchmarks.png [--no-docs]
    bench_report.py --from-json bench/results/<date>.json --markdown docs/benchmarks.md
                    [--tables OUT.md] [--plot docs/benchmarks.png]
"""

import argparse
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

BEGIN = "<!-- BEGIN GENERATED (scripts/bench_report.py) -->"
END = "<!-- END GENERATED -->"
NAME_RE = re.compile(r"^(infer|train|crossover|gemm)/((?:.*?/)?threads:\d+)")
PEERS = ("python", "libtorch", "floor")


def parse_name(name):
    """'infer/ours/N:1/L:16/nw:0/kpm:0/causal:0/threads:1[/...]' -> dict."""
    m = NAME_RE.match(name)
    if not m:
        return None
    family, rest = m.group(1), m.group(2)
    parts = rest.split("/")
    info = {"family": family}
    if family in ("infer", "train", "crossover"):
        info["impl"] = parts[0]
        parts = parts[1:]
    for p in parts:
        k, v = p.split(":")
        info[k] = int(v)
    return info


def config_key(info):
    keys = ("family", "N", "L", "nw", "kpm", "causal", "threads")
    return tuple(info.get(k) for k in keys)


def read_cpp(path):
    """{base name: {median_us, samples, counters}} from a Google Benchmark JSON."""
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        m = NAME_RE.match(b["name"])
        if not m:
            continue
        base = m.group(0)
        entry = runs.setdefault(base, {"times": [], "counters": {}, "error": None})
        if b.get("error_occurred"):
            entry["error"] = b.get("error_message", "error")
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
        entry["times"].append(b["real_time"] * scale)
        for k in ("flops", "peak_bytes", "python_path_peak_bytes"):
            if k in b:
                entry["counters"][k] = b[k]
    out = {}
    for base, e in runs.items():
        out[base] = {"median_us": statistics.median(e["times"]) if e["times"] else None,
                     "samples": len(e["times"]), "error": e["error"], **e["counters"]}
    return out, data.get("context", {})


def read_python(path):
    with open(path) as f:
        data = json.load(f)
    return {b["name"]: b for b in data["benchmarks"]}, data.get("context", {})


def derive_ratios(rec):
    """rec's ratios (ours / each peer), GFLOP/s and % of the GEMM peak from its times."""
    t = rec["time_us"]
    ours = t.get("ours") or t.get("fused")
    rec["ratio"] = {}
    for peer in PEERS + ("native",):
        if ours and t.get(peer):
            rec["ratio"][peer] = ours / t[peer]
    if ours and rec.get("flops"):
        rec["gflops"] = rec["flops"] / (ours * 1e-6) / 1e9
        if rec.get("gemm_peak_gflops"):
            rec["pct_peak"] = 100.0 * rec["gflops"] / rec["gemm_peak_gflops"]


def collect(raw):
    configs = {}   # key -> record
    gemm = []      # per group: {group, threads, gflops}
    contexts = {}
    for cpp_path in sorted(glob.glob(os.path.join(raw, "cpp_*.json"))):
        group = re.search(r"cpp_(\d+)\.json$", cpp_path).group(1)
        cpp, contexts["cpp"] = read_cpp(cpp_path)
        py = {}
        py_path = os.path.join(raw, f"py_{group}.json")
        if os.path.exists(py_path):
            py, contexts["python"] = read_python(py_path)
        peaks = {}
        for name, r in cpp.items():
            info = parse_name(name)
            if info["family"] == "gemm" and r["median_us"]:
                peaks[info["threads"]] = r["flops"] / (r["median_us"] * 1e-6) / 1e9
                gemm.append({"group": int(group), "threads": info["threads"],
                             "gflops": peaks[info["threads"]], "median_us": r["median_us"]})
        for name, r in list(cpp.items()) + [(n, dict(b, impl="python")) for n, b in py.items()]:
            info = parse_name(name)
            if info["family"] == "gemm":
                continue
            key = config_key(info)
            rec = configs.setdefault(key, {
                "family": info["family"], "N": info["N"], "L": info["L"],
                "nw": info.get("nw"), "kpm": info.get("kpm"), "causal": info.get("causal"),
                "threads": info["threads"], "group": int(group), "time_us": {},
                "peak_bytes": {}, "errors": {}})
            impl = info["impl"]
            rec["time_us"][impl] = r.get("median_us")
            if r.get("flops"):
                rec["flops"] = r["flops"]
            if r.get("error"):
                rec["errors"][impl] = r["error"]
            if r.get("peak_bytes"):
                rec["peak_bytes"][impl] = r["peak_bytes"]
            if r.get("python_path_peak_bytes"):
                rec["peak_bytes"]["python_path"] = r["python_path_peak_bytes"]
            if info["threads"] in peaks:
                rec["gemm_peak_gflops"] = peaks[info["threads"]]
    for rec in configs.values():
        derive_ratios(rec)
    for rec in configs.values():
        load_path = os.path.join(raw, f"load_{rec['group']:02d}.json")
        if os.path.exists(load_path):
            with open(load_path) as f:
                rec["others_busy_percent"] = json.load(f).get("busy_percent_before")
    return sorted(configs.values(), key=sort_key), gemm, contexts


def sort_key(r):
    return (r["family"], r["threads"], r["nw"] or 0, r["kpm"] or 0, r["causal"] or 0,
            r["L"], r["N"])


# ~~~ Targets ~~~

def targets(records):
    infer = [r for r in records if r["family"] == "infer"]
    train = [r for r in records if r["family"] == "train"]

    def worst(rs, peer):
        vals = [(r["ratio"][peer], r) for r in rs if peer in r["ratio"]]
        return max(vals, key=lambda v: v[0]) if vals else (None, None)

    out = []

    def add(name, rs, peer, limit):
        value, rec = worst(rs, peer)
        met = value is not None and value <= limit
        out.append({"target": name, "limit": limit, "worst": value,
                    "where": describe(rec) if rec else "", "met": met,
                    "count": len(rs), "failing": sum(1 for r in rs
                                                     if r["ratio"].get(peer, 0) > limit)})

    add("ours / Python <= 1.0, every inference config", infer, "python", 1.0)
    add("ours / Python <= 0.5, L <= 16", [r for r in infer if r["L"] <= 16], "python", 0.5)
    add("ours / LibTorch <= 0.5, L >= 512, need_weights=false",
        [r for r in infer if r["L"] >= 512 and r["nw"] == 0], "libtorch", 0.5)
    add("ours / floor <= 1.05, every inference config", infer, "floor", 1.05)
    add("no config slower than LibTorch: ours / LibTorch <= 1.0", infer, "libtorch", 1.0)
    weights_long = [r for r in infer if r["L"] >= 128 and r["nw"] == 1]
    add("need_weights=true, L >= 128: ours / LibTorch <= 0.9", weights_long, "libtorch", 0.9)
    add("need_weights=true, L >= 128: ours / Python <= 1.0", weights_long, "python", 1.0)
    add("training: ours / Python <= 1.0", train, "python", 1.0)
    for nw, limit, label in ((0, 0.125, "1/8"), (1, 0.25, "1/4")):
        mem = [r for r in infer if (r["N"], r["L"]) == (1, 4096) and r["nw"] == nw]
        vals = [(r["peak_bytes"]["ours"] / r["peak_bytes"]["libtorch"], r) for r in mem
                if r["peak_bytes"].get("ours") and r["peak_bytes"].get("libtorch")]
        if vals:
            value, rec = max(vals, key=lambda v: v[0])
            out.append({"target": f"memory at (1, 4096), need_weights={'true' if nw else 'false'}: "
                                  f"ours / LibTorch <= {label}",
                        "limit": limit, "worst": value, "where": describe(rec),
                        "met": value <= limit, "count": len(vals),
                        "failing": sum(1 for v, _ in vals if v > limit)})
    peak = [r for r in infer if (r["N"], r["L"]) == (4, 1024) and r["nw"] == 0
            and r.get("pct_peak")]
    if peak:
        rec = min(peak, key=lambda r: r["pct_peak"])
        out.append({"target": ">= 60% of the GEMM peak at (4, 1024), need_weights=false",
                    "limit": 60.0, "worst": rec["pct_peak"], "where": describe(rec),
                    "met": rec["pct_peak"] >= 60.0, "count": len(peak),
                    "failing": sum(1 for r in peak if r["pct_peak"] < 60.0)})
    return out


def describe(r):
    if r is None:
        return ""
    s = f"N={r['N']} L={r['L']}"
    if r.get("nw") is not None:
        s += f" nw={r['nw']}"
    if r.get("kpm") is not None:
        s += f" kpm={r['kpm']} causal={r['causal']}"
    return s + f" threads={r['threads']}"


# ~~~ Markdown ~~~

def fmt_us(v):
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_ratio(v):
    return "n/a" if v is None else f"{v:.2f}"


def fmt_mib(v):
    return "n/a" if v is None else f"{v / 2**20:.1f}"


def span(values, fmt=fmt_ratio):
    """'lo-hi' of the values that exist, one value when both ends print alike."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "n/a"
    lo, hi = fmt(min(vals)), fmt(max(vals))
    return lo if lo == hi else f"{lo}-{hi}"


def sweep_lines(records, contexts, machine):
    """Which sweep, machine and build the numbers come from, and how sweeps were merged."""
    lines = [f"Sweep of {machine['date']}: {machine['cpu']}, {machine['cores']} cores, "
             f"torch {contexts.get('python', {}).get('torch', '?')} "
             f"(LibTorch from the same wheel), commit {machine['commit']}. "
             "E=512, H=8, float32, self-attention, batch_first. "
             "Times are medians in microseconds; every ratio compares medians from the "
             "same group (one shape and thread count, C++ and Python seconds apart)."]
    repeated = [r for r in records if r.get("sweeps", 1) > 1]
    if repeated:
        sweeps = max(r["sweeps"] for r in repeated)
        lines.append(f"{len(repeated)} of {len(records)} configs were measured in {sweeps} "
                     "sweeps; each implementation's time is its fastest per-sweep median "
                     "(other processes only add time), and ratios are taken between those.")
    lines.append("")
    return lines


def targets_table(tgts):
    """Each target's worst value over the configs it covers."""
    lines = ["### Targets", "",
             "| target | worst measured | where | configs failing | met |",
             "|---|---|---|---|---|"]
    for t in tgts:
        worst = "n/a" if t["worst"] is None else (
            f"{t['worst']:.1f}%" if t["limit"] == 60.0 else f"{t['worst']:.3f}")
        lines.append(f"| {t['target']} | {worst} | {t['where']} | "
                     f"{t['failing']} of {t['count']} | {'yes' if t['met'] else '**no**'} |")
    lines.append("")
    return lines


def machine_load_lines(records, gemm):
    """The GEMM peaks measured in the groups and the other processes' load."""
    gp = {}
    for g in gemm:
        gp.setdefault(g["threads"], []).append(g["gflops"])
    lines = ["GEMM peak (`at::mm`, 2048^3, fp32), measured in every group: " + "; ".join(
        f"{t} thread{'s' if t > 1 else ''}: median {statistics.median(v):.0f} GFLOP/s "
        f"(range {min(v):.0f}-{max(v):.0f} over {len(v)} groups)" for t, v in sorted(gp.items()))
             + "."]
    busy = [r["others_busy_percent"] for r in records if r.get("others_busy_percent") is not None]
    if busy:
        lines.append(f"Other processes' CPU use just before each group (scripts/bench.sh waits for "
                     f"a quiet machine): median {statistics.median(busy):.0f}%, "
                     f"max {max(busy):.0f}%.")
    lines.append("")
    return lines


def inference_tables(records):
    """Every inference config, one table per thread count."""
    lines = []
    infer = [r for r in records if r["family"] == "infer"]
    for threads in sorted({r["threads"] for r in infer}):
        lines.append(f"### Inference, {threads} thread{'s' if threads > 1 else ''}")
        lines.append("")
        lines.append("| N | L | nw | kpm | causal | ours us | Python us | LibTorch us | floor us | "
                     "ours/Py | ours/LT | ours/floor | GFLOP/s | % peak | "
                     "MiB ours | MiB Py path | MiB LT |")
        lines.append("|" + "---|" * 17)
        for r in [r for r in infer if r["threads"] == threads]:
            t, ratio, mem = r["time_us"], r["ratio"], r["peak_bytes"]
            err = " (error: " + "; ".join(r["errors"].values()) + ")" if r["errors"] else ""
            lines.append(
                f"| {r['N']} | {r['L']} | {r['nw']} | {r['kpm']} | {r['causal']} | "
                f"{fmt_us(t.get('ours'))} | {fmt_us(t.get('python'))} | "
                f"{fmt_us(t.get('libtorch'))} | {fmt_us(t.get('floor'))} | "
                f"{fmt_ratio(ratio.get('python'))} | {fmt_ratio(ratio.get('libtorch'))} | "
                f"{fmt_ratio(ratio.get('floor'))} | {r.get('gflops', 0):.1f} | "
                f"{r.get('pct_peak', 0):.0f}% | {fmt_mib(mem.get('ours'))} | "
                f"{fmt_mib(mem.get('python_path'))} | {fmt_mib(mem.get('libtorch'))} |{err}")
        lines.append("")
    return lines


def inference_summary(records):
    """One row per shape: for each thread count, the ratios' range over the four
    mask settings (none, causal, padding, both), without and with weights."""
    infer = [r for r in records if r["family"] == "infer"]
    if not infer:
        return []
    threads = sorted({r["threads"] for r in infer})
    lines = ["### Inference", "",
             "Each cell: " + " / ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads)
             + "; a range spans the four mask settings (none, causal, padding, both). "
             "\"weights\": `need_weights=true`; ours/floor spans all eight; \"ours us\", "
             "% peak and the MiB (one thread) are without masks.", "",
             "| N | L | ours us | ours/Py | ours/Py, weights | ours/LT | ours/LT, weights | "
             "ours/floor | % peak | MiB ours / LT | MiB ours / LT, weights |",
             "|" + "---|" * 11]
    for length, n in sorted({(r["L"], r["N"]) for r in infer}):
        shape = [r for r in infer if (r["L"], r["N"]) == (length, n)]

        def per_thread(cell):
            return " / ".join(cell([r for r in shape if r["threads"] == t]) for t in threads)

        def bare(rs, nw):
            found = [r for r in rs if r["nw"] == nw and not r["kpm"] and not r["causal"]]
            return found[0] if found else None

        def ratios(peer, nws):
            return lambda rs: span(r["ratio"].get(peer) for r in rs if r["nw"] in nws)

        def ours_us(rs):
            r = bare(rs, 0)
            return fmt_us(r["time_us"].get("ours")) if r else "n/a"

        def pct(rs):
            r = bare(rs, 0)
            return f"{r['pct_peak']:.0f}%" if r and r.get("pct_peak") else "n/a"

        def mib(nw):
            r = bare([r for r in shape if r["threads"] == threads[0]], nw)
            if r is None:
                return "n/a"
            return (f"{fmt_mib(r['peak_bytes'].get('ours'))} / "
                    f"{fmt_mib(r['peak_bytes'].get('libtorch'))}")

        lines.append(
            f"| {n} | {length} | {per_thread(ours_us)} | "
            f"{per_thread(ratios('python', (0,)))} | {per_thread(ratios('python', (1,)))} | "
            f"{per_thread(ratios('libtorch', (0,)))} | {per_thread(ratios('libtorch', (1,)))} | "
            f"{per_thread(ratios('floor', (0, 1)))} | {per_thread(pct)} | "
            f"{mib(0)} | {mib(1)} |")
    lines.append("")
    return lines


def training_table(records):
    train = [r for r in records if r["family"] == "train"]
    if not train:
        return []
    lines = ["### Training (forward + backward, no masks)", "",
             "| threads | N | L | nw | ours us | Python us | LibTorch us | floor us | "
             "ours/Py | ours/LT | ours/floor | GFLOP/s (3x fwd) | % peak | "
             "MiB ours | MiB LT |",
             "|" + "---|" * 15]
    for r in train:
        t, ratio, mem = r["time_us"], r["ratio"], r["peak_bytes"]
        lines.append(
            f"| {r['threads']} | {r['N']} | {r['L']} | {r['nw']} | {fmt_us(t.get('ours'))} | "
            f"{fmt_us(t.get('python'))} | {fmt_us(t.get('libtorch'))} | "
            f"{fmt_us(t.get('floor'))} | {fmt_ratio(ratio.get('python'))} | "
            f"{fmt_ratio(ratio.get('libtorch'))} | {fmt_ratio(ratio.get('floor'))} | "
            f"{r.get('gflops', 0):.1f} | {r.get('pct_peak', 0):.0f}% | "
            f"{fmt_mib(mem.get('ours'))} | {fmt_mib(mem.get('libtorch'))} |")
    lines.append("")
    return lines


CROSSOVER_TITLE = "### Fused path vs native fast path (need_weights=false)"


def crossover_table(records):
    """Every crossover config: fused against native, same process."""
    cross = [r for r in records if r["family"] == "crossover"]
    if not cross:
        return []
    lines = [CROSSOVER_TITLE, "",
             "| threads | N | L | kpm | causal | native us | fused us | fused/native |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(cross, key=lambda r: (r["threads"], r["N"], r["L"], r["kpm"] or 0,
                                          r["causal"] or 0)):
        t = r["time_us"]
        lines.append(f"| {r['threads']} | {r['N']} | {r['L']} | {r['kpm']} | {r['causal']} | "
                     f"{fmt_us(t.get('native'))} | {fmt_us(t.get('fused'))} | "
                     f"{fmt_ratio(r['ratio'].get('native'))} |")
    lines.append("")
    return lines


def crossover_summary(records):
    """fused / native per shape (rows) and thread count and mask setting (columns)."""
    cross = [r for r in records if r["family"] == "crossover"]
    if not cross:
        return []
    masks = ((0, 0, "none"), (0, 1, "causal"), (1, 0, "padding"), (1, 1, "both"))
    threads = sorted({r["threads"] for r in cross})
    by = {(r["threads"], r["N"], r["L"], r["kpm"] or 0, r["causal"] or 0): r for r in cross}
    cols = [(t, kpm, causal, f"{t}T {name}") for t in threads for kpm, causal, name in masks]
    lines = [CROSSOVER_TITLE, "",
             "| N | L | fused / native, " + " | ".join(c[3] for c in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for n, length in sorted({(r["N"], r["L"]) for r in cross}):
        cells = [fmt_ratio(by[(t, n, length, kpm, causal)]["ratio"].get("native"))
                 if (t, n, length, kpm, causal) in by else "n/a" for t, kpm, causal, _ in cols]
        lines.append(f"| {n} | {length} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def markdown(records, gemm, tgts, contexts, machine, tables_link=None):
    """The block between the GENERATED markers of docs/benchmarks.md: how many
    targets hold, one summary row per shape, training, the crossover;
    `tables_link` (text, href) points at the file with every configuration."""
    lines = [BEGIN, ""] + sweep_lines(records, contexts, machine)[:-1]
    met = sum(1 for t in tgts if t["met"])
    where = (f"; every configuration and each target's worst value: "
             f"[{tables_link[0]}]({tables_link[1]})" if tables_link else "")
    lines += [f"Targets met in every configuration: {met} of {len(tgts)} (section 4 judges "
              f"each){where}.", ""]
    lines += machine_load_lines(records, gemm)
    lines += inference_summary(records)
    lines += training_table(records)
    lines += crossover_summary(records)
    lines += ["![ratios and % of GEMM peak](benchmarks.png)", "", END]
    return "\n".join(lines)


def tables_markdown(records, gemm, tgts, contexts, machine):
    """The file of one sweep with every configuration (bench/results/<date>.md)."""
    lines = [f"# Benchmark sweep of {machine['date']}: every configuration", "",
             "Generated by scripts/bench_report.py with the results JSON of the same name. "
             "docs/benchmarks.md has the method, the targets and what the numbers mean.", ""]
    lines += sweep_lines(records, contexts, machine)
    lines += targets_table(tgts) + machine_load_lines(records, gemm)
    lines += inference_tables(records)
    lines += training_table(records)
    lines += crossover_table(records)
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(path, text):
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            text = head + text + tail
        else:
            text = old.rstrip() + "\n\n" + text + "\n"
    else:
        text = "# Benchmarks\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(text)


# ~~~ Plot ~~~

def plot(records, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    infer = [r for r in records if r["family"] == "infer"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    panels = [("python", "ours / Python nn.MultiheadAttention", [1.0, 0.5]),
              ("libtorch", "ours / LibTorch torch::nn::MultiheadAttention", [0.5]),
              ("floor", "ours / composite floor", [1.05])]
    colors = {0: "tab:blue", 1: "tab:orange"}
    markers = {1: "o", 2: "^"}
    for ax, (peer, title, limits) in zip(axes.flat, panels):
        for r in infer:
            if peer not in r["ratio"]:
                continue
            x = r["L"] * (1.0 + 0.06 * (r["N"] > 1)) * (1.0 + 0.03 * r["kpm"] + 0.015 * r["causal"])
            ax.scatter(x, r["ratio"][peer], s=18, color=colors[r["nw"]],
                       marker=markers.get(r["threads"], "s"), alpha=0.7)
        for lim in limits:
            ax.axhline(lim, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel("time ratio (lower is better)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
    ax = axes.flat[3]
    for r in infer:
        if r.get("pct_peak") is None:
            continue
        x = r["L"] * (1.0 + 0.06 * (r["N"] > 1))
        ax.scatter(x, r["pct_peak"], s=18, color=colors[r["nw"]],
                   marker=markers.get(r["threads"], "s"), alpha=0.7)
    ax.axhline(60, color="gray", linestyle="--", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length L")
    ax.set_ylabel("ours, % of measured GEMM GFLOP/s")
    ax.set_title("ours: % of the GEMM peak (same threads)", fontsize=10)
    ax.grid(True, alpha=0.3)
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=colors[0], marker="o", linestyle="", label="need_weights=False"),
               Line2D([], [], color=colors[1], marker="o", linestyle="", label="need_weights=True"),
               Line2D([], [], color="black", marker="o", linestyle="", label="1 thread"),
               Line2D([], [], color="black", marker="^", linestyle="", label="2 threads")]
    fig.legend(handles=handles, loc="lower center", ncol=4)
    fig.suptitle("mha::MultiheadAttention, E=512, H=8, float32, CPU (points: N, masks, causal)")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, dpi=110)


def machine_info():
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        commit = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
            "commit": commit or "?"}


def merge_sweeps(sweeps):
    """One record per config from several sweeps' records. Other processes can
    only add time, so each implementation keeps its fastest per-sweep median
    (and each group its fastest GEMM peak), and the ratios are taken between
    those: every implementation gets its least disturbed measurement."""
    if len(sweeps) == 1:
        return sweeps[0]
    by_key = {}
    for records in sweeps:
        for rec in records:
            by_key.setdefault(config_key(rec), []).append(rec)
    merged = []
    for recs in by_key.values():
        rec = dict(recs[-1])
        rec["sweeps"] = len(recs)
        impls = {k for r in recs for k in r["time_us"]}
        rec["time_us"] = {k: min(r["time_us"][k] for r in recs if r["time_us"].get(k))
                          for k in impls if any(r["time_us"].get(k) for r in recs)}
        names = {k for r in recs for k in r["peak_bytes"]}
        rec["peak_bytes"] = {k: statistics.median(r["peak_bytes"][k] for r in recs
                                                  if k in r["peak_bytes"]) for k in names}
        peaks = [r["gemm_peak_gflops"] for r in recs if r.get("gemm_peak_gflops")]
        if peaks:
            rec["gemm_peak_gflops"] = max(peaks)
        busy = [r["others_busy_percent"] for r in recs if r.get("others_busy_percent") is not None]
        if busy:
            rec["others_busy_percent"] = max(busy)
        derive_ratios(rec)
        merged.append(rec)
    return sorted(merged, key=sort_key)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--raw", nargs="+", help="one directory per sweep")
    source.add_argument("--from-json", help="rebuild the docs from a results JSON of this script")
    parser.add_argument("--json", help="the results JSON to write (with --raw)")
    parser.add_argument("--markdown")
    parser.add_argument("--tables", help="the file with every configuration "
                                         "(default: the results JSON's path, .md)")
    parser.add_argument("--plot")
    parser.add_argument("--no-docs", action="store_true", help="write only the JSON")
    args = parser.parse_args()
    if args.raw and not args.json:
        parser.error("--raw needs --json")
    if args.from_json and args.json:
        parser.error("--from-json reads a results JSON; --json writes one from --raw")

    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        records, gemm = data["configs"], data["gemm_peak"]
        contexts, machine = data["context"], data["machine"]
        tgts = targets(records)
    else:
        sweeps = [collect(raw) for raw in args.raw]
        records = merge_sweeps([records for records, _, _ in sweeps])
        gemm = [g for _, sweep_gemm, _ in sweeps for g in sweep_gemm]
        contexts = sweeps[-1][2]
        tgts = targets(records)
        machine = machine_info()
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "context": contexts, "targets": tgts,
                       "gemm_peak": gemm, "configs": records}, f, indent=1)
    for t in tgts:
        print(f"{'MET ' if t['met'] else 'MISS'} {t['target']}: worst {t['worst']} ({t['where']})")
    errors = [r for r in records if r["errors"]]
    for r in errors:
        print(f"ERROR {describe(r)}: {r['errors']}")
    if not args.no_docs:
        tables = args.tables or os.path.splitext(args.json or args.from_json)[0] + ".md"
        with open(tables, "w") as f:
            f.write(tables_markdown(records, gemm, tgts, contexts, machine))
        if args.markdown:
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            link = (os.path.relpath(os.path.abspath(tables), root),
                    os.path.relpath(os.path.abspath(tables),
                                    os.path.dirname(os.path.abspath(args.markdown))))
            write_markdown(args.markdown,
                           markdown(records, gemm, tgts, contexts, machine, tables_link=link))
        if args.plot:
            plot(records, args.plot)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
