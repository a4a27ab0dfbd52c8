#!/usr/bin/env python3
"""Writes small random Hugging Face models and transformers' own outputs for the
C++ tests of mha/hugging_face.h and the examples hf_encoder and hf_seq2seq.

Each model is built from a config with a fixed seed (no download), saved as
transformers publishes checkpoints (save_pretrained: config.json and
model.safetensors, sharded for one, a pytorch_model.bin for one, float16 and
bfloat16 for one each), and run in float32, eval, with padding masks. Each
directory gets `mha_reference.pt`, a plain dict of CPU tensors:
- encoders: `input_ids` or `pixel_values`, `attention_mask`, `embeddings`
  (hidden_states[0]) and `last_hidden_state`;
- seq2seq models: `input_ids`, `attention_mask`, `decoder_input_ids`,
  `encoder_embeddings`, `encoder_last_hidden_state`, `decoder_embeddings`,
  `decoder_last_hidden_state` (teacher-forced), and for the generating model
  `generated` (greedy `generate`, padded with -1).
A model saved in float16 or bfloat16 is run in float32 from the rounded weights.

Usage: export_hf_reference.py --out DIR
"""

import argparse
import os
import warnings

import torch
import transformers as T

MAGIC = 20261202
SEED = 0


def tokens(batch, length, vocab, lengths, pad):
    """Random token ids (never `pad`) and a right-padded attention mask."""
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(3, vocab - 2, (batch, length), generator=g)
    mask = torch.zeros(batch, length, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
        ids[i, n:] = pad
    return ids, mask


def save(model, directory, dtype=None, shard=None, bin_file=False):
    """Saves as published; returns the float32 model holding the saved values."""
    os.makedirs(directory, exist_ok=True)
    if dtype is not None:
        model = model.to(dtype)
    if bin_file:
        model.config.save_pretrained(directory)
        torch.save(model.state_dict(), os.path.join(directory, "pytorch_model.bin"))
    elif shard is not None:
        model.save_pretrained(directory, max_shard_size=shard)
    else:
        model.save_pretrained(directory)
    return model.float().eval()


def write(directory, values):
    values = {k: v.detach().contiguous() for k, v in values.items()}
    values["magic"] = torch.tensor(MAGIC)
    torch.save(values, os.path.join(directory, "mha_reference.pt"))


@torch.no_grad()
def text_encoder(out, name, config, **save_args):
    torch.manual_seed(SEED)
    model = save(T.AutoModel.from_config(config).eval(), os.path.join(out, name), **save_args)
    pad = config.pad_token_id if config.pad_token_id is not None else 0
    ids, mask = tokens(2, 7, config.vocab_size, [7, 4], pad)
    result = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    write(os.path.join(out, name), {"input_ids": ids, "attention_mask": mask,
                                    "embeddings": result.hidden_states[0],
                                    "last_hidden_state": result.last_hidden_state})


@torch.no_grad()
def vision_encoder(out, name, config, **save_args):
    torch.manual_seed(SEED)
    model = save(T.AutoModel.from_config(config, add_pooling_layer=False).eval()
                 if config.model_type == "vit" else T.AutoModel.from_config(config).eval(),
                 os.path.join(out, name), **save_args)
    pixels = torch.randn(2, config.num_channels, config.image_size, config.image_size,
                         generator=torch.Generator().manual_seed(SEED + 1))
    result = model(pixel_values=pixels, output_hidden_states=True)
    write(os.path.join(out, name), {"pixel_values": pixels,
                                    "embeddings": result.hidden_states[0],
                                    "last_hidden_state": result.last_hidden_state})


@torch.no_grad()
def seq2seq(out, name, config, model_class, generate=False, **save_args):
    torch.manual_seed(SEED)
    directory = os.path.join(out, name)
    model = save(model_class(config).eval(), directory, **save_args)
    ids, mask = tokens(2, 6, config.vocab_size, [6, 3], config.pad_token_id)
    g = torch.Generator().manual_seed(SEED + 2)
    decoder_ids = torch.randint(3, config.vocab_size - 2, (2, 5), generator=g)
    decoder_ids[:, 0] = config.decoder_start_token_id
    result = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                   output_hidden_states=True)
    values = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": decoder_ids,
              "encoder_embeddings": result.encoder_hidden_states[0],
              "encoder_last_hidden_state": result.encoder_last_hidden_state,
              "decoder_embeddings": result.decoder_hidden_states[0],
              "decoder_last_hidden_state": (result.last_hidden_state
                                            if hasattr(result, "last_hidden_state")
                                            else result.decoder_hidden_states[-1])}
    if generate:
        model.generation_config.min_new_tokens = 2
        model.generation_config.max_new_tokens = 9
        model.generation_config.bad_words_ids = [[config.pad_token_id]]  # as Marian's configs
        model.generation_config.save_pretrained(directory)
        generated = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                   num_beams=1)
        values["generated"] = generated.masked_fill(generated == config.pad_token_id, -1)
        # The first token is the decoder start, which is also the pad token.
        values["generated"][:, 0] = config.decoder_start_token_id
    write(directory, values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    warnings.filterwarnings("ignore")
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
    text = dict(vocab_size=99, max_position_embeddings=32, **small)
    text_encoder(out, "bert", T.BertConfig(**text))
    text_encoder(out, "bert_float16", T.BertConfig(hidden_act="gelu_new", **text),
                 dtype=torch.float16)
    text_encoder(out, "roberta", T.RobertaConfig(pad_token_id=1, **text), shard="20KB")
    text_encoder(out, "distilbert",
                 T.DistilBertConfig(vocab_size=99, max_position_embeddings=32, dim=32, n_layers=2,
                                    n_heads=4, hidden_dim=48, activation="relu"),
                 bin_file=True)
    vision = dict(image_size=16, patch_size=4, num_channels=3, **small)
    vision_encoder(out, "vit", T.ViTConfig(**vision), shard="20KB")
    vision_encoder(out, "deit_bfloat16", T.DeiTConfig(**vision), dtype=torch.bfloat16)

    s2s = dict(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
               decoder_ffn_dim=40, max_position_embeddings=32)
    seq2seq(out, "bart", T.BartConfig(**s2s), T.BartModel)
    seq2seq(out, "mbart", T.MBartConfig(scale_embedding=True, decoder_start_token_id=2, **s2s), T.MBartModel)
    # init_std 0.5: rows that decode differently; eos 38: a token this model
    # picks at once, so min_new_tokens, the end of one row (then padding) and
    # the forced end of the other are all exercised.
    seq2seq(out, "marian",
            T.MarianConfig(activation_function="swish", scale_embedding=True, init_std=0.5,
                           pad_token_id=98, decoder_start_token_id=98, eos_token_id=38,
                           forced_eos_token_id=38, **s2s),
            T.MarianMTModel, generate=True)
    print(f"wrote 9 Hugging Face models and transformers {T.__version__}'s outputs to {out}")


if __name__ == "__main__":
    main()
