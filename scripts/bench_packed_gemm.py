#!/usr/bin/env python3
"""The measurement behind mha's prepacked-weight rule (src/linear/packed_linear.h).

For each weight shape (out, in) of a d_model-512 Transformer and each row count
M, the time of oneDNN's GEMM on a prepacked weight
(torch.ops.mkldnn._linear_pointwise on torch.ops.mkldnn._reorder_linear_weight's
result, the ops mha calls) over the time of F.linear on the plain weight, with
bias, float32, under inference_mode. Rounds alternate the two; the table has
the median of the per-round ratios (below 1: the packed weight is faster).
--cold K: each call takes the next of K copies of the weight, so the weights
come from memory as in a decode step (default 1: the same weight, in cache).

Usage: bench_packed_gemm.py [--threads 1 2] [--rounds 5] [--rows M ...] [--cold K]
"""

import argparse
import platform
import statistics
import time

import torch

SHAPES = [(1536, 512), (512, 512), (1024, 512), (2048, 512), (512, 2048), (8000, 512)]
ROWS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024]


def median_seconds(fn, reps):
    fn()
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ratio(x, ws, b, packs, rounds):
    """ws, packs: the copies of the weight (plain and packed), taken in turn."""
    reps = min(300, max(5, int(2e8 / (2 * x.shape[0] * ws[0].numel() + 1e6))))
    turn = [0]

    def next_copy():
        turn[0] = (turn[0] + 1) % len(ws)
        return turn[0]

    linear = lambda: torch.nn.functional.linear(x, ws[next_copy()], b)  # noqa: E731
    onednn = lambda: torch.ops.mkldnn._linear_pointwise(  # noqa: E731
        x, packs[next_copy()], b, "none", [], None)
    return statistics.median(
        median_seconds(onednn, reps) / median_seconds(linear, reps) for _ in range(rounds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, nargs="+", default=ROWS)
    parser.add_argument("--cold", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print(f"{args.cold} copies of each weight, taken in turn")
    print("| threads | weight (out x in) | " + " | ".join(f"M={m}" for m in args.rows) + " |")
    print("|---|---|" + "---|" * len(args.rows))
    with torch.inference_mode():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for out_features, in_features in SHAPES:
                ws = [torch.randn(out_features, in_features) / in_features**0.5
                      for _ in range(args.cold)]
                b = torch.randn(out_features)
                packs = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in ws]
                cells = [f"{ratio(torch.randn(m, in_features), ws, b, packs, args.rounds):.2f}"
                         for m in args.rows]
                print(f"| {threads} | {out_features} x {in_features} | " + " | ".join(cells) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
