#!/usr/bin/env python3
"""Writes small checkpoints shaped like those of five libraries' models that use
attention (their key names and nesting, tiny sizes), and a manifest of the
attention blocks each holds, for tests/attention_blocks_test.cpp (run by CTest
as a fixture; never committed). The libraries are not needed: their modules
are rebuilt here with the same attribute names.

  export_library_checkpoints.py --out DIR

DIR/manifest.json: {"<file>": {"library": ..., "keys": number of keys,
"blocks": [{"prefix", "naming" ("MultiheadAttention" or "qkv/proj"),
"embed_dim", "num_heads", "kdim", "vdim", "bias", "add_bias_kv", "packed",
"batch_first"}, ...] (in named_modules() order, from the modules' own
attributes), "io": {"prefix", "file"}}}. The io file holds the inputs and
Python's output of that block (query, key, value, output).
"""

import argparse
import collections
import json
import os

import torch
import torch.nn as nn
from export_test_checkpoints import TimmAttention, TimmBlock
from safetensors.torch import save_file

N = 2  # batch of the io files


def seq(*named):
    return nn.Sequential(collections.OrderedDict(named))


# ~~~ torchvision: vision_transformer.py (ViT-B/16) ~~~


class TvEncoderBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.self_attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden)
        # torchvision.ops.MLP: Linear, GELU, Dropout, Linear, Dropout
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Dropout(0.0),
                                 nn.Linear(2 * hidden, hidden), nn.Dropout(0.0))


class TvEncoder(nn.Module):
    def __init__(self, seq_length, layers, hidden, heads):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.randn(1, seq_length, hidden))
        self.layers = seq(*[(f"encoder_layer_{i}", TvEncoderBlock(hidden, heads))
                            for i in range(layers)])
        self.ln = nn.LayerNorm(hidden)


class TvVisionTransformer(nn.Module):
    def __init__(self, layers=12, hidden=16, heads=4, classes=10):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, hidden, kernel_size=4, stride=4)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.encoder = TvEncoder(5, layers, hidden, heads)
        self.heads = seq(("head", nn.Linear(hidden, classes)))


# ~~~ open_clip: transformer.py, model.py (ViT-B-32), coca_model.py (CoCa) ~~~


class OcResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, is_cross_attention=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ls_1 = nn.Identity()
        if is_cross_attention:
            self.ln_1_kv = nn.LayerNorm(d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = seq(("c_fc", nn.Linear(d_model, 4 * d_model)), ("gelu", nn.GELU()),
                       ("c_proj", nn.Linear(4 * d_model, d_model)))
        self.ls_2 = nn.Identity()


class OcTransformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.ModuleList([OcResidualAttentionBlock(width, heads)
                                        for _ in range(layers)])


class OcAttentionalPooler(nn.Module):
    def __init__(self, d_model, context_dim, n_head, n_queries):
        super().__init__()
        self.query = nn.Parameter(torch.randn(n_queries, d_model))
        self.attn = nn.MultiheadAttention(d_model, n_head, kdim=context_dim, vdim=context_dim,
                                          batch_first=True)
        self.ln_q = nn.LayerNorm(d_model)
        self.ln_k = nn.LayerNorm(context_dim)


class OcVisionTransformer(nn.Module):
    def __init__(self, width, layers, heads, output_dim, attentional_pool=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=4, stride=4, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(width))
        self.positional_embedding = nn.Parameter(torch.randn(5, width))
        self.patch_dropout = nn.Identity()
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = OcTransformer(width, layers, heads)
        if attentional_pool:
            self.attn_pool = OcAttentionalPooler(output_dim, width, n_head=2, n_queries=3)
            self.ln_post = nn.LayerNorm(output_dim)
            self.proj = nn.Parameter(torch.randn(output_dim, output_dim))
        else:
            self.ln_post = nn.LayerNorm(width)
            self.proj = nn.Parameter(torch.randn(width, output_dim))


class OcCLIP(nn.Module):
    """open_clip's CLIP: the text tower's modules sit at the top level."""

    def __init__(self, embed_dim=8, vision=(16, 4, 4), text=(8, 3, 2), vocab=20, context=6):
        super().__init__()
        self.visual = OcVisionTransformer(*vision, output_dim=embed_dim)
        self.transformer = OcTransformer(*text)
        self.token_embedding = nn.Embedding(vocab, text[0])
        self.positional_embedding = nn.Parameter(torch.randn(context, text[0]))
        self.ln_final = nn.LayerNorm(text[0])
        self.text_projection = nn.Parameter(torch.randn(text[0], embed_dim))
        self.register_buffer("attn_mask", torch.zeros(context, context), persistent=False)
        self.logit_scale = nn.Parameter(torch.ones([]))


class OcTextTransformer(nn.Module):
    def __init__(self, width, layers, heads, output_dim, vocab=20, context=6):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.randn(context, width))
        self.transformer = OcTransformer(width, layers, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, output_dim))
        self.cls_emb = nn.Parameter(torch.randn(width))


