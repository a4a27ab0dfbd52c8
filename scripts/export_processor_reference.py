#!/usr/bin/env python3
"""Writes transformers' `generate` for every logits processor and warper mha
implements, each alone and all together, in every search mode (greedy,
sampling, beam search, beam sampling), on the random-weight models that
export_hf_reference.py wrote (run it first): the decoder-only `gpt2` on its
left-padded prompts and the seq2seq `marian` on its padded sources.

For model NAME and each (mode, setting) it writes
`NAME/processors/MODE-SETTING/generation_config.json` (the whole config
transformers ran with, as `GenerationConfig.save_pretrained` writes it) and
the key `MODE-SETTING` of `NAME/processors.pt`: the sequences `generate`
returned after `torch.manual_seed(0)`; `custom-MODE-bias`,
`custom-MODE-penalty` and `custom-MODE-stop` likewise with the caller's
processors and stopping criteria of `custom` (`custom_bias` its bias,
`custom_stop` its stop token); `processor_margin` there is the
smallest gap between the chosen token's score and the next one's over the
greedy runs (a token check means something only well above float32 rounding).

Usage: export_processor_reference.py --models DIR (export_hf_reference.py's --out)
"""

import argparse
import os
import warnings

import torch
import transformers as T

MAGIC = 20261206

MODES = {"greedy": dict(do_sample=False, num_beams=1),
         "sample": dict(do_sample=True, num_beams=1),
         "beams": dict(do_sample=False, num_beams=4),
         "beam_sample": dict(do_sample=True, num_beams=4)}


def settings(free, eos, sampling):
    """Each processor alone, then (`sampling`) each warper alone, then all of
    them together (transformers refuses warpers without sampling). `free` is
    the model's greedy output without any (its first generated token and the
    two after it make the bad words and suppressed tokens bite); `eos` the end
    token."""
    first, second, third = (int(t) for t in free)
    # transformers refuses a forced token that is also suppressed
    forced = min(set(range(10, 20)) - {first, second, third, eos})
    alone = {
        "repetition_penalty": dict(repetition_penalty=1.3),
        "repetition_penalty_low": dict(repetition_penalty=0.7),
        "no_repeat_ngram": dict(no_repeat_ngram_size=2),
        "bad_words": dict(bad_words_ids=[[first], [second, third]]),
        "min_new_tokens": dict(min_new_tokens=5),
        "min_length": dict(min_length=4),
        "forced_bos": dict(forced_bos_token_id=forced),
        "forced_eos": dict(forced_eos_token_id=[eos]),
        "suppress": dict(suppress_tokens=[second, 7]),
        "begin_suppress": dict(begin_suppress_tokens=[first]),
        "renormalize": dict(renormalize_logits=True),
    }
    every = {}
    for name, setting in alone.items():
        if name not in ("repetition_penalty_low", "min_length"):
            every.update(setting)
    if not sampling:
        return dict(alone, all=every)
    warpers = {"temperature": dict(temperature=0.6, top_k=0), "top_k": dict(top_k=5),
               "top_p": dict(top_p=0.8, top_k=0),
               # the penalty with no warper after it to copy its scores
               "repetition_penalty_top_k0": dict(repetition_penalty=1.3, top_k=0)}
    return dict(alone, **warpers, all=dict(every, temperature=0.8, top_k=20, top_p=0.9))


class AddBias(T.LogitsProcessor):
    """A caller's own processor: adds `bias` (V) to every row's scores."""

    def __init__(self, bias):
        self.bias = bias

    def __call__(self, input_ids, scores):
        return scores + self.bias


class StopOnToken(T.StoppingCriteria):
    """A caller's own stopping criterion: a row is done when its newest token is `token`."""

    def __init__(self, token):
        self.token = token

    def __call__(self, input_ids, scores, **kwargs):
        return input_ids[:, -1] == self.token


