#!/usr/bin/env python3
"""Write Python's numbers for mha's int8 modules (mha::quantize_dynamic).

Python has no int8 nn.MultiheadAttention (torch.ao's quantize_dynamic cannot
touch its in_proj_weight or out_proj), so each case runs Python's own float
module with every selected linear replaced, inside `torch.nn.functional.linear`
(which nn.Linear, F.multi_head_attention_forward and _in_projection_packed
call), by the recipe mha computes:

    values, scales = quantize(weight)          # per channel: max|w_row| / 127 (float64)
    packed = torch.ops.quantized.linear_prepack(qint8(values[rows], scales[rows]), None)
    y = torch.ops.quantized.linear_dynamic(x, packed, reduce_range) + bias

where `rows` are the rows Python's functional code slices (the packed
in_proj_weight whole as one (3E, E) linear, or its q / kv / k / v views). The
native fast path is off (it takes float weights only). The torch.ao recipe's
case instead runs `torch.ao.quantization.quantize_dynamic` itself on an
nn.Linear too: its int8 weight and scale must be mha's, its output within
rounding (it adds the bias inside FBGEMM's epilogue, mha after the GEMM).

Each case is one .pt file of tensors (mha::read_state_dict reads it):
"model.<name>" the float state_dict, "config.<field>" 0-d int64, "input.<name>",
"expected.output" (and "expected.weights") with int8 projections,
"float.output" the float32 module's output (for the error report),
"torch_ao.output" torch.ao's nn.quantized.dynamic.Linear's (its recipe), and
"int8.<name>" / "int8.<name>_scale" Python's int8 values and float64 scales
of every converted weight, under the module's state_dict names.

Usage: export_int8_reference.py --out DIR   # one .pt per case + manifest.txt
"""

import argparse
import contextlib
import os
import warnings
import zlib
from dataclasses import dataclass, fields
from typing import Optional

import torch
from torch import nn
import torch.nn.functional as F

KINDS = {"linear": 0, "mha": 1, "encoder_layer": 2, "decoder_layer": 3}
RECIPES = {"per_channel": 0, "torch_ao": 1}
EPS32 = torch.finfo(torch.float32).eps


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    recipe: str = "per_channel"
    attention: bool = True
    linears: bool = True
    e: int = 32
    heads: int = 4
    kdim: Optional[int] = None
    vdim: Optional[int] = None
    bias: bool = True
    batch_first: bool = False
    qkv: str = "qkv"              # mha: "qkv" (self), "kv" (cross), "none"
    key_padding_mask: bool = False
    attn_mask: bool = False       # mha: float (L, S); layers: causal
    need_weights: bool = False
    norm_first: bool = False
    gelu: bool = False
    ff: int = 64
    out_features: int = 40        # linear: (e) -> (out_features)
    tgt_len: int = 5
    src_len: int = 7
    batch: int = 3


CASES = (
    Case("LinearPerChannel", "linear"),
    Case("LinearTorchAo", "linear", recipe="torch_ao"),
    Case("MhaSelf", "mha", key_padding_mask=True),
    Case("MhaSelfWeights", "mha", need_weights=True, batch_first=True),
    Case("MhaCross", "mha", qkv="kv", attn_mask=True),
    Case("MhaDistinctSeparate", "mha", qkv="none", kdim=24, vdim=20, need_weights=True),
    Case("MhaNoBias", "mha", bias=False, key_padding_mask=True),
    Case("EncoderLayer", "encoder_layer", key_padding_mask=True),
    Case("EncoderLayerNormFirstGelu", "encoder_layer", norm_first=True, gelu=True,
         batch_first=True, attn_mask=True),
    Case("EncoderLayerAttentionOnly", "encoder_layer", linears=False),
    Case("EncoderLayerLinearsOnly", "encoder_layer", attention=False),
    Case("DecoderLayer", "decoder_layer", attn_mask=True, key_padding_mask=True),
    Case("DecoderLayerTorchAo", "decoder_layer", recipe="torch_ao", norm_first=True),
    # A served size: FBGEMM's packed GEMMs over K = 512 and 2048 and M = 16 rows.
    Case("EncoderLayerServed", "encoder_layer", e=512, heads=8, ff=2048, batch_first=True,
         key_padding_mask=True, src_len=8, tgt_len=8, batch=2),
    Case("DecoderLayerServed", "decoder_layer", e=512, heads=8, ff=2048, attn_mask=True,
         tgt_len=8, src_len=16, batch=2),
)