class OcMultimodalTransformer(nn.Module):
    def __init__(self, width, layers, heads, output_dim):
        super().__init__()
        self.resblocks = nn.ModuleList([OcResidualAttentionBlock(width, heads)
                                        for _ in range(layers)])
        self.cross_attn = nn.ModuleList([OcResidualAttentionBlock(width, heads, True)
                                         for _ in range(layers)])
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, output_dim))


class OcCoCa(nn.Module):
    def __init__(self, embed_dim=8):
        super().__init__()
        self.text = OcTextTransformer(8, 2, 2, embed_dim)
        self.visual = OcVisionTransformer(16, 2, 4, embed_dim, attentional_pool=True)
        self.text_decoder = OcMultimodalTransformer(8, 2, 2, 20)
        self.logit_scale = nn.Parameter(torch.ones([]))


# ~~~ torchaudio: models/conformer.py ~~~


class TaFeedForwardModule(nn.Module):
    def __init__(self, input_dim, hidden_dim):
        super().__init__()
        self.sequential = nn.Sequential(nn.LayerNorm(input_dim), nn.Linear(input_dim, hidden_dim),
                                        nn.SiLU(), nn.Dropout(0.0),
                                        nn.Linear(hidden_dim, input_dim), nn.Dropout(0.0))


class TaConvolutionModule(nn.Module):
    def __init__(self, input_dim, kernel_size):
        super().__init__()
        self.layer_norm = nn.LayerNorm(input_dim)
        self.sequential = nn.Sequential(
            nn.Conv1d(input_dim, 2 * input_dim, 1), nn.GLU(dim=1),
            nn.Conv1d(input_dim, input_dim, kernel_size, padding=(kernel_size - 1) // 2,
                      groups=input_dim),
            nn.BatchNorm1d(input_dim), nn.SiLU(), nn.Conv1d(input_dim, input_dim, 1),
            nn.Dropout(0.0))


class TaConformerLayer(nn.Module):
    def __init__(self, input_dim, ffn_dim, heads, kernel_size):
        super().__init__()
        self.ffn1 = TaFeedForwardModule(input_dim, ffn_dim)
        self.self_attn_layer_norm = nn.LayerNorm(input_dim)
        self.self_attn = nn.MultiheadAttention(input_dim, heads)
        self.self_attn_dropout = nn.Dropout(0.0)
        self.conv_module = TaConvolutionModule(input_dim, kernel_size)
        self.ffn2 = TaFeedForwardModule(input_dim, ffn_dim)
        self.final_layer_norm = nn.LayerNorm(input_dim)


class TaConformer(nn.Module):
    def __init__(self, input_dim=16, heads=4, ffn_dim=32, layers=4, kernel_size=3):
        super().__init__()
        self.conformer_layers = nn.ModuleList([TaConformerLayer(input_dim, ffn_dim, heads,
                                                                kernel_size)
                                               for _ in range(layers)])


