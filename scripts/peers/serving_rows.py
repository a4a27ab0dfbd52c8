"""The serving rows: mha::ContinuousBatch against CTranslate2's offline translate_batch.

The seeded seq2seq model of the decoding rows (peers/seq2seq.py), 48 requests at once with
sources of 16-128 tokens (a fixed seed), each generating exactly 64 tokens (the model's
special tokens are unreachable). CTranslate2: one `translate_batch` call of every source
(beam 1, `max_batch_size` 48, `min_decoding_length` = `max_decoding_length` = 64), its best
case. mha: bench/serving_bench on the same sources (`--requests-file`), all arriving at once,
the model as `load_hf_model` holds a seq2seq LM (`--panels`: decoder and output projection
in panels, the encoder in `mha::prepack`'s layout for this CPU); two ways of admitting the
requests: all sources in one `add_sources` call, and `add()` one by one. Each round runs
CTranslate2 and then mha on every thread count. The rows give milliseconds per generated
token (1000 / tokens per second), so mha / peer <= 1 / 1.3 is ">= 1.3x CTranslate2's
tokens per second". Tokens are not compared here: the decoding rows check mha's greedy
tokens against Python's on this model.
"""

import os
import random
import subprocess
import time

import ctranslate2
import torch

from . import cases, ct2_peer, seq2seq, timing
from .report import Row

REQUESTS, MIN_LEN, MAX_LEN, OUT_LEN = 48, 16, 128, 64
TARGET = round(1 / 1.3, 2)  # mha / CTranslate2 in ms per token: >= 1.3x its tokens per second
SERVERS = (("continuous, sources encoded together", "add_sources"),
           ("continuous", "add() one by one"))


def request_ids(seed=1234):
    """The requests' source ids: REQUESTS lists of MIN_LEN-MAX_LEN ids, none special."""
    rng = random.Random(seed)
    return [[rng.randrange(seq2seq.EOS + 1, seq2seq.VOCAB)
             for _ in range(rng.randint(MIN_LEN, MAX_LEN))] for _ in range(REQUESTS)]


def _write_files(model, ids, work):
    """serving_bench's weights file (`model.*`, `config.*`) and requests file (`src.<i>`)."""
    weights, requests = os.path.join(work, "serving_model.pt"), os.path.join(work, "requests.pt")
    torch.save(cases.decode_model_entries(model), weights)
    torch.save({f"src.{i}": torch.tensor([row]) for i, row in enumerate(ids)}, requests)
    return weights, requests


def _ct2_ms_per_token(ct2_dir, threads, sources):
    """CTranslate2's one translate_batch call of every source: ms per generated token."""
    translator = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32",
                                        intra_threads=threads, inter_threads=1)
    translator.translate_batch(sources[:2], beam_size=1, max_decoding_length=8)  # warm-up
    start = time.perf_counter()
    results = translator.translate_batch(sources, beam_size=1, max_batch_size=len(sources),
                                         min_decoding_length=OUT_LEN,
                                         max_decoding_length=OUT_LEN)
    seconds = time.perf_counter() - start
    generated = sum(len(r.hypotheses[0]) for r in results)
    if generated != len(sources) * OUT_LEN:
        raise RuntimeError(f"serving: CTranslate2 generated {generated} tokens, "
                           f"not {len(sources) * OUT_LEN}")
    return seconds * 1e3 / generated


def _mha_ms_per_token(binary, weights, requests, threads):
    """serving_bench's two continuous servers: server name -> ms per generated token."""
    command = [binary, f"--weights={weights}", f"--requests-file={requests}",
               f"--requests={REQUESTS}", f"--min-len={MIN_LEN}", f"--max-len={MAX_LEN}",
               f"--out-len={OUT_LEN}", "--at-once", "--continuous-only", "--sources-together",
               "--panels", f"--threads={threads}"]
    stdout = subprocess.run(command, check=True, capture_output=True, text=True,
                            env=timing.mha_env()).stdout
    result = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in dict(SERVERS):
            result[cells[0]] = 1e3 / float(cells[1])  # tokens/s -> ms per token
    return result


def rows(model, ct2_dir, work, args):
    """Per thread count and way of admitting: mha against CTranslate2's batch."""
    binary = os.path.join(os.path.dirname(args.cpp), "serving_bench")
    ids = request_ids()
    weights, requests = _write_files(model, ids, work)
    vocabulary = ct2_peer.vocabulary()
    sources = [[vocabulary[i] for i in row] for row in ids]
    name = (f"serving {REQUESTS} requests x {OUT_LEN} tokens, sources {MIN_LEN}-{MAX_LEN}, "
            "ms per generated token")
    print(name, flush=True)
    load_start = os.getloadavg()[0]
    ct2 = {t: [] for t in args.threads}
    mha = {(t, s): [] for t in args.threads for s, _ in SERVERS}
    for _ in range(args.decode_rounds):
        for threads in args.threads:
            ct2[threads].append(_ct2_ms_per_token(ct2_dir, threads, sources))
            for server, ms in _mha_ms_per_token(binary, weights, requests, threads).items():
                mha[(threads, server)].append(ms)
    load = timing.load_span(load_start)
    return [Row(f"{name}, mha {way}", str(t), "CT2 float32 translate_batch", mha[(t, server)],
                ct2[t], "not compared (the decoding rows check the tokens)", load=load,
                target=TARGET)
            for t in args.threads for server, way in SERVERS]
