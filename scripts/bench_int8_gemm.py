#!/usr/bin/env python3
"""The measurement behind mha's int8 GEMM choice (src/linear/int8_linear.h): FBGEMM or oneDNN.

For each weight shape (out, in) of a d_model-512 Transformer (and its 8000-word
output projection) and each row count M, the time of three int8 GEMMs on the
same per-channel qint8 weight (scale max|w_row| / 127), activations quantized
per call, over the time of float32 F.linear on the float weight:
  fbgemm    torch.ops.quantized.linear_dynamic(x, linear_prepack(qw), False),
            weights packed under the "fbgemm" engine (what the default "x86"
            engine packs linear weights for; what mha calls)
  onednn    the same ops with the weights packed under the "onednn" engine
  qlinear   onednn::qlinear_pointwise on onednn::qlinear_prepack's weight, with
            the activations quantized by hand (choose_qparams, quantize_per_tensor)
            as Inductor's x86 int8 path does; AMX/VNNI where the CPU has them
Rounds alternate the calls; the table has the median of per-round ratios
(below 1: faster than float32).

Usage: bench_int8_gemm.py [--threads 1 2] [--rounds 5]
"""

import argparse
import platform
import statistics
import warnings

import torch

from bench_packed_gemm import median_seconds

SHAPES = [(1536, 512), (512, 512), (2048, 512), (512, 2048), (8000, 512)]
ROWS = [1, 8, 64]


def per_channel(w):
    scales = (w.abs().amax(1).double() / 127).clamp_min(torch.finfo(torch.float32).eps)
    return torch.quantize_per_channel(w, scales, torch.zeros_like(scales, dtype=torch.long), 0,
                                      torch.qint8)


def calls(x, w, b):
    """name -> a call computing x w^T (+ b) that way."""
    qw = per_channel(w)
    result = {"float32": lambda: torch.nn.functional.linear(x, w, b)}
    for engine in ("fbgemm", "onednn"):
        torch.backends.quantized.engine = engine
        packed = torch.ops.quantized.linear_prepack(qw, None)
        result[engine] = lambda p=packed: torch.ops.quantized.linear_dynamic(x, p, False) + b
    torch.backends.quantized.engine = "x86"
    onednn_weight = torch.ops.onednn.qlinear_prepack(qw.int_repr(), list(x.shape))
    scales = qw.q_per_channel_scales().float()
    zero_points = torch.zeros(w.shape[0], dtype=torch.long)

    def qlinear():
        scale, zero_point = torch._choose_qparams_per_tensor(x, False)
        qx = torch.quantize_per_tensor(x, scale, zero_point, torch.quint8).int_repr()
        return torch.ops.onednn.qlinear_pointwise(qx, scale, zero_point, onednn_weight, scales,
                                                  zero_points, b, 1.0, 0, torch.float32, "none",
                                                  [], "")

    result["qlinear"] = qlinear
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # quantized tensors are deprecated (pytorch#184982)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}; "
          "time / float32 F.linear: fbgemm; onednn; qlinear")
    print("| threads | weight (out x in) | " + " | ".join(f"M={m}" for m in ROWS) + " |")
    print("|---|---|" + "---|" * len(ROWS))
    with torch.inference_mode():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for out_features, in_features in SHAPES:
                w = torch.randn(out_features, in_features) / in_features**0.5
                b = torch.randn(out_features)
                cells = []
                for m in ROWS:
                    fns = calls(torch.randn(m, in_features), w, b)
                    reps = min(300, max(5, int(1e8 / (2 * m * w.numel() + 1e6))))
                    ratios = {name: [] for name in fns if name != "float32"}
                    for _ in range(args.rounds):
                        base = median_seconds(fns["float32"], reps)
                        for name in ratios:
                            ratios[name].append(median_seconds(fns[name], reps) / base)
                    cells.append("; ".join(f"{statistics.median(r):.2f}" for r in ratios.values()))
                print(f"| {threads} | {out_features} x {in_features} | " + " | ".join(cells) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
