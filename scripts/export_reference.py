#!/usr/bin/env python3
"""Write reference cases of torch.nn.MultiheadAttention for mha's parity tests.

Each case builds the Python module with seeded random weights, inputs and masks,
runs forward (and, unless the case runs without grad, a backward pass with a
seeded random cotangent), and saves everything the C++ side needs as a plain
dict of plain values and CPU tensors (`torch.save`; C++ reads it with
`torch::pickle_load`):

    {"magic": 20261129, "version": 2, "name": str,
     "options": {embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn,
                 kdim, vdim, batch_first},
     "call": {need_weights, average_attn_weights, is_causal, training, grad,
              qkv_identity ("qkv" | "kv" | "none"), dtype, forward_seed,
              python_kernel ("native": torch._native_multi_head_attention ran,
                             else "functional")},
     "init_seed": int, "init_state_dict": {...}   # float32 init after manual_seed
     "state_dict_keys": [...], "state_dict": {...},
     "inputs": {query, key, value[, key_padding_mask][, attn_mask]},
     "expected": {output[, weights]},            # {} when Python raised:
     "expected_error": str,                      # only then: Python's exception
     "grads": {"query"|"key"|"value": ..., "param.<name>": ...},
     "timing": {"python_median_us": float,        # --bundle only
                "python_threads": int}}

Usage:
    export_reference.py --out DIR            # every case of the matrix + manifest.txt
    export_reference.py --list               # the case names
    export_reference.py --bundle FILE [--embed-dim 512 --num-heads 8 --seq-len 128 --batch 4
                                       --threads T ...]
"""

import argparse
import contextlib
import dataclasses
import os
import sys
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Optional

import torch
from torch import nn

MAGIC = 20261129
VERSION = 2


@dataclass(frozen=True)
class Case:
    name: str
    embed_dim: int = 8
    num_heads: int = 2
    kdim: Optional[int] = None
    vdim: Optional[int] = None
    bias: bool = True
    add_bias_kv: bool = False
    add_zero_attn: bool = False
    batch_first: bool = False
    dropout: float = 0.0
    tgt_len: int = 4
    src_len: int = 6
    batch: Optional[int] = 3          # None: unbatched input
    qkv: str = "none"                 # "qkv": q is k is v; "kv": k is v; "none": all distinct
    key_padding_mask: Optional[str] = None  # None | "bool" | "float"
    attn_mask: Optional[str] = None   # None | "bool2d" | "float2d" | "bool3d" | "float3d" | "causal"
    #                                   | "causal_wrong_shape" ((L + 1, S + 1): the hint may drop it)
    fully_masked: bool = False        # one query row (or one batch) fully masked
    is_causal: bool = False
    need_weights: bool = True
    average_attn_weights: bool = True
    training: bool = False
    grad: bool = True                 # False: forward under no_grad (fast-path eligible)
    dtype: str = "float32"            # also "float64", "float16", "bfloat16"
    nonfinite: Optional[str] = None   # None | "nan_query" | "inf_key" | "neginf_value"
    mask_dtype: Optional[str] = None  # float masks of this dtype instead of `dtype`
    weight_scale: float = 0.5         # std of the randomised weights and biases