# ~~~ timm: vision_transformer.py (qkv/proj attention, loaded with KeyMap::vit()) ~~~


class TimmPatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.norm = nn.Identity()


class TimmVisionTransformer(nn.Module):
    def __init__(self, dim=16, heads=4, depth=4, classes=10):
        super().__init__()
        self.patch_embed = TimmPatchEmbed(dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, 5, dim))
        self.blocks = nn.Sequential(*[TimmBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)


# ~~~ the files ~~~


def block_of(prefix, module):
    """The manifest row of an attention module, from its own attributes."""
    if isinstance(module, nn.MultiheadAttention):
        return dict(prefix=prefix, naming="MultiheadAttention", embed_dim=module.embed_dim,
                    num_heads=module.num_heads, kdim=module.kdim, vdim=module.vdim,
                    bias=module.in_proj_bias is not None, add_bias_kv=module.bias_k is not None,
                    packed=module._qkv_same_embed_dim, batch_first=module.batch_first)
    if isinstance(module, TimmAttention):
        dim = module.qkv.in_features
        return dict(prefix=prefix, naming="qkv/proj", embed_dim=dim, num_heads=module.num_heads,
                    kdim=dim, vdim=dim, bias=module.qkv.bias is not None, add_bias_kv=False,
                    packed=True, batch_first=True)
    return None


def blocks_of(model):
    rows = [block_of(f"{name}.", module) for name, module in model.named_modules()]
    return [row for row in rows if row is not None]


def io_of(model, row, out, name):
    """Runs the block `row` of `model` on random inputs; writes them and its output."""
    module = model.get_submodule(row["prefix"][:-1]).eval()
    L, S = 5, 7
    lead = (lambda t: (N, t)) if row["batch_first"] else (lambda t: (t, N))
    query = torch.randn(*lead(L), row["embed_dim"])
    if isinstance(module, TimmAttention):  # self-attention only
        key = value = query
        output = module(query)
    else:
        key = torch.randn(*lead(S), row["kdim"])
        value = torch.randn(*lead(S), row["vdim"])
        output = module(query, key, value, need_weights=False)[0]
    tensors = dict(query=query, key=key, value=value, output=output)
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, f"{out}/{name}")
    return {"prefix": row["prefix"], "file": name}


def export(out):
    models = [
        # (file, library, model, the block whose forward is checked)
        ("vit_b_16.pth", "torchvision", TvVisionTransformer(),
         "encoder.layers.encoder_layer_11.self_attention."),
        ("open_clip_vit_b_32.bin", "open_clip", OcCLIP(), "transformer.resblocks.1.attn."),
        ("coca_vit_b_32.safetensors", "open_clip", OcCoCa(), "visual.attn_pool.attn."),
        ("conformer.pt", "torchaudio", TaConformer(), "conformer_layers.2.self_attn."),
        ("timm_vit.safetensors", "timm", TimmVisionTransformer(), "blocks.3.attn."),
    ]
    manifest = {}
    for name, library, model, checked in models:
        model.eval()
        state = model.state_dict()
        if name.endswith(".safetensors"):
            save_file({k: v.contiguous() for k, v in state.items()}, f"{out}/{name}")
        else:
            torch.save(state, f"{out}/{name}")
        blocks = blocks_of(model)
        row = next(b for b in blocks if b["prefix"] == checked)
        manifest[name] = dict(library=library, keys=len(state), blocks=blocks,
                              io=io_of(model, row, out, name.split(".")[0] + ".io.safetensors"))
    with open(f"{out}/manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the checkpoints")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    with torch.no_grad():
        export(args.out)
    print(f"wrote the library-shaped checkpoints and manifest.json to {args.out}")


if __name__ == "__main__":
    main()