def custom(bias, stop_token):
    """The caller's processors and stopping criteria (transformers'
    `logits_processor` and `stopping_criteria` arguments) and the config
    settings they run with: a processor of a class of its own, one that
    replaces the config's repetition penalty (1.3) with its own (1.6), and a
    criterion of its own."""
    return {"bias": ({}, [AddBias(bias)], []),
            "penalty": (dict(repetition_penalty=1.3), [T.RepetitionPenaltyLogitsProcessor(1.6)],
                        []),
            "stop": ({}, [], [StopOnToken(stop_token)])}


def config(base, setting, mode):
    """The model's base config with `setting` and `mode`: a fresh GenerationConfig."""
    result = T.GenerationConfig(**base, **setting, **mode)
    result.validate()
    return result


def margin(model, inputs):
    """The smallest gap between the two best processed scores of a greedy run."""
    out = model.generate(**inputs, output_scores=True, return_dict_in_generate=True)
    gaps = []
    for scores in out.scores:
        top2 = scores.topk(2, dim=-1).values
        gap = top2[:, 0] - top2[:, 1]
        gaps.append(gap[torch.isfinite(gap)])
    return torch.cat(gaps).min() if gaps else torch.tensor(float("inf"))


@torch.no_grad()
def export(directory, encoder_decoder):
    model_class = T.AutoModelForSeq2SeqLM if encoder_decoder else T.AutoModelForCausalLM
    model = model_class.from_pretrained(directory).eval()
    reference = torch.load(os.path.join(directory, "mha_reference.pt"))
    inputs = dict(input_ids=reference["input_ids"], attention_mask=reference["attention_mask"])
    loaded = model.generation_config
    eos = loaded.eos_token_id if isinstance(loaded.eos_token_id, int) else loaded.eos_token_id[0]
    base = dict(max_new_tokens=8, eos_token_id=eos, pad_token_id=loaded.pad_token_id,
                decoder_start_token_id=loaded.decoder_start_token_id,
                bos_token_id=loaded.bos_token_id)
    model.generation_config = config(base, {}, MODES["greedy"])
    free = model.generate(**inputs)
    start = 1 if encoder_decoder else inputs["input_ids"].shape[1]
    values, margins = {"magic": torch.tensor(MAGIC)}, []
    for mode_name, mode in MODES.items():
        for name, setting in settings(free[0, start:start + 3], eos, mode["do_sample"]).items():
            key = f"{mode_name}-{name}"
            model.generation_config = config(base, setting, mode)
            model.generation_config.save_pretrained(os.path.join(directory, "processors", key))
            torch.manual_seed(0)
            values[key] = model.generate(**inputs)
            if mode_name == "greedy":
                margins.append(margin(model, inputs).reshape(1))
    values["custom_bias"] = torch.randn(model.config.vocab_size,
                                        generator=torch.Generator().manual_seed(7))
    values["custom_stop"] = free[0, start + 1]  # the first row's second new token
    for mode_name, mode in MODES.items():
        for name, (setting, processors, criteria) in custom(values["custom_bias"],
                                                            values["custom_stop"]).items():
            key = f"custom-{mode_name}-{name}"
            model.generation_config = config(base, setting, mode)
            model.generation_config.save_pretrained(os.path.join(directory, "processors", key))
            torch.manual_seed(0)
            values[key] = model.generate(**inputs,
                                         logits_processor=T.LogitsProcessorList(processors),
                                         stopping_criteria=T.StoppingCriteriaList(criteria))
    values["processor_margin"] = torch.cat(margins).min()
    torch.save(values, os.path.join(directory, "processors.pt"))
    return len(values) - 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", required=True)
    models = parser.parse_args().models
    warnings.filterwarnings("ignore")
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    count = sum(export(os.path.join(models, name), encoder_decoder)
                for name, encoder_decoder in (("gpt2", False), ("marian", True)))
    print(f"wrote {count} processor and search-mode references with transformers {T.__version__}")


if __name__ == "__main__":
    main()
