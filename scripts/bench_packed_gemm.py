#!/usr/bin/env python3
"""The measurement behind mha's prepacked-weight rule (src/linear/packed_linear.h).

For each weight shape (out, in) of a d_model-512 Transformer and each row count
M, the time of oneDNN's GEMM on a prepacked weight
(torch.ops.mkldnn._linear_pointwise on torch.ops.mkldnn._reorder_linear_weight's
result, the ops mha calls) over the time of F.linear on the plain weight, with
bias, float32, under inference_mode. Rounds alternate the two; the table has
the median of the per-round ratios (below 1: the packed weight is faster).

Usage: bench_packed_gemm.py [--threads 1 2] [--rounds 5]
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


def ratio(x, w, b, packed, rounds):
    reps = min(300, max(5, int(2e8 / (2 * x.shape[0] * w.numel() + 1e6))))
    linear = lambda: torch.nn.functional.linear(x, w, b)  # noqa: E731
    onednn = lambda: torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], None)  # noqa: E731
    return statistics.median(
        median_seconds(onednn, reps) / median_seconds(linear, reps) for _ in range(rounds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print("| threads | weight (out x in) | " + " | ".join(f"M={m}" for m in ROWS) + " |")
    print("|---|---|" + "---|" * len(ROWS))
    with torch.inference_mode():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for out_features, in_features in SHAPES:
                w = torch.randn(out_features, in_features) / in_features**0.5
                b = torch.randn(out_features)
                packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
                cells = [f"{ratio(torch.randn(m, in_features), w, b, packed, args.rounds):.2f}"
                         for m in ROWS]
                print(f"| {threads} | {out_features} x {in_features} | " + " | ".join(cells) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
