#!/usr/bin/env python3
"""Times mha::Tokenizer against the `tokenizers` package on the same
directories and lines (docs/benchmarks.md, "Tokenizers").

For each family directory scripts/export_tokenizer_reference.py wrote, and
for 1 and 2 threads, it runs mha's side (build/bench/tokenizer_rounds: each
line encoded on LibTorch's intra-op threads, then each line's ids decoded)
and the Rust tokenizer transformers' AutoTokenizer runs for that directory
(`backend_tokenizer.encode_batch` and `decode_batch`, RAYON_NUM_THREADS
threads), alternately, ROUNDS rounds each per turn and TURNS turns; reports
each side's median lines per second and mha / tokenizers. The ids in all
are checked to agree first.

Usage: bench_tokenizers.py [--ref build/tests/tokenizer_reference]
                           [--bin build/bench/tokenizer_rounds] [--out FILE.md]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

PYTHON_SIDE = r"""
import json, sys, time
from transformers import AutoTokenizer
directory, rounds = sys.argv[1], int(sys.argv[2])
lines = json.load(open(directory + "/mha_reference.json", encoding="utf-8"))["lines"][:10000]
backend = AutoTokenizer.from_pretrained(directory).backend_tokenizer
encode, decode = [], []
for _ in range(rounds):
    start = time.perf_counter()
    encodings = backend.encode_batch(lines)
    encode.append(len(lines) / (time.perf_counter() - start))
    ids = [e.ids for e in encodings]
    start = time.perf_counter()
    backend.decode_batch(ids)
    decode.append(len(lines) / (time.perf_counter() - start))
print(json.dumps({"lines": len(lines), "ids": sum(map(len, ids)),
                  "encode_lines_per_s": encode, "decode_lines_per_s": decode}))
"""


def cpu_name():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def run_mha(binary, directory, threads, rounds):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([binary, directory, str(threads), str(rounds)], check=True,
                         capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def run_tokenizers(directory, threads, rounds):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, "-c", PYTHON_SIDE, directory, str(rounds)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="build/tests/tokenizer_reference")
    parser.add_argument("--bin", default="build/bench/tokenizer_rounds")
    parser.add_argument("--out", default="")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    families = sorted(d for d in os.listdir(args.ref)
                      if os.path.exists(os.path.join(args.ref, d, "mha_reference.json")))
    if not families:
        raise SystemExit(f"no families under {args.ref}: run "
                         "scripts/export_tokenizer_reference.py --out {args.ref} first")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    report = [f"# Tokenizers: mha against `tokenizers`, {datetime.date.today()}", "",
              f"CPU: {cpu_name()}, {os.cpu_count()} CPUs; commit {commit}; 10,000 corpus "
              f"lines a family; medians of {args.rounds} rounds x {args.turns} turns a side, "
              "the sides alternating.", "",
              "| family | threads | encode mha lines/s | encode tokenizers | mha / tokenizers "
              "| decode mha lines/s | decode tokenizers | mha / tokenizers |",
              "|---|---|---|---|---|---|---|---|"]
    for family in families:
        directory = os.path.join(args.ref, family)
        for threads in (1, 2):
            ours = {"encode_lines_per_s": [], "decode_lines_per_s": []}
            theirs = {"encode_lines_per_s": [], "decode_lines_per_s": []}
            for _ in range(args.turns):
                for side, result in ((ours, run_mha(args.bin, directory, threads, args.rounds)),
                                     (theirs, run_tokenizers(directory, threads, args.rounds))):
                    for key in side:
                        side[key] += result[key]
                    side["ids"] = result["ids"]
            if ours["ids"] != theirs["ids"]:
                raise SystemExit(f"{family}: mha gives {ours['ids']} ids, tokenizers "
                                 f"{theirs['ids']}")
            row = [family, str(threads)]
            for key in ("encode_lines_per_s", "decode_lines_per_s"):
                a, b = statistics.median(ours[key]), statistics.median(theirs[key])
                row += [f"{a:,.0f}", f"{b:,.0f}", f"{a / b:.2f}"]
            report.append("| " + " | ".join(row) + " |")
            print(report[-1], flush=True)
    text = "\n".join(report) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
