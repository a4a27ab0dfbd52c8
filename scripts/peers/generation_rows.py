"""The generation rows: mha::generate against CTranslate2 and transformers' generate.

A model family's Hugging Face directory (peers/marian.py, the seq2seq rows;
peers/gpt2.py, the causal LM rows) in every engine: mha loads it with
load_hf_model (as loaded: prepacked; with float weights, prepack(false); with
its decoder in oneDNN's layout, decoder_panels(false)), transformers with
from_pretrained, CTranslate2 converts it with its TransformersConverter (a
Translator or a Generator: the family's `ct2_call`). Per batch size (1 and 16
sources or prompts of 32 tokens) and search (the family's: greedy; beam
search, 4 beams), `max_new_tokens` tokens: first the generated tokens of each
engine against transformers' (mha's as loaded must be equal; for its other
loads and CTranslate2 the share of equal tokens is reported: a near-tie that
transformers' own float32 rounding decides may go either way; every engine
must generate the same number of tokens), then
`decode_rounds` rounds of one call each: mha's subprocesses (each load; one
warm-up call, one timed), then transformers and CTranslate2 in this process.
For greedy decoding at batch 1, where every engine streams the decoder's
weights once per token, the rows also give the weight bytes each step reads
(the family's `step_bytes`) as a share of a read sweep (torch.sum over a 1 GiB
tensor: the machine's read bandwidth).
"""

import os
import statistics

import numpy as np
import torch

from . import timing
from .report import Row

BATCHES = (1, 16)
GREEDY, BEAM_4 = ("greedy", 1), ("beam 4", 4)
LOADS = {"float32": "as loaded", "float": "float weights", "onednn": "oneDNN decoder"}


def _case_file(directory, src, beams, steps):
    """mha's case file, inside the model's directory (bench/peer_rounds.cpp, generate)."""
    path = os.path.join(directory, f"case_n{src.size(0)}_b{beams}.pt")
    torch.save({"input_ids": src, "config.num_beams": torch.tensor(beams),
                "config.max_new_tokens": torch.tensor(steps)}, path)
    return path


def _engines(family, model, ct2_dir, threads, src, beams, steps):
    """Peer name -> one generate call of `src`, returning the ids transformers returns."""

    def hf():
        torch.set_num_threads(threads)
        with torch.inference_mode():
            return model.generate(input_ids=src, attention_mask=torch.ones_like(src),
                                  max_new_tokens=steps, num_beams=beams, do_sample=False)

    return {"CT2 float32": family.ct2_call(ct2_dir, threads, src, beams, steps),
            "transformers": hf}


def _equal(tokens, ref, steps):
    """'equal', or the share of the `steps` generated tokens equal to transformers'."""
    if tokens.shape != ref.shape:
        return f"shaped {tuple(tokens.shape)}, not {tuple(ref.shape)}"
    same = (tokens[:, -steps:] == ref[:, -steps:]).float().mean().item()
    return "equal" if same == 1.0 else f"{same:.1%} equal"


def _mha_tokens(args, case_file, threads, precision, shape, work):
    """mha's tokens for the case (one call)."""
    out = os.path.join(work, "generate_tokens.bin")
    timing.mha_round(args.cpp, case_file, "generate", threads, 1, 0, out=out, precision=precision)
    return torch.from_numpy(np.fromfile(out, dtype=np.int64)).view(shape)


def _checks(args, case_file, threads, engines, work, loads):
    """Each engine's tokens against transformers': (peer -> check, mha load -> check).
    mha as loaded must be equal; its other loads may differ where transformers'
    own float32 rounding decides a near-tie, so they are reported like the peers."""
    ref, steps = engines["transformers"](), args.generate_steps
    peers = {name: _equal(call(), ref, steps) for name, call in engines.items()}
    mha = {precision: _equal(_mha_tokens(args, case_file, threads, precision, ref.shape, work),
                             ref, steps) for precision in loads}
    if mha["float32"] != "equal":
        raise RuntimeError(f"generate: mha's tokens differ from transformers' ({mha['float32']})")
    return peers, mha


def _sweep_note(family, model, threads, steps, mha_ms, peer_ms):
    """The weights' bytes per step over each time, as a share of the read sweep."""
    rate = family.step_bytes(model) * steps / 1e9
    sweep = timing.read_bandwidth(threads) / 1e9
    return (f"read sweep {sweep:.1f} GB/s; weights read at "
            f"{rate / (statistics.median(mha_ms) * 1e-3) / sweep:.0%} (mha), "
            f"{rate / (statistics.median(peer_ms) * 1e-3) / sweep:.0%} (peer)")


def rows(family, label, searches, directory, model, ct2_dir, work, args):
    """Every generation row of `family` (a module: peers/marian.py or peers/gpt2.py),
    named `label`: batch x search x threads x (CT2, transformers), mha float too."""
    result = []
    for n in BATCHES:
        src = family.sources(n)
        for search, beams in searches:
            case_file = _case_file(directory, src, beams, args.generate_steps)
            name = f"generate {label}{search}, N = {n}, {args.generate_steps} tokens"
            print(name, flush=True)
            for threads in args.threads:
                result += _timed_rows(name, family, model, ct2_dir, work, args, case_file,
                                      threads, src, beams)
    return result


def _timed_rows(name, family, model, ct2_dir, work, args, case_file, threads, src, beams):
    """The rows of one case on `threads` threads."""
    engines = _engines(family, model, ct2_dir, threads, src, beams, args.generate_steps)
    loads = list(LOADS)
    checks, mha_checks = _checks(args, case_file, threads, engines, work, loads)
    if checks["CT2 float32"].startswith("shaped"):
        raise RuntimeError(f"{name}: CTranslate2 generated another number of tokens")
    load_start = os.getloadavg()[0]
    times = {k: [] for k in (*loads, *engines)}
    for _ in range(args.decode_rounds):
        for precision in loads:
            times[precision].append(timing.mha_round(args.cpp, case_file, "generate", threads, 1,
                                                     warmup=1, precision=precision))
        for peer, call in engines.items():
            times[peer].append(timing.median_ms(call, 1, warmup=0))
    load = timing.load_span(load_start)
    result = []
    for peer in engines:
        for precision in loads:
            check = f"tokens: mha {mha_checks[precision]} to transformers'; {peer} {checks[peer]}"
            if beams == 1 and src.size(0) == 1 and peer == "CT2 float32":
                check += "; " + _sweep_note(family, model, threads, args.generate_steps,
                                            times[precision], times[peer])
            result.append(Row(f"{name}, mha {LOADS[precision]}",
                              str(threads), peer, times[precision], times[peer], check,
                              load=load))
    return result