def case_matrix():
    """At least 80 cases: every option alone and in pairs, every mask kind."""
    cases = []

    def add(name, **kw):
        # self-attention needs L == S and kdim == vdim == embed_dim
        if kw.get("qkv") == "qkv":
            kw.setdefault("src_len", kw.get("tgt_len", 4))
        for need_weights in (True, False):
            if "need_weights" in kw and kw["need_weights"] != need_weights:
                continue
            suffix = "" if "need_weights" in kw else ("W" if need_weights else "NoW")
            cases.append(Case(name=name + suffix, **{"need_weights": need_weights, **kw}))

    # Attention kinds and layouts.
    add("Self", qkv="qkv")
    add("Cross")
    add("KeyIsValue", qkv="kv")
    add("BatchFirstSelf", qkv="qkv", batch_first=True)
    add("BatchFirstCross", batch_first=True)
    add("BatchFirstKeyIsValue", batch_first=True, qkv="kv")
    add("UnbatchedSelf", qkv="qkv", batch=None)
    add("UnbatchedCross", batch=None)
    add("UnbatchedBatchFirstIgnored", batch=None, batch_first=True)
    # Options alone.
    add("NoBias", bias=False)
    add("BiasKv", add_bias_kv=True)
    add("ZeroAttn", add_zero_attn=True)
    add("BiasKvZeroAttn", add_bias_kv=True, add_zero_attn=True)
    add("KdimVdimEqual", kdim=5, vdim=5)
    add("KdimVdimDiffer", kdim=5, vdim=7)
    add("KdimIsEmbed", kdim=8, vdim=6)
    add("OneHead", num_heads=1)
    add("E64H8", embed_dim=64, num_heads=8, qkv="qkv", tgt_len=5)
    add("E96H8", embed_dim=96, num_heads=8)
    add("E64H2", embed_dim=64, num_heads=2, qkv="kv")
    add("PerHeadWeights", average_attn_weights=False, need_weights=True)
    add("Float64", dtype="float64")
    add("Float64Self", dtype="float64", qkv="qkv", batch_first=True)
    # Masks alone and combined.
    add("KpmBool", key_padding_mask="bool")
    add("KpmFloat", key_padding_mask="float")
    add("MaskBool2d", attn_mask="bool2d")
    add("MaskFloat2d", attn_mask="float2d")
    add("MaskBool3d", attn_mask="bool3d")
    add("MaskFloat3d", attn_mask="float3d")
    add("KpmBoolMaskBool", key_padding_mask="bool", attn_mask="bool2d")
    add("KpmFloatMaskFloat3d", key_padding_mask="float", attn_mask="float3d")
    add("KpmBoolMaskFloatMismatch", key_padding_mask="bool", attn_mask="float2d")
    add("UnbatchedKpmMask3d", batch=None, key_padding_mask="bool", attn_mask="bool3d")
    add("UnbatchedMaskFloat2d", batch=None, attn_mask="float2d", qkv="qkv")
    # Pairs of options with masks.
    add("BiasKvKpmMask", add_bias_kv=True, key_padding_mask="bool", attn_mask="bool3d")
    add("ZeroAttnKpmMask", add_zero_attn=True, key_padding_mask="float", attn_mask="float2d")
    add("NoBiasKdim", bias=False, kdim=5, vdim=7)
    add("BatchFirstKdimMask", batch_first=True, kdim=6, vdim=6, attn_mask="bool2d")
    add("UnbatchedBiasKvZeroAttn", batch=None, add_bias_kv=True, add_zero_attn=True)
    add("Float64MasksBiasKv", dtype="float64", add_bias_kv=True, key_padding_mask="bool",
        attn_mask="float3d")
    add("PerHeadMask3dBatchFirst", average_attn_weights=False, need_weights=True,
        attn_mask="float3d", batch_first=True)
    # is_causal: the hint with its mask; kpm turns the hint off.
    add("Causal", qkv="qkv", attn_mask="causal", is_causal=True)
    add("CausalKpm", qkv="qkv", attn_mask="causal", is_causal=True, key_padding_mask="bool")
    add("CausalBatchFirstCross", batch_first=True, tgt_len=5, src_len=5, attn_mask="causal",
        is_causal=True)
    # A causal mask of the wrong shape: without weights and key padding Python's slow path
    # drops it before checking its shape (a result); with weights it raises.
    add("CausalWrongShapeMask", qkv="qkv", attn_mask="causal_wrong_shape", is_causal=True)
    # Fully masked rows: NaN with weights, zeros through SDPA.
    add("FullyMaskedKpm", key_padding_mask="bool", fully_masked=True)
    add("FullyMaskedMask", attn_mask="bool2d", fully_masked=True)
    # Training: dropout off and on (seeded; ATen's CPU generator is shared with Python).
    add("TrainNoDropout", training=True)
    add("TrainDropout", training=True, dropout=0.3)
    add("TrainDropoutSelfBatchFirst", training=True, dropout=0.5, qkv="qkv", batch_first=True)
    # Python's native fast path: eval, no grad, batch_first, self-attention, even heads.
    fast = dict(qkv="qkv", batch_first=True, grad=False, num_heads=2, tgt_len=5)
    add("Fast", **fast)
    add("FastKpm", key_padding_mask="bool", **fast)
    add("FastMask2d", attn_mask="bool2d", **fast)
    add("FastMask3d", attn_mask="bool3d", **fast)
    add("FastKpmMask", key_padding_mask="bool", attn_mask="bool2d", **fast)
    add("FastPerHead", average_attn_weights=False, need_weights=True, **fast)
    add("FastE64H8Float64", embed_dim=64, num_heads=8, dtype="float64",
        **{k: v for k, v in fast.items() if k != "num_heads"})
    add("FastFullyMaskedKpm", key_padding_mask="bool", fully_masked=True, **fast)
    add("FastFloatMaskFallsBack", key_padding_mask="float", **fast)
    add("FastOddHeadsFallsBack", **{**fast, "num_heads": 1})
    add("FastNoBiasFallsBack", bias=False, **fast)
    add("FastCausalHintIgnored", is_causal=True, **fast)  # Python's fast path ignores the hint
    # ... but its native op raises on a causal mask of the wrong shape.
    add("FastCausalWrongShapeMask", attn_mask="causal_wrong_shape", is_causal=True, **fast)
    # E = 512, one sequence of 16: mha projects on prepacked weights (oneDNN) there.
    # Weights of std 1/sqrt(E), as Python's init gives: at std 0.5 the logits are
    # of order 1e3 and any change of summation order moves the softmax visibly.
    packed = {**fast, "embed_dim": 512, "num_heads": 8, "tgt_len": 16, "batch": 1,
              "weight_scale": 512 ** -0.5}
    add("FastE512PackedWeights", **packed)
    add("FastE512PackedWeightsKpm", key_padding_mask="bool", **packed)
    add("NoGradSeqFirst", qkv="qkv", grad=False)
    # Sequence-first (nn.MultiheadAttention's default layout) inference without weights at
    # E = 512: Python's functional steps, which mha computes without their copies
    # (src/attention/call_plan.h, kSequenceFirst); non-zero random biases.
    seq_first = {"qkv": "qkv", "grad": False, "need_weights": False, "embed_dim": 512,
                 "num_heads": 8, "weight_scale": 512 ** -0.5}
    short, long = {"tgt_len": 16, "batch": 1}, {"tgt_len": 128, "batch": 8}
    add("SeqFirstE512N1L16", **seq_first, **short)
    add("SeqFirstE512N1L16Kpm", key_padding_mask="bool", **seq_first, **short)
    add("SeqFirstE512N1L16Mask2d", attn_mask="bool2d", **seq_first, **short)
    add("SeqFirstE512N1L16Mask3d", attn_mask="bool3d", **seq_first, **short)
    add("SeqFirstE512N1L16Causal", attn_mask="causal", is_causal=True, **seq_first, **short)
    add("SeqFirstE512N1L16CausalKpm", attn_mask="causal", is_causal=True,
        key_padding_mask="bool", **seq_first, **short)
    add("SeqFirstE512N1L16FullyMaskedKpm", key_padding_mask="bool", fully_masked=True,
        **seq_first, **short)
    add("SeqFirstE512N8L128", **seq_first, **long)
    add("SeqFirstE512N8L128KpmMask", key_padding_mask="bool", attn_mask="bool2d",
        **seq_first, **long)
    add("SeqFirstE512N8L128Causal", attn_mask="causal", is_causal=True, **seq_first, **long)
    edge_cases(add, fast)
    return cases


