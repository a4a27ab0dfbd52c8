#!/usr/bin/env python3
"""Writes the checkpoints that tests/state_dict_test.cpp loads, from the
installed torch, into a build-tree directory (run by CTest as a fixture; never
committed).

  export_test_checkpoints.py --out DIR
      Models saved whole with torch.save(model.state_dict()) (plus the inputs
      and Python's outputs of their attention submodules, as safetensors),
      the same weights as safetensors and TorchScript, every floating dtype,
      tied views, a checkpoint "saved from CUDA", plain and nested dicts.

  export_test_checkpoints.py --roundtrip CPP_PT CPP_SAFETENSORS OUT_PT OUT_SAFETENSORS
      Loads the files C++'s save_state_dict wrote (torch.load with
      weights_only=True, safetensors.torch.load_file), checks that both are
      dicts of the same tensors, and saves them back from Python
      (torch.save(OrderedDict), safetensors) for C++ to compare.
"""

import argparse
import collections
import os
import sys

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

E, H, L, S, N = 16, 4, 5, 7, 2  # small: the whole test runs in seconds


def io_file(path, **tensors):
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, path)


class TimmAttention(nn.Module):
    """timm's ViT Attention (qkv/proj naming), batch-first (B, N, C)."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(x)


class TimmBlock(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = TimmAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(collections.OrderedDict(fc1=nn.Linear(dim, 2 * dim), act=nn.GELU(),
                                                         fc2=nn.Linear(2 * dim, dim)))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(3, dim)  # timm's is a Conv2d; its name is what matters


class TinyViT(nn.Module):
    def __init__(self, dim, num_heads, depth):
        super().__init__()
        self.patch_embed = PatchEmbed(dim)
        self.blocks = nn.ModuleList([TimmBlock(dim, num_heads) for _ in range(depth)])


class Small(nn.Module):
    """The Python twin of the C++ model in state_dict_test.cpp."""

    def __init__(self):
        super().__init__()
        self.attn1 = nn.MultiheadAttention(E, H)
        self.attn2 = nn.MultiheadAttention(E, 2, kdim=6, vdim=3, add_bias_kv=True)
        self.head = nn.Linear(E, 3)

    def forward(self, x, memory_k, memory_v):
        y, _ = self.attn1(x, x, x)
        y, _ = self.attn2(y, memory_k, memory_v)
        return self.head(y)


def export_models(out):
    x = torch.randn(L, N, E)
    mem = torch.randn(S, N, E)

    # nn.TransformerEncoderLayer: prefix self_attn.
    enc = nn.TransformerEncoderLayer(E, H, dim_feedforward=32, dropout=0.0).eval()
    torch.save(enc.state_dict(), f"{out}/encoder_layer.pt")
    o, w = enc.self_attn(x, x, x)
    io_file(f"{out}/encoder_layer.io.safetensors", query=x, key=x, value=x, output=o, weights=w)
    save_file({k: v.contiguous() for k, v in enc.state_dict().items()},
              f"{out}/encoder_layer.safetensors")
    torch.jit.save(torch.jit.script(enc), f"{out}/encoder_layer.torchscript.pt")

    # nn.TransformerDecoderLayer, batch-first: self_attn. and multihead_attn.
    dec = nn.TransformerDecoderLayer(E, H, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    torch.save(dec.state_dict(), f"{out}/decoder_layer.pt")
    xb, memb = x.transpose(0, 1), mem.transpose(0, 1)
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    o1, w1 = dec.self_attn(xb, xb, xb, attn_mask=mask)
    io_file(f"{out}/decoder_layer.self_attn.io.safetensors", query=xb, key=xb, value=xb,
            attn_mask=mask, output=o1, weights=w1)
    o2, w2 = dec.multihead_attn(xb, memb, memb)
    io_file(f"{out}/decoder_layer.multihead_attn.io.safetensors", query=xb, key=memb, value=memb,
            output=o2, weights=w2)

    # nn.Transformer: a deep prefix.
    tr = nn.Transformer(E, H, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=32,
                        dropout=0.0).eval()
    torch.save(tr.state_dict(), f"{out}/transformer.pt")
    sub = tr.decoder.layers[1].multihead_attn
    o, w = sub(x, mem, mem)
    io_file(f"{out}/transformer.decoder.layers.1.multihead_attn.io.safetensors", query=x, key=mem,
            value=mem, output=o, weights=w)

    # A ViT block with timm's qkv/proj naming (batch-first).
    block = TimmBlock(E, H).eval()
    torch.save(block.state_dict(), f"{out}/vit_block.pt")
    xv = torch.randn(N, L, E)
    io_file(f"{out}/vit_block.attn.io.safetensors", query=xv, key=xv, value=xv,
            output=block.attn(xv))

    # A whole tiny ViT: patch_embed.proj must not be renamed by KeyMap::vit().
    vit = TinyViT(E, H, depth=2).eval()
    torch.save(vit.state_dict(), f"{out}/tiny_vit.pt")
    io_file(f"{out}/tiny_vit.blocks.1.attn.io.safetensors", query=xv, key=xv, value=xv,
            output=vit.blocks[1].attn(xv))

    # The C++ test's small model: two MultiheadAttention and a Linear.
    small = Small().eval()
    torch.save(small.state_dict(), f"{out}/small.pt")
    mk, mv = torch.randn(S, N, 6), torch.randn(S, N, 3)
    io_file(f"{out}/small.io.safetensors", x=x, memory_k=mk, memory_v=mv, output=small(x, mk, mv))


def patterned(shape, dtype, start=0):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float64).reshape(shape) / 8 + start).to(dtype)


def export_formats(out):
    # Every floating dtype (values exact in each), and some others.
    sd = collections.OrderedDict()
    for name, dtype in [("f32", torch.float32), ("f64", torch.float64), ("f16", torch.float16),
                        ("bf16", torch.bfloat16)]:
        sd[f"{name}.weight"] = patterned((3, 4), dtype)
    sd["i64.buffer"] = torch.arange(5, dtype=torch.int64)
    sd["bool.mask"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 3)
    torch.save(sd, f"{out}/dtypes.pt")
    save_file(dict(sd), f"{out}/dtypes.safetensors")

    # Tied weights: views (one non-contiguous) of one storage.
    base = patterned((4, 3), torch.float32)
    torch.save({"w": base, "rows": base[1:3], "t": base.t()}, f"{out}/tied.pt")

    # A state_dict of a MultiheadAttention as OrderedDict, plain dict, nested
    # checkpoint, parameters, and "saved from CUDA".
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(E, H)
    torch.save(mha.state_dict(), f"{out}/mha.pt")
    save_file(mha.state_dict(), f"{out}/mha.safetensors")
    torch.save(dict(mha.state_dict()), f"{out}/mha_plain_dict.pt")
    torch.save({"model": mha.state_dict(), "epoch": 3, "lr": 0.1, "note": "x"},
               f"{out}/mha_nested.pt")
    torch.save(dict(mha.named_parameters()), f"{out}/mha_parameters.pt")
    location_tag = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(mha.state_dict(), f"{out}/mha_from_cuda.pt")
    finally:
        torch.serialization.location_tag = location_tag
    # Python reads it only with map_location; check that the file says cuda.
    assert torch.load(f"{out}/mha_from_cuda.pt", map_location="cpu")["in_proj_weight"].equal(
        mha.in_proj_weight)


def roundtrip(cpp_pt, cpp_st, out_pt, out_st):
    a = torch.load(cpp_pt, weights_only=True)
    b = load_file(cpp_st)
    if type(a) is not dict or not all(isinstance(v, torch.Tensor) for v in a.values()):
        sys.exit(f"{cpp_pt}: torch.load gave {type(a).__name__}, not a dict of tensors")
    if a.keys() != b.keys():
        sys.exit(f"keys differ: {sorted(a)} vs {sorted(b)}")
    for k in a:
        if a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k]):
            sys.exit(f"tensor {k} differs between {cpp_pt} and {cpp_st}")
    torch.save(collections.OrderedDict(a), out_pt)
    save_file(b, out_st)
    print(f"roundtrip: {len(a)} tensors read by Python and saved back")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for the checkpoints")
    parser.add_argument("--roundtrip", nargs=4, metavar=("CPP_PT", "CPP_ST", "OUT_PT", "OUT_ST"))
    args = parser.parse_args()
    if args.roundtrip:
        roundtrip(*args.roundtrip)
        return
    if not args.out:
        parser.error("--out or --roundtrip is required")
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    export_models(args.out)
    export_formats(args.out)
    print(f"wrote the state_dict test checkpoints to {args.out}")


if __name__ == "__main__":
    main()