def quantize(weight, recipe):
    """mha's recipes (mha/quantization.h): int8 values and float64 scales."""
    if recipe == "torch_ao":
        # MinMaxObserver(dtype=qint8, qscheme=per_tensor_symmetric), in float32
        min_val, max_val = torch.aminmax(weight)
        zero = torch.zeros_like(min_val)
        max_pos = torch.maximum(-torch.minimum(min_val, zero), torch.maximum(max_val, zero))
        scale = torch.maximum(max_pos / ((127 - -128) / 2), torch.tensor(EPS32))
        q = torch.quantize_per_tensor(weight, float(scale), 0, torch.qint8)
        return q.int_repr(), torch.tensor(float(scale), dtype=torch.float64)
    scales = (weight.abs().amax(1).double() / 127).clamp_min(EPS32)
    zero_points = torch.zeros_like(scales, dtype=torch.long)
    return torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8).int_repr(), scales


def qint8(values, scales):
    if scales.dim() == 0:
        return torch._make_per_tensor_quantized_tensor(values.contiguous(), float(scales), 0)
    return torch._make_per_channel_quantized_tensor(
        values.contiguous(), scales.contiguous(), torch.zeros_like(scales, dtype=torch.long), 0)


class Int8Linears:
    """The selected weights' int8 GEMMs, found by the rows Python passes to F.linear."""

    def __init__(self, module, case):
        self.reduce_range = case.recipe == "torch_ao"
        self.recipe = case.recipe
        self.packs = {}
        self.int8 = {}
        out_projs = set()
        for name, mod in module.named_modules():
            prefix = name + "." if name else ""
            if isinstance(mod, nn.MultiheadAttention):
                out_projs.add(id(mod.out_proj))
                if not case.attention:
                    continue
                if mod._qkv_same_embed_dim:
                    self.add(prefix + "in_proj_weight", mod.in_proj_weight, parts=3)
                else:
                    for p in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                        self.add(prefix + p, getattr(mod, p))
                self.add(prefix + "out_proj.weight", mod.out_proj.weight)
        for name, mod in module.named_modules():
            if isinstance(mod, nn.Linear) and id(mod) not in out_projs and case.linears:
                self.add((name + "." if name else "") + "weight", mod.weight)

    def add(self, name, weight, parts=1):
        values, scales = quantize(weight.detach(), self.recipe)
        self.int8[name] = (values, scales)
        rows = weight.shape[0] // parts
        spans = [(0, weight.shape[0])]
        if parts == 3:  # Python's chunk(3) and split([E, 2E]) of in_proj_weight
            spans += [(0, rows), (rows, 2 * rows), (2 * rows, 3 * rows), (rows, 3 * rows)]
        for begin, end in spans:
            view = weight[begin:end]
            part_scales = scales if scales.dim() == 0 else scales[begin:end]
            packed = torch.ops.quantized.linear_prepack(qint8(values[begin:end], part_scales), None)
            self.packs[(view.data_ptr(), tuple(view.shape))] = packed

    @contextlib.contextmanager
    def patched(self):
        original = F.linear

        def linear(x, weight, bias=None):
            packed = self.packs.get((weight.data_ptr(), tuple(weight.shape)))
            if packed is None:
                return original(x, weight, bias)
            rows = x.reshape(-1, x.shape[-1]).contiguous()
            y = torch.ops.quantized.linear_dynamic(rows, packed, self.reduce_range)
            y = y.view(*x.shape[:-1], y.shape[-1])
            return y + bias if bias is not None else y

        F.linear = linear
        try:
            yield
        finally:
            F.linear = original


def build(case, gen):
    if case.kind == "linear":
        module = nn.Linear(case.e, case.out_features, bias=case.bias)
    elif case.kind == "mha":
        module = nn.MultiheadAttention(case.e, case.heads, bias=case.bias, kdim=case.kdim,
                                       vdim=case.vdim, batch_first=case.batch_first)
    else:
        layer = (nn.TransformerEncoderLayer if case.kind == "encoder_layer"
                 else nn.TransformerDecoderLayer)
        module = layer(case.e, case.heads, case.ff, dropout=0.0, bias=case.bias,
                       activation="gelu" if case.gelu else "relu",
                       batch_first=case.batch_first, norm_first=case.norm_first)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * p.shape[-1] ** -0.5)
    return module.eval()