def edge_cases(add, fast):
    """Empty sizes, NaN/Inf inputs, fully masked rows on every path, half precision."""
    # Empty: L = 0, S = 0, N = 0, on the weights, SDPA and native fast paths.
    add("EmptyTarget", tgt_len=0)
    add("EmptySource", src_len=0)
    add("EmptyBatch", batch=0)
    add("EmptyTargetSelf", qkv="qkv", tgt_len=0)
    add("EmptySourceKpmMask", src_len=0, key_padding_mask="bool", attn_mask="float2d")
    add("EmptySourceBiasKvZeroAttn", src_len=0, add_bias_kv=True, add_zero_attn=True)
    add("EmptyBatchMask3d", batch=0, attn_mask="bool3d", key_padding_mask="float")
    add("UnbatchedEmptySource", batch=None, src_len=0)
    add("UnbatchedEmptyTarget", batch=None, tgt_len=0)
    add("FastEmptyBatch", **{**fast, "batch": 0})
    add("FastEmptySequence", **{**fast, "tgt_len": 0})
    add("FastEmptyBatchKpm", key_padding_mask="bool", **{**fast, "batch": 0})
    # NaN and Inf in the inputs.
    add("NanQuery", nonfinite="nan_query")
    add("InfKey", nonfinite="inf_key")
    add("NegInfValue", nonfinite="neginf_value", key_padding_mask="bool")
    add("NanQuerySelfBatchFirst", nonfinite="nan_query", qkv="qkv", batch_first=True)
    add("FastNanQuery", nonfinite="nan_query", **fast)
    add("FastInfQueryKpm", nonfinite="inf_key", key_padding_mask="bool", **fast)
    add("UnbatchedInfKey", batch=None, nonfinite="inf_key")
    # Fully masked rows: the paths not covered above.
    add("FullyMaskedMask3d", attn_mask="bool3d", fully_masked=True)
    add("FullyMaskedKpmBoolMask", key_padding_mask="bool", attn_mask="bool2d", fully_masked=True)
    add("FullyMaskedBiasKv", key_padding_mask="bool", add_bias_kv=True, fully_masked=True)
    add("FullyMaskedZeroAttn", attn_mask="bool2d", add_zero_attn=True, fully_masked=True)
    add("UnbatchedFullyMaskedKpm", batch=None, key_padding_mask="bool", fully_masked=True)
    add("FullyMaskedCausalKpm", qkv="qkv", attn_mask="causal", is_causal=True,
        key_padding_mask="bool", fully_masked=True)
    add("FastFullyMaskedMask", attn_mask="bool2d", fully_masked=True, **fast)
    add("FastFullyMaskedMask3d", attn_mask="bool3d", fully_masked=True, **fast)
    add("FastFullyMaskedKpmMask", key_padding_mask="bool", attn_mask="bool2d",
        fully_masked=True, **fast)
    # Long enough for mha's fused inference path (src/attention/call_plan.h, kFusedMinLength).
    add("FastLongFullyMaskedKpm", key_padding_mask="bool", fully_masked=True,
        need_weights=False, **{**fast, "tgt_len": 256})
    # Long enough for mha's head-by-head weights kernel (src/attention/call_plan.h, kByHeadMinLength).
    long_weights = {**fast, "tgt_len": 128, "need_weights": True}
    add("FastLongWeights", **long_weights)
    add("FastLongWeightsKpm", key_padding_mask="bool", **long_weights)
    add("FastLongWeightsCausal", attn_mask="causal", is_causal=True, **long_weights)
    add("FastLongWeightsKpmMask", key_padding_mask="bool", attn_mask="bool2d", **long_weights)
    add("FastLongWeightsMask3d", attn_mask="bool3d", **long_weights)
    add("FastLongWeightsPerHead", key_padding_mask="bool", average_attn_weights=False,
        **long_weights)
    add("FastLongWeightsFullyMaskedKpm", key_padding_mask="bool", fully_masked=True,
        **long_weights)
    add("FastLongWeightsFullyMaskedMask", attn_mask="bool2d", fully_masked=True, **long_weights)
    # float16 and bfloat16 on CPU: every path, masks, gradients.
    for name, dtype in (("Half", "float16"), ("BFloat16", "bfloat16")):
        add(name, dtype=dtype)
        add(name + "Self", dtype=dtype, qkv="qkv")
        add(name + "Masks", dtype=dtype, key_padding_mask="bool", attn_mask="float2d")
        add(name + "KdimBiasKv", dtype=dtype, kdim=5, vdim=7, add_bias_kv=True)
        add(name + "FullyMasked", dtype=dtype, key_padding_mask="bool", fully_masked=True)
        add("Fast" + name, dtype=dtype, key_padding_mask="bool", **fast)
        # A float32 mask: SDPA takes it with a half query, the weights path raises.
        add(name + "Float32Mask", dtype=dtype, attn_mask="float2d", mask_dtype="float32")
    # Python raises (recorded): a float mask of another dtype on a float32 query.
    add("MaskFloat64OnFloat32", attn_mask="float2d", mask_dtype="float64")
    add("KpmFloat16OnFloat32", key_padding_mask="float", mask_dtype="float16")


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def make_masks(case: Case, gen: torch.Generator):
    """Returns (key_padding_mask, attn_mask) for the case, or None each."""
    L, S, N, H = case.tgt_len, case.src_len, case.batch, case.num_heads
    dtype = getattr(torch, case.dtype)
    kpm_shape = (S,) if N is None else (N, S)
    mask_dtype = getattr(torch, case.mask_dtype or case.dtype)
    kpm = None
    if case.key_padding_mask == "bool":
        kpm = torch.rand(kpm_shape, generator=gen) < 0.3
        if S > 0:
            kpm[..., 0] = False  # never a fully masked row unless asked
        if case.fully_masked:
            kpm[..., :] = False
            (kpm if N is None else kpm[0])[:] = True
    elif case.key_padding_mask == "float":
        kpm = torch.randn(kpm_shape, generator=gen, dtype=mask_dtype)

    mask = None
    kind = case.attn_mask
    if kind == "causal":
        mask = torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1)
    elif kind == "causal_wrong_shape":
        mask = torch.triu(torch.ones(L + 1, S + 1, dtype=torch.bool), diagonal=1)
    elif kind is not None:
        shape = (L, S) if kind.endswith("2d") else ((H,) if N is None else (N * H,)) + (L, S)
        if kind.startswith("bool"):
            mask = torch.rand(shape, generator=gen) < 0.3
            if S > 0:
                mask[..., 0] = False
            if case.fully_masked:
                mask[..., 1, :] = True
        else:
            mask = torch.randn(shape, generator=gen, dtype=mask_dtype)
    return kpm, mask


