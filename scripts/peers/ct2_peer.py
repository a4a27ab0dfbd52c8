"""CTranslate2: the seq2seq model (peers/seq2seq.py) converted by hand into a TransformerSpec.

Where each weight goes (ctranslate2/specs/transformer_spec.py,
attention_spec.py; CTranslate2's src/layers/transformer.cc and
attention.cc apply them):
  self-attention  linear[0] = in_proj [q; k; v], linear[1] = out_proj
  cross-attention linear[0] = in_proj's query rows, linear[1] = its key and
                  value rows, linear[2] = out_proj
  feed-forward    linear_0 = linear1, linear_1 = linear2
  norms           self_attention.layer_norm = norm1, (cross) attention.layer_norm
                  = norm2, ffn.layer_norm = the layer's last norm (norm2 in an
                  encoder layer, norm3 in a decoder layer); with pre_norm false
                  each is applied after its residual sum, as in nn.Transformer's
                  post-norm layers
  stacks          encoder/decoder layer_norm = nn.Transformer's encoder.norm and
                  decoder.norm
The Python spec declares a stack's final layer_norm only for pre-norm models,
while the C++ side applies it whenever its weights are present
(TransformerEncoder: `_output_norm`); so the spec is built pre-norm, filled,
then switched to pre_norm=False. Embeddings are not scaled
(scale_embeddings=False), the position table is the model's own
(position_encodings.encodings), LayerNorm eps 1e-5.
"""

import os
import types

import ctranslate2
import torch

from . import seq2seq

SPECIAL = ["<unk>", "<s>", "</s>"]  # ids UNK, BOS, EOS of peers/seq2seq.py


def vocabulary():
    """The token strings of ids 0 .. VOCAB - 1."""
    return SPECIAL + [f"t{i}" for i in range(len(SPECIAL), seq2seq.VOCAB)]


def _np(t):
    return t.detach().contiguous().numpy().copy()


def _linear(spec, weight, bias):
    spec.weight, spec.bias = _np(weight), _np(bias)


def _norm(spec, norm):
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _self_attention(spec, attn, norm):
    _linear(spec.linear[0], attn.in_proj_weight, attn.in_proj_bias)      # (3E, E): q, k, v
    _linear(spec.linear[1], attn.out_proj.weight, attn.out_proj.bias)
    _norm(spec.layer_norm, norm)


def _cross_attention(spec, attn, norm):
    e = attn.embed_dim
    _linear(spec.linear[0], attn.in_proj_weight[:e], attn.in_proj_bias[:e])   # q (E, E)
    _linear(spec.linear[1], attn.in_proj_weight[e:], attn.in_proj_bias[e:])   # k, v (2E, E)
    _linear(spec.linear[2], attn.out_proj.weight, attn.out_proj.bias)
    _norm(spec.layer_norm, norm)


def _ffn(spec, layer, norm):
    _linear(spec.linear_0, layer.linear1.weight, layer.linear1.bias)
    _linear(spec.linear_1, layer.linear2.weight, layer.linear2.bias)
    _norm(spec.layer_norm, norm)


def _inputs(spec, model, embeddings):
    embeddings.weight = _np(model.embed.weight)
    spec.scale_embeddings = False
    spec.position_encodings.encodings = _np(model.pos.weight)


def spec_of(model):
    """The TransformerSpec of the seq2seq model, vocabularies registered."""
    t = model.transformer
    spec = ctranslate2.specs.TransformerSpec.from_config(
        (len(t.encoder.layers), len(t.decoder.layers)), seq2seq.NHEAD, pre_norm=True)
    _inputs(spec.encoder, model, spec.encoder.embeddings[0])
    _inputs(spec.decoder, model, spec.decoder.embeddings)
    for s, layer in zip(spec.encoder.layer, t.encoder.layers):
        _self_attention(s.self_attention, layer.self_attn, layer.norm1)
        _ffn(s.ffn, layer, layer.norm2)
    for s, layer in zip(spec.decoder.layer, t.decoder.layers):
        _self_attention(s.self_attention, layer.self_attn, layer.norm1)
        _cross_attention(s.attention, layer.multihead_attn, layer.norm2)
        _ffn(s.ffn, layer, layer.norm3)
    _norm(spec.encoder.layer_norm, t.encoder.norm)
    _norm(spec.decoder.layer_norm, t.decoder.norm)
    _linear(spec.decoder.projection, model.out.weight, model.out.bias)
    spec.encoder.pre_norm = spec.decoder.pre_norm = False
    spec.config.layer_norm_epsilon = 1e-5
    spec.register_source_vocabulary(vocabulary())
    spec.register_target_vocabulary(vocabulary())
    return spec


def convert(model, directory):
    """Writes the float32 CTranslate2 model into `directory` (created if missing)."""
    spec = spec_of(model)
    spec.validate()
    spec.optimize(quantization=None)
    os.makedirs(directory, exist_ok=True)
    spec.save(directory)


def translator(directory, threads, compute_type):
    """A greedy decoder on `threads` threads: call (src (N, S) ids, steps) -> (N, 1 + steps) ids."""
    tr = ctranslate2.Translator(directory, device="cpu", compute_type=compute_type,
                                intra_threads=threads, inter_threads=1)
    tokens = vocabulary()
    ids = {tok: i for i, tok in enumerate(tokens)}

    def call(src, steps):
        batch = [[tokens[i] for i in row] for row in src.tolist()]
        results = tr.translate_batch(batch, beam_size=1, max_decoding_length=steps)
        out = [[seq2seq.BOS] + [ids[tok] for tok in r.hypotheses[0]] for r in results]
        return torch.tensor(out)
    return call


def convert_hf(directory, out, names, **special_tokens):
    """CTranslate2's TransformersConverter on the Hugging Face `directory`, into
    `out` (float32): token `names` (by id) and `special_tokens` (eos_token=...)
    stand in for the tokenizer, which a random model does not have."""
    vocab = {name: i for i, name in enumerate(names)}
    tokenizer = types.SimpleNamespace(get_vocab=lambda: vocab, special_tokens_map={},
                                      **special_tokens)

    class Converter(ctranslate2.converters.TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return tokenizer

    Converter(directory).convert(out, force=True)
    return out
