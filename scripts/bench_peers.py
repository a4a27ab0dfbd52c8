#!/usr/bin/env python3
"""mha against ONNX Runtime, AOTInductor, CTranslate2 and transformers on the same weights.

Cases (float32, eval, inference mode, seeded weights; peers/cases.py):
  attention      nn.MultiheadAttention(512, 8), self-attention, need_weights=False,
                 sequence-first (L, N, E), (N, L) in (1, 1), (1, 16), (8, 128),
                 (1, 1024), (4, 1024)
  encoder_layer  nn.TransformerEncoderLayer(512, 8, 2048), batch_first,
                 (N, L) in (1, 128), (4, 1024)
  decode         greedy decoding of 128 tokens with a seq2seq nn.Transformer
                 (6 + 6 layers, d_model 512, 8 heads, FFN 2048, vocabulary
                 8000, post-norm; peers/seq2seq.py), source length 32, N = 1, 8
  decode_int8    the same decoding with every linear int8 in mha and CTranslate2,
                 and mha in bf16 (peers/int8_rows.py), with the model's bytes
  generate       mha::generate against CTranslate2 and transformers' generate on
                 a Marian-shaped Hugging Face model (d_model 512, 6 + 6 layers,
                 vocabulary 32,000; peers/marian.py), greedy and 4 beams, N = 1
                 and 16, 64 new tokens (peers/generation_rows.py)
  generate_lm    the same for a causal LM: a GPT-2-small-shaped Hugging Face
                 model (768 wide, 12 layers, vocabulary 50,257; peers/gpt2.py),
                 greedy, N = 1 and 16 prompts of 32 tokens, CTranslate2's
                 Generator
  bert           mha's TextEncoderModel against transformers and ONNX Runtime
                 (the legacy exporter's graph, as it is and after ONNX
                 Runtime's BERT optimizer) on a BERT-base-sized Hugging Face
                 BertModel (peers/bert.py), last_hidden_state of (N, L) in
                 (1, 16), (1, 128), (8, 128), (32, 128), each row with the
                 compute and read floors (peers/bert_rows.py)
  serving        48 requests x 64 tokens at once through mha::ContinuousBatch
                 (bench/serving_bench) against CTranslate2's offline
                 translate_batch of the same sources, the decoding rows'
                 model (peers/serving_rows.py)
mha runs in bench/peer_rounds.cpp (a subprocess reading the case file);
ONNX Runtime (torch.onnx.export(dynamo=True)) and AOTInductor
(torch.export + aoti_compile_and_package) run the attention and encoder
cases, CTranslate2 (float32, and int8 for information) the decoding, all in
this process, on T = 1 and 2 threads. Outputs are checked against Python's
before timing (peers/kernel_rows.py, peers/decode_rows.py). Each round runs
mha's subprocess, then each peer, so that all see the same load; the table
gives medians over rounds of per-round medians, and the median of the
per-round ratios mha / peer. Decoding is also timed beside a busy-loop
process (mha 2 and 1 threads, OMP_WAIT_POLICY unset and PASSIVE, against
CTranslate2 on 2 threads); the other rows run in this environment, whose
OMP_WAIT_POLICY the header line names.

Usage: bench_peers.py --cpp BUILD/bench/peer_rounds [--out FILE.md] [--smoke]
"""

import argparse
import dataclasses
import datetime
import json
import logging
import os
import tempfile
import time
import warnings

import ctranslate2
import onnxruntime
import torch

from peers import (bert, bert_rows, cases, ct2_peer, decode_rows, generation_rows, gpt2,
                   int8_rows, kernel_rows, marian, report, seq2seq, serving_rows, timing)

