#!/usr/bin/env python3
"""Times sentence embeddings end to end from text: mha::SentenceTransformer
against sentence-transformers (PyTorch) and ONNX Runtime's optimized BERT
graph fed by the `tokenizers` library (docs/benchmarks.md, "Sentence embeddings").

For a MiniLM-L6 shape (hidden 384, 6 layers, 12 heads, FFN 1536) and a
BERT-base shape (768, 12, 12, 3072) it writes a sentence-transformers
directory: a BertModel with seeded random weights over the vocabulary of the
tokenizer reference's bert_uncased WordPiece tokenizer (tokenizer tests'
fixture), mean pooling, Normalize, max_seq_length 128, saved by
sentence-transformers. The sentences: 1,024 of 8 to 128 tokens (a seeded
uniform length each, filled with the corpus lines' words in order). Each
engine runs in its own process, on 1 and 2 threads, turns alternating, ROUNDS
timed calls per turn after a warm-up call:
- mha: build/bench/embedding_rounds (SentenceTransformer::encode(sentences, 32));
- sentence-transformers: `encode(sentences, batch_size=32)`, torch.set_num_threads(T);
- ONNX Runtime: the directory's tokenizer.json in `tokenizers` (truncation to
  128, each batch padded to its longest; RAYON_NUM_THREADS=T), the sentences
  sorted longest first as sentence-transformers sorts them, batches of 32
  through the graph of the legacy exporter (opset 17, dynamic batch and
  sequence) after onnxruntime.transformers' BERT optimizer, T intra-op
  threads; mean pooling and normalization in numpy.
mha's and ONNX Runtime's vectors are checked against sentence-transformers'
first (largest absolute difference). Reports the median seconds per call of
each, sentences per second, and mha / the faster peer.

Needs the peers of scripts/bench_peers_requirements.txt (onnxruntime, onnx).
Usage: bench_embeddings.py [--ref build/tests/tokenizer_reference]
                           [--bin build/bench/embedding_rounds] [--work DIR]
                           [--out FILE.md] [--rounds 3] [--turns 3]
                           [--shapes MiniLM-L6,BERT-base]
"""

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys

import numpy as np

from bench_tokenizers import cpu_name  # /proc/cpuinfo's model name

SHAPES = {"MiniLM-L6": (384, 6, 12, 1536), "BERT-base": (768, 12, 12, 3072)}
SENTENCES, MIN_TOKENS, MAX_TOKENS, BATCH = 1024, 8, 128, 32

ENGINE_SIDE = r"""
import json, os, sys, time
import numpy as np
engine, directory, sentences_file, vectors_file = sys.argv[1:5]
threads, rounds, HIDDEN, BATCH, MAX_TOKENS = map(int, sys.argv[5:10])
sentences = json.load(open(sentences_file, encoding="utf-8"))
if engine == "sentence-transformers":
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(threads)
    model = SentenceTransformer(directory, device="cpu")
    call = lambda: model.encode(sentences, batch_size=BATCH, convert_to_numpy=True)
else:
    import onnxruntime as ort
    from tokenizers import Tokenizer
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(os.path.join(directory, "model_optimized.onnx"), options,
                                   providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    def call():
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        out = np.empty((len(sentences), HIDDEN), dtype=np.float32)
        for b in range(0, len(order), BATCH):
            rows = order[b:b + BATCH]
            encodings = tokenizer.encode_batch([sentences[i] for i in rows])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            tokens = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (tokens * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out
vectors = call()
seconds = []
for _ in range(rounds):
    start = time.perf_counter()
    vectors = call()
    seconds.append(time.perf_counter() - start)
np.asarray(vectors, dtype=np.float32).tofile(vectors_file)
print(json.dumps({"sentences": len(sentences), "seconds": seconds}))
"""


def sentences_of(tokenizer, lines):
    """SENTENCES texts of a seeded uniform MIN_TOKENS..MAX_TOKENS tokens (specials
    left out), each filled with the corpus lines' next words."""
    words = [w for line in lines for w in line.split()]
    pieces = [len(p) for p in tokenizer(words, add_special_tokens=False)["input_ids"]]
    rng, at, out = random.Random(0), 0, []
    for _ in range(SENTENCES):
        target, taken, start = rng.randint(MIN_TOKENS, MAX_TOKENS), 0, at
        while taken + pieces[at % len(words)] <= target or taken < MIN_TOKENS:
            taken += pieces[at % len(words)]
            at += 1
        out.append(" ".join(words[i % len(words)] for i in range(start, at)))
    return out