def build_module(case: Case, seed: int):
    """The module, its float32 init (after manual_seed) and randomised weights."""
    torch.manual_seed(seed)
    module = nn.MultiheadAttention(
        case.embed_dim, case.num_heads, dropout=case.dropout, bias=case.bias,
        add_bias_kv=case.add_bias_kv, add_zero_attn=case.add_zero_attn,
        kdim=case.kdim, vdim=case.vdim, batch_first=case.batch_first)
    init_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in module.parameters():  # non-zero biases, so every term is exercised
            p.copy_(torch.randn(p.shape, generator=gen) * case.weight_scale)
    module = module.to(getattr(torch, case.dtype))
    module.train(case.training)
    return module, init_state


def make_inputs(case: Case, gen: torch.Generator):
    dtype = getattr(torch, case.dtype)
    E = case.embed_dim
    kdim, vdim = case.kdim or E, case.vdim or E

    def seq(length, features):
        if case.batch is None:
            shape = (length, features)
        elif case.batch_first:
            shape = (case.batch, length, features)
        else:
            shape = (length, case.batch, features)
        return torch.randn(shape, generator=gen, dtype=dtype)

    query = seq(case.tgt_len, E)
    if case.qkv == "qkv":
        key = value = query
    else:
        key = seq(case.src_len, kdim)
        value = key if case.qkv == "kv" else seq(case.src_len, vdim)
    if case.nonfinite:
        which, target = {"nan_query": (float("nan"), query), "inf_key": (float("inf"), key),
                         "neginf_value": (float("-inf"), value)}[case.nonfinite]
        if target.numel():
            target.view(-1)[target.numel() // 3] = which
    return query, key, value


def leaves_of(case, query, key, value):
    """The distinct input tensors, named as the C++ test names them."""
    named = {"query": query}
    if case.qkv != "qkv":
        named["key"] = key
    if case.qkv == "none":
        named["value"] = value
    return named


@contextlib.contextmanager
def native_op_recorder():
    """Counts the calls of torch._native_multi_head_attention (Python's fast
    path) made while it is active: MultiheadAttention.forward looks the op up
    on the torch module at each call."""
    calls = []
    native = torch._native_multi_head_attention

    def recording(*args, **kwargs):
        calls.append(1)
        return native(*args, **kwargs)

    torch._native_multi_head_attention = recording
    try:
        yield calls
    finally:
        torch._native_multi_head_attention = native


def run_case(case: Case) -> dict:
    seed = seed_of(case.name)
    module, init_state = build_module(case, seed)
    gen = torch.Generator().manual_seed(seed + 2)
    query, key, value = make_inputs(case, gen)
    kpm, mask = make_masks(case, gen)
    leaves = leaves_of(case, query, key, value)
    for t in leaves.values():
        t.requires_grad_(case.grad)

    forward_seed = seed + 3
    torch.manual_seed(forward_seed)
    error = None
    with torch.set_grad_enabled(case.grad), native_op_recorder() as native_calls:
        try:
            out, weights = module(query, key, value, key_padding_mask=kpm,
                                  need_weights=case.need_weights, attn_mask=mask,
                                  average_attn_weights=case.average_attn_weights,
                                  is_causal=case.is_causal)
        except (RuntimeError, ValueError, AssertionError, TypeError) as e:
            error = f"{type(e).__name__}: {e}"
    result = {
        "magic": MAGIC, "version": VERSION, "name": case.name,
        "options": {
            "embed_dim": case.embed_dim, "num_heads": case.num_heads, "dropout": case.dropout,
            "bias": case.bias, "add_bias_kv": case.add_bias_kv,
            "add_zero_attn": case.add_zero_attn, "kdim": case.kdim, "vdim": case.vdim,
            "batch_first": case.batch_first,
        },
        "call": {
            "need_weights": case.need_weights, "average_attn_weights": case.average_attn_weights,
            "is_causal": case.is_causal, "training": case.training, "grad": case.grad,
            "qkv_identity": case.qkv, "dtype": case.dtype, "forward_seed": forward_seed,
            "python_kernel": "native" if native_calls else "functional",
        },
        "init_seed": seed,
        "init_state_dict": init_state,
        "state_dict_keys": list(module.state_dict().keys()),
        "state_dict": {k: v.detach().clone() for k, v in module.state_dict().items()},
        "inputs": {"query": query.detach(), "key": key.detach(), "value": value.detach()},
        "expected": {},
    }
    if kpm is not None:
        result["inputs"]["key_padding_mask"] = kpm
    if mask is not None:
        result["inputs"]["attn_mask"] = mask
    if error is not None:
        result["expected_error"] = error
        return result
    result["expected"]["output"] = out.detach()
    if weights is not None:
        result["expected"]["weights"] = weights.detach()

    if case.grad:
        g_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        loss = (out * g_out).sum()
        cotangents = {"output": g_out}
        if weights is not None:
            g_w = torch.randn(weights.shape, generator=gen, dtype=weights.dtype)
            loss = loss + (weights * g_w).sum()
            cotangents["weights"] = g_w
        loss.backward()
        grads = {name: t.grad.detach() for name, t in leaves.items()}
        for name, p in module.named_parameters():
            grads["param." + name] = p.grad.detach()
        result["cotangents"] = cotangents
        result["grads"] = grads
    return result


def python_median_us(module, query, key, value, kpm, mask, case, threads):
    """Median forward time of the Python module, eval + inference_mode, on
    `threads` intra-op threads (Timer's default would be 1)."""
    import torch.utils.benchmark as benchmark
    module.eval()
    with torch.inference_mode():
        timer = benchmark.Timer(
            stmt="module(q, k, v, key_padding_mask=kpm, need_weights=nw, attn_mask=mask)",
            globals={"module": module, "q": query, "k": key, "v": value, "kpm": kpm,
                     "mask": mask, "nw": case.need_weights},
            num_threads=threads)
        return timer.blocked_autorange(min_run_time=1.0).median * 1e6


def write_bundle(args):
    case = Case(name="bundle", embed_dim=args.embed_dim, num_heads=args.num_heads,
                tgt_len=args.seq_len, src_len=args.seq_len, batch=args.batch,
                qkv="qkv" if args.self_attention else "none", batch_first=args.batch_first,
                need_weights=args.need_weights, grad=False,
                key_padding_mask="bool" if args.key_padding_mask else None)
    result = run_case(case)
    module, _ = build_module(case, seed_of(case.name))
    inputs = result["inputs"]
    result["timing"] = {
        "python_median_us": python_median_us(
            module, inputs["query"], inputs["key"], inputs["value"],
            inputs.get("key_padding_mask"), inputs.get("attn_mask"), case, args.threads),
        "python_threads": args.threads}
    torch.save(result, args.bundle)
    print(f"wrote {args.bundle}: nn.MultiheadAttention({case.embed_dim}, {case.num_heads}), "
          f"L={case.tgt_len}, N={case.batch}, outputs and python median "
          f"{result['timing']['python_median_us']:.1f} us on {args.threads} threads")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for the case files and manifest.txt")
    parser.add_argument("--list", action="store_true", help="print the case names")
    parser.add_argument("--bundle", help="write one bundle for mha-parity to this file")
    parser.add_argument("--embed-dim", type=int, default=512)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--batch-first", action="store_true")
    parser.add_argument("--cross", dest="self_attention", action="store_false",
                        help="cross-attention (distinct key and value) instead of self")
    parser.add_argument("--need-weights", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--key-padding-mask", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="intra-op threads for the bundle's outputs and timing "
                             "(default: the number of cores, as LibTorch's default)")
    args = parser.parse_args()

    torch.set_num_threads(1)  # deterministic reductions, same as the C++ test's
    if args.list:
        print("\n".join(c.name for c in case_matrix()))
    elif args.bundle:
        torch.set_num_threads(args.threads)
        write_bundle(args)
    elif args.out:
        os.makedirs(args.out, exist_ok=True)
        cases = case_matrix()
        names = [c.name for c in cases]
        assert len(set(names)) == len(names), "duplicate case names"
        start = time.time()
        for case in cases:
            torch.save(run_case(case), os.path.join(args.out, case.name + ".pt"))
        with open(os.path.join(args.out, "manifest.txt"), "w") as f:
            f.write(f"# torch {torch.__version__}\n")
            f.write("\n".join(names) + "\n")
        print(f"wrote {len(cases)} reference cases to {args.out} with torch "
              f"{torch.__version__} in {time.time() - start:.1f} s")
    else:
        parser.error("give --out DIR, --list or --bundle FILE")


if __name__ == "__main__":
    sys.exit(main())
