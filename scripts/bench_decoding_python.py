#!/usr/bin/env python3
"""Time a fairseq-style incremental decoding step in Python, on the shapes of
bench/decode_bench.cpp: E=512, H=8, float32, batch N, cache length T.

One step, under torch.inference_mode(), as fairseq's MultiheadAttention does
with its incremental_state: project the new token (one packed F.linear), torch.cat
its key and value onto the cached ones (N, H, T, hd) -> (N, H, T + 1, hd),
F.scaled_dot_product_attention, out_proj. The concatenated cache is dropped
after each step, so every timed step starts from length T.

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
                for threads in (1, 2):
                    timer = Timer("step(x, w, b, wo, bo, k, v)", num_threads=threads,
                                  globals={"step": step, "x": x, "w": attn.in_proj_weight,
                                           "b": attn.in_proj_bias, "wo": attn.out_proj.weight,
                                           "bo": attn.out_proj.bias, "k": k_cache, "v": v_cache})
                    m = timer.timeit(1) if args.smoke else timer.blocked_autorange(min_run_time=0.5)
                    name = f"decode/python/N:{n}/T:{t}/threads:{threads}"
                    results.append({"name": name, "median_us": m.median * 1e6})
                    print(f"{name}: {m.median * 1e6:.1f} us")
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "benchmarks": results}, f, indent=1)


if __name__ == "__main__":
    main()