def write_model(directory, tokenizer_dir, shape):
    """The sentence-transformers directory of `shape` and its optimized ONNX graph."""
    import torch
    import transformers as T
    from onnxruntime.transformers import optimizer
    from sentence_transformers import SentenceTransformer, models

    hidden, layers, heads, ffn = shape
    tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = T.BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                          num_attention_heads=heads, intermediate_size=ffn,
                          max_position_embeddings=512, attn_implementation="eager")
    base = os.path.join(directory, "base")
    T.BertModel(config).eval().save_pretrained(base)
    tokenizer.save_pretrained(base)
    word = models.Transformer(base, max_seq_length=MAX_TOKENS)
    pooling = models.Pooling(hidden, pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling, models.Normalize()], device="cpu").save(directory)
    model = T.BertModel.from_pretrained(base, attn_implementation="eager").eval()

    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    path = os.path.join(directory, "model.onnx")
    example = (torch.ones(2, 16, dtype=torch.long), torch.ones(2, 16, dtype=torch.long))
    axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "tokens")}
    torch.onnx.export(Tokens().eval(), example, path, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"], output_names=["tokens"],
                      dynamic_axes=axes)
    optimized = optimizer.optimize_model(path, model_type="bert", num_heads=heads,
                                         hidden_size=hidden)
    optimized.save_model_to_file(os.path.join(directory, "model_optimized.onnx"))
    fused = {op: k for op, k in optimized.get_fused_operator_statistics().items() if k}
    return fused


def run(engine, binary, directory, sentences_file, threads, rounds, vectors_file):
    """One engine's turn in its own process: its JSON (seconds per round)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true")
    if engine == "mha":
        command = [binary, directory, sentences_file, str(threads), str(rounds), vectors_file]
    else:
        with open(os.path.join(directory, "base", "config.json"), encoding="utf-8") as f:
            hidden = json.load(f)["hidden_size"]
        command = [sys.executable, "-c", ENGINE_SIDE, engine, directory, sentences_file,
                   vectors_file, *map(str, (threads, rounds, hidden, BATCH, MAX_TOKENS))]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="build/tests/tokenizer_reference")
    parser.add_argument("--bin", default="build/bench/embedding_rounds")
    parser.add_argument("--work", default="build/bench_embeddings")
    parser.add_argument("--out", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="of " + ", ".join(SHAPES))
    args = parser.parse_args()
    import transformers as T

    tokenizer_dir = os.path.join(args.ref, "bert_uncased")
    with open(os.path.join(tokenizer_dir, "mha_reference.json"), encoding="utf-8") as f:
        lines = json.load(f)["lines"][:10000]
    tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
    os.makedirs(args.work, exist_ok=True)
    sentences = sentences_of(tokenizer, lines)
    sentences_file = os.path.join(args.work, "sentences.json")
    with open(sentences_file, "w", encoding="utf-8") as f:
        json.dump(sentences, f, ensure_ascii=False)
    lengths = sorted(len(ids) for ids in tokenizer(sentences)["input_ids"])
    report = [f"# Sentence embeddings, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}",
              "", f"CPU: {cpu_name()}, {os.cpu_count()} CPUs. {SENTENCES} sentences of "
              f"{lengths[0]}-{lengths[-1]} tokens with specials (median {lengths[len(lengths) // 2]}), "
              f"batch {BATCH}, max_seq_length {MAX_TOKENS}; median of {args.turns} turns x "
              f"{args.rounds} calls. OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}.",
              "", "| shape | threads | mha s | sentence-transformers s | ONNX Runtime s | "
              "mha sentences/s | mha / faster peer | max abs diff vs ST (mha, ORT) |",
              "|---|---|---|---|---|---|---|---|"]
    engines = ("mha", "sentence-transformers", "onnxruntime")
    for name in args.shapes.split(","):
        shape = SHAPES[name]
        directory = os.path.join(args.work, name)
        fused = write_model(directory, tokenizer_dir, shape)
        print(f"{name}: ONNX Runtime fused {fused}", flush=True)
        for threads in (1, 2):
            seconds = {e: [] for e in engines}
            vectors = {e: os.path.join(args.work, f"{e}.f32") for e in engines}
            for _ in range(args.turns):
                for e in engines:
                    seconds[e] += run(e, args.bin, directory, sentences_file, threads,
                                      args.rounds, vectors[e])["seconds"]
            got = {e: np.fromfile(vectors[e], dtype=np.float32).reshape(SENTENCES, -1)
                   for e in engines}
            diff = [float(np.abs(got[e] - got["sentence-transformers"]).max())
                    for e in ("mha", "onnxruntime")]
            med = {e: statistics.median(seconds[e]) for e in engines}
            peer = min(med["sentence-transformers"], med["onnxruntime"])
            row = (f"| {name} | {threads} | {med['mha']:.3f} | {med['sentence-transformers']:.3f} | "
                   f"{med['onnxruntime']:.3f} | {SENTENCES / med['mha']:.0f} | "
                   f"{med['mha'] / peer:.2f}x | {diff[0]:.1e}, {diff[1]:.1e} |")
            print(row, flush=True)
            report.append(row)
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
