#!/usr/bin/env python3
"""Time Python's torch.nn.MultiheadAttention on the shapes of bench/mha_bench.cpp.

Inference: eval, torch.inference_mode(), batch_first=True, self-attention
(query is key is value), E=512, H=8, float32; key_padding_mask bool (every
other sequence has its last quarter padded); causal = a bool triu attn_mask
with is_causal=True. Python takes its native fast path
(torch._native_multi_head_attention) for all of these.

Training: train(), dropout 0, forward + backward with a fixed cotangent, grads
reset to None each step (as zero_grad() does), no masks.

Timings: torch.utils.benchmark.Timer.blocked_autorange, median of the blocks,
in microseconds. Output: a JSON file whose "benchmarks" entries carry the names
mha_bench uses with impl "python", e.g.
infer/python/N:1/L:16/nw:0/kpm:0/causal:0/threads:1.

Usage:
    bench_python.py --out FILE [--shapes 1x16,8x128] [--threads 1,2]
                    [--families infer,train] [--smoke]
"""

import argparse
import json
import os
import platform
import sys
import time

import torch
from torch import nn
from torch.utils.benchmark import Timer

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "grid.json")) as f:
    GRID = json.load(f)  # the one description of the grid, shared with mha_bench
EMBED_DIM = GRID["embed_dim"]
NUM_HEADS = GRID["num_heads"]
INFER_SHAPES = [tuple(s) for s in GRID["infer_shapes"]]
TRAIN_SHAPES = [tuple(s) for s in GRID["train_shapes"]]


def attention_flops(n, l, causal):
    """bench/grid.json's count: projection N L E^2 + core N L S E (core scaled when causal)."""
    f = GRID["flops"]
    core = f["core"] * n * l * l * EMBED_DIM * (f["causal_core_factor"] if causal else 1.0)
    return f["projection"] * n * l * EMBED_DIM ** 2 + core


def min_run_time(flops, smoke):
    """Seconds of timing per benchmark, from its expected cost (as mha_bench)."""
    if smoke:
        return 0.0
    seconds = flops / 4e10 + 2e-5
    if seconds > 0.4:
        return 2.0 * seconds   # about 2 blocks of one call, as mha_bench's 2 repetitions
    if seconds > 0.15:
        return 3.0 * seconds   # about 3 blocks of one call, as mha_bench's 3 repetitions
    if seconds > 0.02:
        return 0.5
    return 0.45


def make_inputs(n, l):
    torch.manual_seed(0)
    module = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)
    x = torch.randn(n, l, EMBED_DIM)
    kpm = torch.zeros(n, l, dtype=torch.bool)
    for b in range(0, n, 2):
        pad = l // 4
        if pad > 0:
            kpm[b, l - pad:] = True
    causal = torch.ones(l, l, dtype=torch.bool).triu(1)
    cotangent = torch.randn(n, l, EMBED_DIM)
    return module, x, kpm, causal, cotangent


def measure(stmt_fn, seconds):
    stmt_fn()  # warm-up
    if seconds == 0.0:
        start = time.perf_counter()
        stmt_fn()
        return (time.perf_counter() - start) * 1e6, 1
    # Timer runs stmt on num_threads threads (default 1): pass the current count.
    timer = Timer(stmt="fn()", globals={"fn": stmt_fn}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=seconds)
    return m.median * 1e6, len(m.times)


def bench_infer(shapes, threads, smoke, results):
    for n, l in shapes:
        module, x, kpm, causal, _ = make_inputs(n, l)
        module.eval()
        for t in threads:
            torch.set_num_threads(t)
            for nw in (False, True):
                for use_kpm in (False, True):
                    for use_causal in (False, True):
                        kw = dict(need_weights=nw,
                                  key_padding_mask=kpm if use_kpm else None,
                                  attn_mask=causal if use_causal else None,
                                  is_causal=use_causal)

                        def call():
                            return module(x, x, x, **kw)[0]

                        flops = attention_flops(n, l, use_causal)
                        with torch.inference_mode():  # thread-local: covers the timer's calls
                            median_us, samples = measure(
                                call, min_run_time(flops * (1.5 if nw else 1.0), smoke))
                        name = (f"infer/python/N:{n}/L:{l}/nw:{int(nw)}/kpm:{int(use_kpm)}"
                                f"/causal:{int(use_causal)}/threads:{t}")
                        results.append(dict(name=name, median_us=median_us, samples=samples,
                                            flops=flops))
                        print(f"{name:70s} {median_us:12.1f} us", flush=True)


def bench_train(shapes, threads, smoke, results):
    for n, l in shapes:
        module, x0, _, _, cotangent = make_inputs(n, l)
        module.train()
        x = x0.clone().requires_grad_(True)
        for t in threads:
            torch.set_num_threads(t)
            for nw in (False, True):
                def step():
                    out = module(x, x, x, need_weights=nw)[0]
                    out.backward(cotangent)
                    x.grad = None
                    module.zero_grad(set_to_none=True)

                flops = GRID["flops"]["train_factor"] * attention_flops(n, l, False)
                median_us, samples = measure(step, min_run_time(flops, smoke))
                name = f"train/python/N:{n}/L:{l}/nw:{int(nw)}/threads:{t}"
                results.append(dict(name=name, median_us=median_us, samples=samples, flops=flops))
                print(f"{name:70s} {median_us:12.1f} us", flush=True)


def parse_shapes(text, default):
    if not text:
        return default
    shapes = [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]
    return [s for s in default if s in shapes]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--shapes", default="", help="NxL list, e.g. 1x16,8x128 (default: all)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--families", default="infer,train")
    parser.add_argument("--smoke", action="store_true", help="each benchmark once")
    args = parser.parse_args()

    threads = [int(t) for t in args.threads.split(",")]
    families = set(args.families.split(","))
    results = []
    if "infer" in families:
        bench_infer(parse_shapes(args.shapes, INFER_SHAPES), threads, args.smoke, results)
    if "train" in families:
        bench_train(parse_shapes(args.shapes, TRAIN_SHAPES), threads, args.smoke, results)
    context = dict(torch=torch.__version__, python=platform.python_version(),
                   embed_dim=EMBED_DIM, num_heads=NUM_HEADS,
                   date=time.strftime("%Y-%m-%d %H:%M:%S"))
    with open(args.out, "w") as f:
        json.dump(dict(context=context, benchmarks=results), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