KINDS = ("attention", "encoder_layer", "decode", "decode_int8", "generate", "generate_lm", "bert",
         "serving")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpp", required=True, help="the peer_rounds binary")
    parser.add_argument("--out", help="also write the markdown tables to this file")
    parser.add_argument("--json", help="write every row with its per-round times to this file")
    parser.add_argument("--smoke", action="store_true",
                        help="each case once: one round of one call, 8 decoded tokens, "
                             "bert at (1, 16) only")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the kernel and bert cases")
    parser.add_argument("--decode-rounds", type=int, default=5,
                        help="rounds of the decode, generate and serving cases")
    parser.add_argument("--load-rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=128, help="generated tokens (decode)")
    parser.add_argument("--generate-steps", type=int, default=64,
                        help="new tokens of the generate rows")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS,
                        help="run only these cases (decode includes the busy-loop rows)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = args.decode_rounds = args.load_rounds = 1
        args.steps = args.generate_steps = 8
    return args


def header(args, started, load_start, minutes):
    """The line naming the machine, the versions, the load and the settings."""
    return (f"{report.cpu_model()}, {os.cpu_count()} CPUs; torch {torch.__version__}, "
            f"onnxruntime {onnxruntime.__version__}, ctranslate2 {ctranslate2.__version__}; "
            f"OMP_WAIT_POLICY={timing.wait_policy()}; "
            f"{started:%Y-%m-%d %H:%M} UTC, {minutes:.0f} min; load average {load_start} at "
            f"the start, {timing.load_average()} at the end; {args.rounds} rounds "
            f"(decoding {args.decode_rounds}, under load {args.load_rounds})"
            f"{'; SMOKE RUN (one call per round)' if args.smoke else ''}")


def run_all(args, work):
    """Every row: kernel cases, generation, bert, idle decoding, decoding under load, int8,
    serving; the memory table."""
    rows, load, memory = [], [], ""

    def add(to, new):
        for row in new:
            print(report.line(row), flush=True)
        to += new

    for case in cases.KERNEL_CASES:
        if case.kind in args.kinds:
            add(rows, kernel_rows.rows(case, work, args))
    if "generate" in args.kinds:
        directory = os.path.join(work, "marian")
        model = marian.write(directory)
        ct2_dir = marian.convert_for_ct2(directory, os.path.join(work, "marian_ct2"))
        add(rows, generation_rows.rows(marian, "", (generation_rows.GREEDY, generation_rows.BEAM_4),
                                       directory, model, ct2_dir, work, args))
    if "generate_lm" in args.kinds:
        directory = os.path.join(work, "gpt2")
        model = gpt2.write(directory, args.generate_steps)
        ct2_dir = gpt2.convert_for_ct2(directory, os.path.join(work, "gpt2_ct2"))
        add(rows, generation_rows.rows(gpt2, "GPT-2 ", (generation_rows.GREEDY,), directory, model,
                                       ct2_dir, work, args))
    if "bert" in args.kinds:
        directory = os.path.join(work, "bert")
        add(rows, bert_rows.rows(directory, bert.write(directory), work, args))
    if not {"decode", "decode_int8", "serving"} & set(args.kinds):
        return rows, load, memory
    model = seq2seq.make_model()
    ct2_dir = os.path.join(work, "ct2")
    ct2_peer.convert(model, ct2_dir)
    if "decode" in args.kinds:
        for case in cases.DECODE_CASES:
            add(rows, decode_rows.rows(case, model, ct2_dir, work, args))
        for case in cases.DECODE_CASES:
            add(load, decode_rows.load_rows(case, ct2_dir, work, args))
    if "decode_int8" in args.kinds:
        for case in cases.DECODE_CASES:
            add(rows, int8_rows.rows(case, model, ct2_dir, work, args))
        memory = int8_rows.memory_lines(cases.DECODE_CASES[0], work, args)
    if "serving" in args.kinds:
        add(rows, serving_rows.rows(model, ct2_dir, work, args))
    return rows, load, memory


def main():
    args = parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    started, start = datetime.datetime.now(datetime.timezone.utc), time.time()
    load_start = timing.load_average()
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as work:
        rows, load, memory = run_all(args, work)
    head = header(args, started, load_start, (time.time() - start) / 60)
    text = report.table(rows, head)
    if load:
        text += "\nDecoding beside a busy-loop process:\n\n" + report.table(load, "").lstrip("\n")
    if memory:
        text += "\nThe decoding model's heap bytes (peer_rounds --memory):\n\n" + memory
    print("\n" + text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": head, "rows": [dataclasses.asdict(r) for r in rows],
                       "busy_loop_rows": [dataclasses.asdict(r) for r in load]}, f, indent=1)


if __name__ == "__main__":
    main()
