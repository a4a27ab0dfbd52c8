#!/usr/bin/env python3
"""CTranslate2's offline best case for bench/serving_bench's comparison (docs/benchmarks.md, section 13).

The same seeded seq2seq model as the peer benchmark (peers/seq2seq.py, converted by
peers/ct2_peer.py), `--requests` sources of lengths uniform in [--min-len, --max-len],
all given to one `translate_batch` call (beam 1, `max_batch_size` = the number of
requests). With `--out-len N` every request generates exactly N tokens
(`min_decoding_length` = `max_decoding_length` = N; serving_bench's `--out-len N`);
without it `max_decoding_length` is `--max-len` (the end token is unreachable, so every
request generates that many). `--write-requests FILE` saves the sources (`src.<i>`, (1, S)
int64) for serving_bench's `--requests-file`, so both engines serve the same requests.
Prints the generated tokens per second of that call per thread count and compute type.
Not part of CI; needs the pinned peers (scripts/bench_peers.sh installs them).

Usage: bench_serving_ct2.py [--threads 1 2] [--requests 64] [--min-len 16] [--max-len 256]
                            [--out-len N] [--compute-types float32 int8] [--write-requests FILE]
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
    parser.add_argument("--out-len", type=int, default=0)
    parser.add_argument("--compute-types", nargs="+", default=["float32"])
    parser.add_argument("--write-requests", default="")
    args = parser.parse_args()
    model = seq2seq.make_model()
    tokens = ct2_peer.vocabulary()
    rng = random.Random(1234)
    ids = [[rng.randrange(4, seq2seq.VOCAB) for _ in range(rng.randint(args.min_len, args.max_len))]
           for _ in range(args.requests)]
    if args.write_requests:
        torch.save({f"src.{i}": torch.tensor([row]) for i, row in enumerate(ids)},
                   args.write_requests)
    sources = [[tokens[i] for i in row] for row in ids]
    length = dict(min_decoding_length=args.out_len, max_decoding_length=args.out_len) \
        if args.out_len else dict(max_decoding_length=args.max_len)
    with tempfile.TemporaryDirectory() as work:
        ct2_peer.convert(model, os.path.join(work, "ct2"))
        for compute_type in args.compute_types:
            for threads in args.threads:
                tr = ctranslate2.Translator(os.path.join(work, "ct2"), device="cpu",
                                            compute_type=compute_type, intra_threads=threads,
                                            inter_threads=1)
                tr.translate_batch(sources[:2], beam_size=1, max_decoding_length=8)  # warm-up
                start = time.perf_counter()
                results = tr.translate_batch(sources, beam_size=1, max_batch_size=args.requests,
                                             **length)
                seconds = time.perf_counter() - start
                generated = sum(len(r.hypotheses[0]) for r in results)
                print(f"CTranslate2 {ctranslate2.__version__} translate_batch, {compute_type}, "
                      f"{threads} thread(s): {args.requests} requests, {generated} tokens in "
                      f"{seconds:.1f} s: {generated / seconds:.1f} tokens/s", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
