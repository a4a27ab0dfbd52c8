#!/usr/bin/env python3
"""CTranslate2's offline best case for bench/serving_bench's comparison (docs/benchmarks.md, section 13).

The same seeded seq2seq model as the peer benchmark (peers/seq2seq.py, converted by
peers/ct2_peer.py; float32), 64 sources of lengths uniform in 16-256, all given to
one `translate_batch` call (beam 1, `max_decoding_length` 256: the end token is
unreachable, so every request generates 256 tokens). Prints the generated tokens per
second of that call, the number serving_bench's continuous server is compared with.
Not part of CI; needs the pinned peers (scripts/bench_peers.sh installs them).

Usage: bench_serving_ct2.py [--threads 1 2] [--requests 64] [--min-len 16] [--max-len 256]
"""

import argparse
import os
import random
import tempfile
import time

import ctranslate2
import torch

from peers import ct2_peer, seq2seq


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--min-len", type=int, default=16)
    parser.add_argument("--max-len", type=int, default=256)
    args = parser.parse_args()
    model = seq2seq.make_model()
    tokens = ct2_peer.vocabulary()
    rng = random.Random(1234)
    sources = [[tokens[rng.randrange(4, seq2seq.VOCAB)]
                for _ in range(rng.randint(args.min_len, args.max_len))]
               for _ in range(args.requests)]
    with tempfile.TemporaryDirectory() as work:
        ct2_peer.convert(model, os.path.join(work, "ct2"))
        for threads in args.threads:
            tr = ctranslate2.Translator(os.path.join(work, "ct2"), device="cpu",
                                        compute_type="float32", intra_threads=threads,
                                        inter_threads=1)
            tr.translate_batch(sources[:2], beam_size=1, max_decoding_length=8)  # warm-up
            start = time.perf_counter()
            results = tr.translate_batch(sources, beam_size=1, max_decoding_length=args.max_len,
                                         max_batch_size=args.requests)
            seconds = time.perf_counter() - start
            generated = sum(len(r.hypotheses[0]) for r in results)
            print(f"CTranslate2 {ctranslate2.__version__} translate_batch, {threads} thread(s): "
                  f"{args.requests} requests, {generated} tokens in {seconds:.1f} s: "
                  f"{generated / seconds:.1f} tokens/s", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
