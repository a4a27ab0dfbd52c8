#!/usr/bin/env python3
"""Writes Hugging Face directories with generation settings and the generation
config transformers reads from each, for the C++ tests of mha/generation_config.h.

Each directory gets what a checkpoint has (config.json from a model config,
and for some a generation_config.json), and `expected.json`: the config a
model loaded from the directory generates with, as transformers computes it
(GenerationModelMixin's loading: generation_config.json, else config.json;
then `_get_default_generation_params` for what is unset, but `max_length`,
which `generate` treats as "20 new tokens" while unset), its fields as
mha::GenerationConfig names them. Directories whose config transformers or
mha refuses get `error.txt` instead: a fragment mha's message must contain.

Usage: export_generation_reference.py --out DIR
"""

import argparse
import json
import os

import transformers as T
from transformers import GenerationConfig

FIELDS = ["max_length", "max_new_tokens", "min_length", "min_new_tokens", "do_sample",
          "num_beams", "num_return_sequences", "length_penalty", "early_stopping",
          "temperature", "top_k", "top_p", "repetition_penalty", "no_repeat_ngram_size",
          "bad_words_ids", "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens",
          "begin_suppress_tokens", "renormalize_logits", "eos_token_id", "pad_token_id",
          "bos_token_id", "decoder_start_token_id", "stop_strings"]


def loaded(directory):
    """The generation config a model loaded from `directory` generates with."""
    try:
        config = GenerationConfig.from_pretrained(directory)
    except OSError:
        config = GenerationConfig.from_pretrained(directory, config_file_name="config.json",
                                                  _from_model_config=True)
    max_length = config.max_length  # unset: generate's "20 new tokens"
    config.update(**GenerationConfig._get_default_generation_params(), defaults_only=True)
    config.max_length = max_length
    config.validate()
    return config


def as_list(value):
    """An int or a list as a list; None as an empty list."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expected(config):
    out = {field: getattr(config, field) for field in FIELDS}
    for field in ("forced_eos_token_id", "eos_token_id", "suppress_tokens",
                  "begin_suppress_tokens", "stop_strings"):
        out[field] = as_list(out[field])
    out["bad_words_ids"] = out["bad_words_ids"] or []
    out["early_stopping"] = {True: "true", False: "false", "never": "never"}[out["early_stopping"]]
    out["renormalize_logits"] = bool(out["renormalize_logits"])
    return out


def write(out, name, model_config=None, generation=None, error=None, transformers_raises=False):
    directory = os.path.join(out, name)
    os.makedirs(directory, exist_ok=True)
    if model_config is not None:
        model_config.save_pretrained(directory)
    if generation is not None:
        with open(os.path.join(directory, "generation_config.json"), "w") as f:
            json.dump(generation, f, indent=2)
    if transformers_raises:  # the same refusal, worded as transformers words it
        try:
            loaded(directory)
        except ValueError as e:
            assert error in str(e), (name, str(e))
        else:
            raise AssertionError(f"{name}: transformers accepted it")
    if error is not None:
        with open(os.path.join(directory, "error.txt"), "w") as f:
            f.write(error)
        return
    with open(os.path.join(directory, "expected.json"), "w") as f:
        json.dump(expected(loaded(directory)), f, indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    T.logging.set_verbosity_error()
    marian = T.MarianConfig(vocab_size=99, d_model=32, pad_token_id=98,
                            decoder_start_token_id=98, eos_token_id=38, forced_eos_token_id=38)
    # config.json only: the model config's token ids, transformers' defaults.
    write(out, "marian_config_only", marian)
    write(out, "gpt2_config_only", T.GPT2Config(vocab_size=99))
    write(out, "bart_config_only", T.BartConfig(vocab_size=99))
    # generation_config.json as opus-mt and bart-large-cnn publish them.
    write(out, "marian_beams", marian,
          {"bad_words_ids": [[98]], "bos_token_id": 0, "decoder_start_token_id": 98,
           "eos_token_id": 38, "forced_eos_token_id": 38, "max_length": 512, "num_beams": 4,
           "pad_token_id": 98, "renormalize_logits": True, "transformers_version": "4.34.0"})
    write(out, "bart_cnn", T.BartConfig(vocab_size=99),
          {"bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
           "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
           "length_penalty": 2.0, "max_length": 142, "min_length": 56,
           "no_repeat_ngram_size": 3, "num_beams": 4, "pad_token_id": 1})
    write(out, "sampling", T.GPT2Config(vocab_size=99),
          {"do_sample": True, "temperature": 0.7, "top_k": 40, "top_p": 0.9,
           "repetition_penalty": 1.2, "eos_token_id": [50, 51], "max_new_tokens": 64,
           "min_new_tokens": 3, "early_stopping": "never", "num_return_sequences": 2,
           "bad_words_ids": [[5, 6], [7]], "suppress_tokens": [8],
           "begin_suppress_tokens": [9, 10], "typical_p": 1.0, "use_cache": True,
           "stop_strings": ["\n\n", "THE END"]})
    write(out, "one_stop_string", T.GPT2Config(vocab_size=99), {"stop_strings": "###"})
    # Refused: transformers' validation, and a field mha does not implement.
    write(out, "refused_num_return_sequences", None,
          {"num_return_sequences": 2}, error="`num_return_sequences` different than 1 (got 2)", transformers_raises=True)
    write(out, "refused_more_sequences_than_beams", None,
          {"num_beams": 2, "num_return_sequences": 3},
          error="`num_return_sequences` (3) has to be smaller or equal to `num_beams` (2)",
          transformers_raises=True)
    write(out, "refused_max_new_tokens", None, {"max_new_tokens": 0},
          error="`max_new_tokens` must be greater than 0, but is 0", transformers_raises=True)
    write(out, "refused_early_stopping", None, {"early_stopping": "sometimes"},
          error="`early_stopping` must be a boolean or 'never'", transformers_raises=True)
    write(out, "refused_typical_p", None, {"typical_p": 0.9, "do_sample": True},
          error="generation field 'typical_p' is 0.9")
    write(out, "refused_temperature", None, {"do_sample": True, "temperature": 0.0},
          error="`temperature` (=0.0) has to be a strictly positive float")
    print(f"wrote 13 generation configs (transformers {T.__version__}) to {out}")


if __name__ == "__main__":
    main()
