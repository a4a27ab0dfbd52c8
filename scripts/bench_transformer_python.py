#!/usr/bin/env python3
"""Time Python's nn.TransformerEncoderLayer as bench/transformer_bench.cpp times
mha's: d_model 512, nhead 8, dim_feedforward 2048, batch_first, eval,
inference_mode, float32, no masks, (N, L) in (1, 128), (8, 128), (4, 1024), on
1 and 2 threads. Prints one line per shape: the median in microseconds."""

import torch
import torch.utils.benchmark as benchmark
from torch import nn


def main():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True).eval()
    for threads in (1, 2):
        for n, length in ((1, 128), (8, 128), (4, 1024)):
            src = torch.randn(n, length, 512)
            with torch.inference_mode():
                timer = benchmark.Timer(stmt="layer(src)", globals={"layer": layer, "src": src},
                                        num_threads=threads)
                median = timer.blocked_autorange(min_run_time=3.0).median * 1e6
            print(f"encoder_layer/python/N:{n}/L:{length}/threads:{threads} {median:.1f} us")


if __name__ == "__main__":
    main()
