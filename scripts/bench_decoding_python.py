#!/usr/bin/env python3
"""Time a fairseq-style incremental decoding step in Python, on the shapes of
bench/decode_bench.cpp: E=512, H=8, float32, batch N, cache length T.

One step, under torch.inference_mode(), as fairseq's MultiheadAttention does
with its incremental_state: project the new token (one packed F.linear), torch.cat
its key and value onto the cached ones (N, H, T, hd) -> (N, H, T + 1, hd),
F.scaled_dot_product_attention, out_proj. The concatenated cache is dropped
after each step, so every timed step starts from length T.

Also timed, as decode/python_prealloc/...: the same step writing into a
preallocated (N, H, T + 1, hd) cache with copy_ instead of torch.cat (what
mha's KVCache does), to separate the cost of the cat from Python's overhead.

Timings: torch.utils.benchmark.Timer.blocked_autorange, median, microseconds.
Output: JSON with entries named decode/python/N:<n>/T:<t>/threads:<k>.

Usage: bench_decoding_python.py --out FILE [--smoke]
"""

import argparse
import json

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

EMBED_DIM, NUM_HEADS = 512, 8
HEAD_DIM = EMBED_DIM // NUM_HEADS


def step(x, w, b, w_out, b_out, k_cache, v_cache):
    n = x.size(0)
    q, k, v = F.linear(x, w, b).chunk(3, dim=-1)                    # (N, 1, E) each
    q, k, v = (t.view(n, 1, NUM_HEADS, HEAD_DIM).transpose(1, 2) for t in (q, k, v))
    k_all = torch.cat([k_cache, k], dim=2)                           # (N, H, T + 1, hd)
    v_all = torch.cat([v_cache, v], dim=2)
    out = F.scaled_dot_product_attention(q, k_all, v_all)           # (N, H, 1, hd)
    return F.linear(out.transpose(1, 2).reshape(n, 1, EMBED_DIM), w_out, b_out)


def step_prealloc(x, w, b, w_out, b_out, k_buf, v_buf):
    n, t = x.size(0), k_buf.size(2) - 1
    q, k, v = F.linear(x, w, b).chunk(3, dim=-1)                    # (N, 1, E) each
    q, k, v = (t_.view(n, 1, NUM_HEADS, HEAD_DIM).transpose(1, 2) for t_ in (q, k, v))
    k_buf[:, :, t:t + 1].copy_(k)                                    # (N, H, T + 1, hd)
    v_buf[:, :, t:t + 1].copy_(v)
    out = F.scaled_dot_product_attention(q, k_buf, v_buf)           # (N, H, 1, hd)
    return F.linear(out.transpose(1, 2).reshape(n, 1, EMBED_DIM), w_out, b_out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    attn = torch.nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True).eval()
    results = []
    with torch.inference_mode():
        for n in (1, 8):
            for t in (128, 1024, 4096):
                x = torch.randn(n, 1, EMBED_DIM)
                k_cache = torch.randn(n, NUM_HEADS, t, HEAD_DIM)
                v_cache = torch.randn(n, NUM_HEADS, t, HEAD_DIM)
                k_buf = torch.randn(n, NUM_HEADS, t + 1, HEAD_DIM)
                v_buf = torch.randn(n, NUM_HEADS, t + 1, HEAD_DIM)
                for threads in (1, 2):
                    for impl, fn, k, v in (("python", step, k_cache, v_cache),
                                           ("python_prealloc", step_prealloc, k_buf, v_buf)):
                        timer = Timer("fn(x, w, b, wo, bo, k, v)", num_threads=threads,
                                      globals={"fn": fn, "x": x, "w": attn.in_proj_weight,
                                               "b": attn.in_proj_bias, "wo": attn.out_proj.weight,
                                               "bo": attn.out_proj.bias, "k": k, "v": v})
                        m = (timer.timeit(1) if args.smoke
                             else timer.blocked_autorange(min_run_time=0.5))
                        name = f"decode/{impl}/N:{n}/T:{t}/threads:{threads}"
                        results.append({"name": name, "median_us": m.median * 1e6})
                        print(f"{name}: {m.median * 1e6:.1f} us")
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "benchmarks": results}, f, indent=1)


if __name__ == "__main__":
    main()
