#!/usr/bin/env python3
"""Writes rotary embedding configs and transformers 5.23's rotary outputs on
them, for tests/rotary_embedding_test.cpp (CTest fixture rope_reference).

Each case is a config transformers builds (LlamaConfig, Phi3Config for a
partial rotation and longrope), saved with save_pretrained as config.json
(`legacy_linear`: a config.json written by hand in the older form,
`rope_scaling` with its `type` and a top-level `rope_theta`), and
`mha_rope_reference.safetensors`: the model's rotary embedding
(LlamaRotaryEmbedding, Phi3RotaryEmbedding) called on a sequence of position
batches in order (`positions_<i>` (N, L)), after each call its `cos_<i>`,
`sin_<i>` (N, L, rotary dim), `inv_freq_<i>` and `attention_scaling_<i>`;
`q` (N, H, L, head_dim) random and `q_embed_<i>`, apply_rotary_pos_emb's
rotated query. Dynamic's batches grow past max_position_embeddings, grow again
and come back below it; longrope's cross its original length both ways.

Usage: export_rope_reference.py --out DIR
"""

import argparse
import json
import os

import torch
import transformers as T
from safetensors.torch import save_file
from transformers.models.llama import modeling_llama
from transformers.models.phi3 import modeling_phi3

LLAMA = dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=1,
             intermediate_size=32, vocab_size=32, max_position_embeddings=128)
PHI3 = dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=1,
            intermediate_size=32, vocab_size=32, max_position_embeddings=256)
LONG = [1.0 + 0.25 * i for i in range(16)]
SHORT = [1.0 + 0.01 * i for i in range(16)]

# name -> (config class, config arguments, position lengths of the calls)
CASES = {
    "default": (T.LlamaConfig, dict(LLAMA), [16, 128]),
    "default_head_128": (T.LlamaConfig, dict(LLAMA, hidden_size=256, rope_parameters=dict(
        rope_type="default", rope_theta=500000.0)), [64]),
    "linear": (T.LlamaConfig, dict(LLAMA, rope_parameters=dict(
        rope_type="linear", rope_theta=10000.0, factor=4.0)), [16]),
    "dynamic": (T.LlamaConfig, dict(LLAMA, rope_parameters=dict(
        rope_type="dynamic", rope_theta=10000.0, factor=2.0)), [16, 200, 300, 250, 16]),
    "yarn": (T.LlamaConfig, dict(LLAMA, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=32)),
        [16, 128]),
    "yarn_mscale": (T.LlamaConfig, dict(LLAMA, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=8.0, original_max_position_embeddings=16,
        mscale=0.707, mscale_all_dim=1.0, beta_fast=16.0, beta_slow=2.0, truncate=False)), [40]),
    "llama3": (T.LlamaConfig, dict(LLAMA, hidden_size=256, rope_parameters=dict(
        rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
        high_freq_factor=4.0, original_max_position_embeddings=64)), [100]),
    "phi3_partial": (T.Phi3Config, dict(PHI3, partial_rotary_factor=0.5), [24]),
    "longrope": (T.Phi3Config, dict(PHI3, original_max_position_embeddings=64, rope_parameters=dict(
        rope_type="longrope", rope_theta=10000.0, long_factor=LONG, short_factor=SHORT)),
        [32, 100, 32]),
}


def rotary_of(config):
    """The model's own rotary embedding class for the config."""
    if isinstance(config, T.Phi3Config):
        return modeling_phi3.Phi3RotaryEmbedding(config), modeling_phi3.apply_rotary_pos_emb
    return modeling_llama.LlamaRotaryEmbedding(config), modeling_llama.apply_rotary_pos_emb


@torch.no_grad()
def write_case(directory, config, lengths):
    rotary, apply = rotary_of(config)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for i, length in enumerate(lengths):
        positions = torch.arange(length).repeat(2, 1)  # (2, L)
        positions[1] += 3  # the second row a few positions later
        q = torch.randn(2, config.num_attention_heads, length, head_dim, generator=generator)
        cos, sin = rotary(q, positions)
        tensors[f"positions_{i}"] = positions
        tensors[f"cos_{i}"], tensors[f"sin_{i}"] = cos.contiguous(), sin.contiguous()
        tensors[f"inv_freq_{i}"] = rotary.inv_freq.clone()
        tensors[f"attention_scaling_{i}"] = torch.tensor(float(rotary.attention_scaling),
                                                         dtype=torch.float64)
        tensors[f"q_{i}"] = q
        tensors[f"q_embed_{i}"] = apply(q, q, cos, sin)[0].contiguous()
    save_file(tensors, os.path.join(directory, "mha_rope_reference.safetensors"))


def write_legacy(directory):
    """A config.json in the older form: rope_scaling with `type`, rope_theta beside it."""
    values = dict(LLAMA, model_type="llama", rope_theta=5000.0,
                  rope_scaling={"type": "linear", "factor": 2.0})
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f)
    write_case(directory, T.LlamaConfig.from_pretrained(directory), [20])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for name, (config_class, arguments, lengths) in CASES.items():
        directory = os.path.join(args.out, name)
        os.makedirs(directory, exist_ok=True)
        config = config_class(**arguments)
        config.save_pretrained(directory)
        write_case(directory, config, lengths)
    legacy = os.path.join(args.out, "legacy_linear")
    os.makedirs(legacy, exist_ok=True)
    write_legacy(legacy)
    print(f"wrote {len(CASES) + 1} rotary embedding cases to {args.out}")


if __name__ == "__main__":
    main()
