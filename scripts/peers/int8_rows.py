"""The int8 decoding rows: mha int8 against CTranslate2 int8 and mha float32, bf16 beside them.

Every linear of the seq2seq model is int8 in both engines, the output
projection included (mha: mha::quantize_dynamic, per-channel weights,
FBGEMM; CTranslate2: compute_type "int8"). Neither is expected to give
float32's tokens: the share of tokens equal to Python's float32 greedy
decoding (and mha int8's to CTranslate2 int8's) is reported for information.
Each round runs mha int8, mha float32 and mha bf16 (`->to(kBFloat16)`)
subprocesses, then CTranslate2 int8. The memory rows: the heap bytes of the
model in each precision (peer_rounds --memory), whole and without the
embeddings (float32 in every precision).
"""

import os

import numpy as np
import torch

from . import ct2_peer, decode_rows, timing
from .report import Row


def _tokens(args, case, case_file, work, threads, precision):
    out = os.path.join(work, f"{case.key}_{precision}_t{threads}.bin")
    timing.mha_round(args.cpp, case_file, case.kind, threads, 1, 0, out=out, precision=precision)
    return torch.from_numpy(np.fromfile(out, dtype=np.int64))


def _share(tokens, ref):
    return f"{(tokens.view(ref.shape)[:, 1:] == ref[:, 1:]).float().mean().item():.0%}"


def rows(case, model, ct2_dir, work, args):
    """Per thread count: mha int8 / CT2 int8, mha int8 / mha float32, mha bf16 / mha float32."""
    print(f"{case.name}, int8, {args.steps} tokens", flush=True)
    src, ref, case_file = decode_rows.reference(case, model, work, args)
    result = []
    for threads in args.threads:
        ct2 = ct2_peer.translator(ct2_dir, threads, "int8")
        ct2_tokens = ct2(src, args.steps)  # also a warm-up
        int8 = _tokens(args, case, case_file, work, threads, "int8")
        bf16 = _tokens(args, case, case_file, work, threads, "bf16")
        check = (f"tokens equal to Python float32's: mha int8 {_share(int8, ref)}, CT2 int8 "
                 f"{_share(ct2_tokens, ref)}, mha bf16 {_share(bf16, ref)}; mha int8 = CT2 int8: "
                 f"{_share(int8, ct2_tokens)}")
        print(f"  T = {threads}: {check}", flush=True)
        load_start = os.getloadavg()[0]
        times = {p: [] for p in ("int8", "float32", "bf16", "ct2")}
        for _ in range(args.decode_rounds):
            for precision in ("int8", "float32", "bf16"):
                times[precision].append(timing.mha_round(args.cpp, case_file, case.kind, threads,
                                                         1, 1, precision=precision))
            times["ct2"].append(timing.median_ms(lambda: ct2(src, args.steps), 1, warmup=0))
        load = timing.load_span(load_start)
        t = str(threads)
        result += [Row(f"{case.name}, mha int8", t, "CT2 int8", times["int8"], times["ct2"], check,
                       load=load),
                   Row(f"{case.name}, mha int8", t, "mha float32", times["int8"],
                       times["float32"], check, load=load),
                   Row(f"{case.name}, mha bf16", t, "mha float32", times["bf16"],
                       times["float32"], check, load=load)]
    return result


def memory_lines(case, work, args):
    """The markdown table of the model's bytes in each precision."""
    case_file = os.path.join(work, f"{case.key}.pt")
    sizes = {p: timing.mha_model_bytes(args.cpp, case_file, p) for p in ("float32", "int8", "bf16")}
    base, base_emb = sizes["float32"]
    lines = ["| precision | model MB | / float32 | without embeddings MB | / float32 |",
             "|---|---|---|---|---|"]
    for precision, (total, emb) in sizes.items():
        lines.append(f"| {precision} | {total / 1e6:.1f} | {total / base:.3f} | "
                     f"{(total - emb) / 1e6:.1f} | {(total - emb) / (base - base_emb):.3f} |")
    return "\n".join(lines) + "\n"
