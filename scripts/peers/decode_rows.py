"""The decoding rows: mha's cached greedy decoding against CTranslate2, idle and under load.

Per batch size: Python's greedy tokens are the reference; mha's and
CTranslate2 float32's tokens must equal them before anything is timed, and
for CTranslate2 int8 (for information) the share of equal tokens is
reported. Then `decode_rounds` rounds of one decode each: mha's subprocess
(one warm-up decode, one timed), then each peer once in this process.

Under load: one busy-loop process beside the benchmark; each round times mha
on 2 and on 1 threads, each with OMP_WAIT_POLICY unset (the OpenMP runtime's
default) and with OMP_WAIT_POLICY=PASSIVE, whatever this environment sets,
then CTranslate2 float32 on 2 threads.
"""

import functools
import os

import numpy as np
import torch

from . import cases, ct2_peer, seq2seq, timing
from .report import Row

PEERS = (("CT2 float32", "float32"), ("CT2 int8", "int8"))


def reference(case, model, work, args):
    """The sources, Python's tokens (N, 1 + steps) and the case file."""
    src = seq2seq.sources(case.n, case.length)
    torch.set_num_threads(max(args.threads))
    tokens = seq2seq.greedy(model, src, args.steps)
    case_file = os.path.join(work, f"{case.key}.pt")
    cases.write_decode_file(model, src, tokens, case_file)
    return src, tokens, case_file


def _equal(tokens, ref):
    """'equal', or the share of generated tokens equal to Python's."""
    same = (tokens[:, 1:] == ref[:, 1:]).float().mean().item()
    return "equal" if same == 1.0 else f"{same:.0%} equal"


def _check(case, case_file, work, threads, calls, ref, args):
    """Token agreement with Python of mha (raises unless equal) and of each peer."""
    out = os.path.join(work, f"{case.key}_t{threads}.bin")
    timing.mha_round(args.cpp, case_file, case.kind, threads, 1, 0, out=out)
    mha = _equal(torch.from_numpy(np.fromfile(out, dtype=np.int64)).view(ref.shape), ref)
    peers = {name: _equal(call(), ref) for name, call in calls.items()}  # also a warm-up
    print(f"  T = {threads}: tokens against Python's: mha {mha}, " +
          ", ".join(f"{n} {e}" for n, e in peers.items()), flush=True)
    if mha != "equal":
        raise RuntimeError(f"{case.name}: mha's tokens differ from Python's ({mha})")
    return mha, peers


def _peer_calls(ct2_dir, threads, src, steps):
    """Peer name -> one greedy decode of `src` on `threads` threads."""
    calls = {}
    for name, compute_type in PEERS:
        translate = ct2_peer.translator(ct2_dir, threads, compute_type)
        calls[name] = functools.partial(translate, src, steps)
    return calls


def rows(case, model, ct2_dir, work, args):
    """The idle rows of one batch size: per thread count, one row per peer."""
    print(f"{case.name}, {args.steps} tokens", flush=True)
    src, ref, case_file = reference(case, model, work, args)
    result = []
    for threads in args.threads:
        calls = _peer_calls(ct2_dir, threads, src, args.steps)
        mha_check, checks = _check(case, case_file, work, threads, calls, ref, args)
        if checks["CT2 float32"] != "equal":  # int8 is timed whatever its tokens
            del calls["CT2 float32"]
        load_start = os.getloadavg()[0]
        mha, peers = [], {name: [] for name in calls}
        for _ in range(args.decode_rounds):
            mha.append(timing.mha_round(args.cpp, case_file, case.kind, threads, 1, warmup=1))
            for name, call in calls.items():
                peers[name].append(timing.median_ms(call, 1, warmup=0))
        load = timing.load_span(load_start)
        for name, _ in PEERS:
            note = "" if name in calls else "tokens differ from Python's"
            result.append(Row(case.name, str(threads), name, mha, peers.get(name, []),
                              f"tokens {mha_check}; {checks[name]}", note=note, load=load))
    return result


def load_rows(case, ct2_dir, work, args):
    """The rows beside a busy loop: mha on 2 and 1 threads, both policies; CT2 on 2 threads."""
    print(f"{case.name}, under load", flush=True)
    case_file = os.path.join(work, f"{case.key}.pt")
    saved = torch.load(case_file)
    src, ref = saved["src"], saved["tokens"]
    ct2 = ct2_peer.translator(ct2_dir, 2, "float32")
    check = f"tokens as idle; {_equal(ct2(src, args.steps), ref)}"  # also a warm-up
    variants = [(2, "unset"), (2, "PASSIVE"), (1, "unset"), (1, "PASSIVE")]
    mha, peer = {v: [] for v in variants}, []
    with timing.busy_loop():
        load_start = os.getloadavg()[0]
        for _ in range(args.load_rounds):
            for threads, policy in variants:
                env = timing.mha_env(policy)
                mha[(threads, policy)].append(
                    timing.mha_round(args.cpp, case_file, case.kind, threads, 1, 1, env=env))
            peer.append(timing.median_ms(lambda: ct2(src, args.steps), 1, warmup=0))
        load = timing.load_span(load_start)
    return [Row(f"{case.name}, busy loop", f"mha {t}, OMP_WAIT_POLICY={p}",
                "CT2 float32, 2 threads", mha[(t, p)], peer, check, load=load)
            for t, p in variants]