def make_inputs(case, gen):
    def seq(length, features):
        shape = (case.batch, length, features) if case.batch_first else (length, case.batch, features)
        return torch.randn(shape, generator=gen)

    def padding(length):
        mask = torch.zeros(case.batch, length, dtype=torch.bool)
        mask[0, -2:] = True
        return mask

    if case.kind == "linear":
        return {"query": torch.randn(case.batch, case.tgt_len, case.e, generator=gen)}
    inputs = {"query": seq(case.tgt_len, case.e)}
    if case.kind == "mha":
        if case.qkv == "kv":
            inputs["key"] = seq(case.src_len, case.e)
        elif case.qkv == "none":
            inputs["key"] = seq(case.src_len, case.kdim or case.e)
            inputs["value"] = seq(case.src_len, case.vdim or case.e)
        source_len = case.tgt_len if case.qkv == "qkv" else case.src_len
        if case.key_padding_mask:
            inputs["key_padding_mask"] = padding(source_len)
        if case.attn_mask:
            inputs["attn_mask"] = torch.randn(case.tgt_len, source_len, generator=gen)
        return inputs
    if case.kind == "decoder_layer":
        inputs["memory"] = seq(case.src_len, case.e)
        if case.key_padding_mask:
            inputs["memory_key_padding_mask"] = padding(case.src_len)
    elif case.key_padding_mask:
        inputs["key_padding_mask"] = padding(case.tgt_len)
    if case.attn_mask:
        inputs["attn_mask"] = nn.Transformer.generate_square_subsequent_mask(case.tgt_len)
    return inputs


def run(case, module, inputs):
    """(output, weights or None) of the case's call."""
    q = inputs["query"]
    if case.kind == "linear":
        return module(q), None
    if case.kind == "mha":
        k = inputs.get("key", q)
        v = inputs.get("value", k)
        return module(q, k, v, key_padding_mask=inputs.get("key_padding_mask"),
                      need_weights=case.need_weights, attn_mask=inputs.get("attn_mask"))
    if case.kind == "encoder_layer":
        return module(q, src_mask=inputs.get("attn_mask"),
                      src_key_padding_mask=inputs.get("key_padding_mask")), None
    return module(q, inputs["memory"], tgt_mask=inputs.get("attn_mask"),
                  memory_key_padding_mask=inputs.get("memory_key_padding_mask")), None


def torch_ao_linear(module, x):
    """torch.ao's own int8 nn.Linear: its output and int8 weight."""
    quantized = torch.ao.quantization.quantize_dynamic(
        nn.Sequential(module), {nn.Linear}, dtype=torch.qint8)
    weight = quantized[0].weight()
    return quantized(x), (weight.int_repr(), torch.tensor(weight.q_scale(), dtype=torch.float64))


def run_case(case):
    gen = torch.Generator().manual_seed(zlib.crc32(case.name.encode()))
    module = build(case, gen)
    inputs = make_inputs(case, gen)
    result = {"model." + k: v.detach().clone() for k, v in module.state_dict().items()}
    for f in fields(Case):
        value = getattr(case, f.name)
        if f.name in ("name",):
            continue
        if f.name == "kind":
            value = KINDS[value]
        elif f.name == "recipe":
            value = RECIPES[value]
        elif f.name == "qkv":
            value = {"qkv": 0, "kv": 1, "none": 2}[value]
        elif value is None:
            value = -1
        result["config." + f.name] = torch.tensor(int(value))
    result.update({"input." + k: v for k, v in inputs.items()})
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        result["float.output"] = run(case, module, inputs)[0]
        linears = Int8Linears(module, case)
        with linears.patched():
            output, weights = run(case, module, inputs)
        int8s = linears.int8
        if case.kind == "linear" and case.recipe == "torch_ao":
            result["torch_ao.output"], int8s = torch_ao_linear(module, inputs["query"])
            int8s = {"weight": int8s}
    result["expected.output"] = output
    if weights is not None:
        result["expected.weights"] = weights
    for name, (values, scales) in int8s.items():
        result["int8." + name] = values
        result["int8." + name + "_scale"] = scales
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # torch.ao.quantization and quantized tensors are deprecated in 2.13 (pytorch#184982)
    warnings.simplefilter("ignore", UserWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    for case in CASES:
        torch.save(run_case(case), os.path.join(args.out, case.name + ".pt"))
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("".join(case.name + "\n" for case in CASES))


if __name__ == "__main__":
    main()
