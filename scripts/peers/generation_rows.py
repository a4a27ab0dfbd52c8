"""The generation rows: mha::generate against CTranslate2 and transformers' generate.

The Marian-shaped model of peers/marian.py, from its Hugging Face directory
in every engine: mha loads it with load_hf_model (as loaded: prepacked;
with float weights, prepack(false); with its decoder in oneDNN's layout,
decoder_panels(false)),
transformers with from_pretrained, CTranslate2 converts it with its
TransformersConverter. Per batch size (1 and 16 sources of 32 tokens) and
search (greedy; beam search, 4 beams), `max_new_tokens` tokens: first the
tokens of each engine against transformers' (mha's must be equal; for
CTranslate2 the share of equal tokens is reported, and its greedy must be
equal to be timed), then `decode_rounds` rounds of one call each: mha's
subprocesses (each load; one warm-up call, one timed), then
transformers and CTranslate2 in this process. For greedy decoding at batch
1, where every engine streams the decoder's weights once per token, the
rows also give the weight bytes each step reads as a share of a read sweep
(torch.sum over a 1 GiB tensor: the machine's read bandwidth).
"""

import os
import statistics

import numpy as np
import torch

from . import marian, timing
from .report import Row

BATCHES = (1, 16)
SEARCHES = (("greedy", 1), ("beam 4", 4))
LOADS = {"float32": "as loaded", "float": "float weights", "onednn": "oneDNN decoder"}


def step_bytes(model):
    """Bytes of the weights one decoder step reads: the decoder's layers and the LM head."""
    decoder = sum(p.numel() for n, p in model.model.decoder.named_parameters()
                  if "embed" not in n)
    return 4 * (decoder + model.lm_head.weight.numel())


def _case_file(directory, src, beams, steps):
    """mha's case file, inside the model's directory (bench/peer_rounds.cpp, generate)."""
    path = os.path.join(directory, f"case_n{src.size(0)}_b{beams}.pt")
    torch.save({"input_ids": src, "config.num_beams": torch.tensor(beams),
                "config.max_new_tokens": torch.tensor(steps)}, path)
    return path


def _engines(model, ct2_dir, threads, src, beams, steps):
    """Peer name -> one generate call of `src`, returning (N, 1 + steps) ids."""
    import ctranslate2

    translator = ctranslate2.Translator(ct2_dir, device="cpu", intra_threads=threads,
                                        inter_threads=1)
    names = marian.names_of(src)
    start = torch.full((src.size(0), 1), marian.PAD)

    def ct2():
        results = translator.translate_batch(names, beam_size=beams, max_decoding_length=steps)
        return torch.cat([start, marian.ids_of([r.hypotheses[0] for r in results])], 1)

    def hf():
        torch.set_num_threads(threads)
        with torch.inference_mode():
            return model.generate(input_ids=src, attention_mask=torch.ones_like(src),
                                  max_new_tokens=steps, num_beams=beams, do_sample=False)

    return {"CT2 float32": ct2, "transformers": hf}


def _equal(tokens, ref):
    """'equal', or the share of generated tokens equal to transformers'."""
    same = (tokens[:, 1:] == ref[:, 1:]).float().mean().item()
    return "equal" if same == 1.0 else f"{same:.0%} equal"


def _mha_tokens(args, case_file, threads, precision, shape, work):
    """mha's tokens for the case (one call)."""
    out = os.path.join(work, "generate_tokens.bin")
    timing.mha_round(args.cpp, case_file, "generate", threads, 1, 0, out=out, precision=precision)
    return torch.from_numpy(np.fromfile(out, dtype=np.int64)).view(shape)


def _checks(args, case_file, threads, engines, work, loads):
    """Each engine's tokens against transformers' (mha's must be equal)."""
    ref = engines["transformers"]()
    checks = {name: _equal(call(), ref) for name, call in engines.items()}
    for precision in loads:
        mha = _equal(_mha_tokens(args, case_file, threads, precision, ref.shape, work), ref)
        if mha != "equal":
            raise RuntimeError(f"generate: mha {precision}'s tokens differ from transformers' ({mha})")
    return checks


def _sweep_note(model, threads, steps, mha_ms, peer_ms):
    """The weights' bytes per step over each time, as a share of the read sweep."""
    rate = step_bytes(model) * steps / 1e9
    sweep = timing.read_bandwidth(threads) / 1e9
    return (f"read sweep {sweep:.1f} GB/s; weights read at "
            f"{rate / (statistics.median(mha_ms) * 1e-3) / sweep:.0%} (mha), "
            f"{rate / (statistics.median(peer_ms) * 1e-3) / sweep:.0%} (peer)")


def rows(directory, model, ct2_dir, work, args):
    """Every generation row: batch x search x threads x (CT2, transformers), mha float too."""
    result = []
    for n in BATCHES:
        src = marian.sources(n)
        for search, beams in SEARCHES:
            case_file = _case_file(directory, src, beams, args.generate_steps)
            name = f"generate {search}, N = {n}, {args.generate_steps} tokens"
            print(name, flush=True)
            for threads in args.threads:
                result += _timed_rows(name, model, ct2_dir, work, args, case_file, threads,
                                      src, beams)
    return result


def _timed_rows(name, model, ct2_dir, work, args, case_file, threads, src, beams):
    """The rows of one case on `threads` threads."""
    engines = _engines(model, ct2_dir, threads, src, beams, args.generate_steps)
    loads = list(LOADS)
    checks = _checks(args, case_file, threads, engines, work, loads)
    if beams == 1 and checks["CT2 float32"] != "equal":
        raise RuntimeError(f"{name}: CTranslate2's greedy tokens differ from transformers'")
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
            check = f"tokens: mha equal to transformers'; {peer} {checks[peer]}"
            if beams == 1 and src.size(0) == 1 and peer == "CT2 float32":
                check += "; " + _sweep_note(model, threads, args.generate_steps, times[precision],
                                            times[peer])
            result.append(Row(f"{name}, mha {LOADS[precision]}",
                              str(threads), peer, times[precision], times[peer], check,
                              load=load))
    return result
