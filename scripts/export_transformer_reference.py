#!/usr/bin/env python3
"""Write reference cases of torch.nn's Transformer classes for mha's parity tests.

Each case builds one of nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
nn.TransformerEncoder, nn.TransformerDecoder or nn.Transformer with seeded
random weights, inputs and masks, runs forward (and, with grad, a backward pass
with a seeded random cotangent) and saves a plain dict (`torch.save`; C++ reads
it with `torch::pickle_load`):

    {"magic": 20261201, "version": 1, "name": str, "kind": str,
     "options": {d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 batch_first, norm_first, bias, num_layers, final_norm,
                 enable_nested_tensor, mask_check},
     "call": {training, grad, dtype, forward_seed, is_causal, memory_is_causal},
                                                  # is_causal: None, True or False
     "init_seed": int, "init_state_dict": {...},  # float32 init after manual_seed
     "state_dict": {...},                         # the weights used (Python's key order)
     "inputs": {src | tgt, memory | src, tgt; masks by Python's argument names},
     "expected": {"output": ...}, "cotangent": ..., "grads": {"src": ..., "param.<name>": ...}}

Also two real checkpoints, `torch.save(module.state_dict())` with their inputs
and eval outputs: checkpoint_transformer.pt (nn.Transformer) and
checkpoint_encoder6.pt (a 6-layer nn.TransformerEncoder with a final norm),
checkpoint_encoder_nested.pt (an encoder called with a NestedTensor).

Usage:
    export_transformer_reference.py --out DIR    # every case + manifest.txt + checkpoints
    export_transformer_reference.py --list
"""

import argparse
import os
import sys
import time
import warnings
import zlib
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

MAGIC = 20261201
VERSION = 1
LAYERS = ("encoder_layer", "decoder_layer")


@dataclass(frozen=True)
class Case:
    name: str
    kind: str = "encoder_layer"  # or decoder_layer, encoder, decoder, transformer
    d_model: int = 8
    nhead: int = 2
    dim_feedforward: int = 16
    dropout: float = 0.0
    activation: str = "relu"     # relu | gelu | callable (lambda: F.gelu(x, approximate="tanh"))
    layer_norm_eps: float = 1e-5
    batch_first: bool = False
    norm_first: bool = False
    bias: bool = True
    num_layers: int = 2          # stacks
    final_norm: bool = False     # encoder / decoder: a LayerNorm as `norm`
    enable_nested_tensor: bool = True
    mask_check: bool = True
    src_len: int = 5
    tgt_len: int = 4
    batch: Optional[int] = 3     # None: unbatched
    src_mask: Optional[str] = None   # None | bool | float | bool3d | causal | causal_bool
    tgt_mask: Optional[str] = None
    memory_mask: Optional[str] = None
    src_kpm: Optional[str] = None    # None | bool | float | left (padding at the end, bool)
    tgt_kpm: Optional[str] = None    #   | right (padding at the start: not left aligned)
    memory_kpm: Optional[str] = None
    is_causal: Optional[bool] = None  # layers: None means False
    training: bool = False
    grad: bool = True
    dtype: str = "float32"
    weight_scale: float = 0.5    # std of the randomised weights and biases


def case_matrix():
    cases = []

    def add(name, **kw):
        cases.append(Case(name=name, **kw))

    fast = dict(batch_first=True, grad=False)  # Python's encoder-layer fast path
    for kind, prefix in (("encoder_layer", "EncLayer"), ("decoder_layer", "DecLayer")):
        add(prefix, kind=kind)
        add(prefix + "Gelu", kind=kind, activation="gelu")
        add(prefix + "Callable", kind=kind, activation="callable")
        add(prefix + "NormFirst", kind=kind, norm_first=True)
        add(prefix + "NoBias", kind=kind, bias=False)
        add(prefix + "BatchFirst", kind=kind, batch_first=True)
        add(prefix + "Unbatched", kind=kind, batch=None)
        add(prefix + "Float64", kind=kind, dtype="float64")
        add(prefix + "Eps", kind=kind, layer_norm_eps=1e-3)
        add(prefix + "Train", kind=kind, training=True)
        add(prefix + "TrainDropout", kind=kind, training=True, dropout=0.3)
        add(prefix + "NoGrad", kind=kind, grad=False)
        # pairs
        add(prefix + "GeluNormFirst", kind=kind, activation="gelu", norm_first=True)
        add(prefix + "NoBiasBatchFirst", kind=kind, bias=False, batch_first=True)
        add(prefix + "NormFirstFloat64", kind=kind, norm_first=True, dtype="float64")
        add(prefix + "CallableNoBias", kind=kind, activation="callable", bias=False)
        add(prefix + "UnbatchedNormFirst", kind=kind, batch=None, norm_first=True)
        add(prefix + "TrainDropoutNormFirst", kind=kind, training=True, dropout=0.2,
            norm_first=True, batch_first=True)
    # Encoder layer masks and fast path.
    e = dict(kind="encoder_layer")
    add("EncLayerMaskBool", src_mask="bool", **e)
    add("EncLayerMaskFloat", src_mask="float", **e)
    add("EncLayerMaskBool3d", src_mask="bool3d", **e)
    add("EncLayerKpmBool", src_kpm="bool", **e)
    add("EncLayerKpmFloat", src_kpm="float", **e)
    add("EncLayerKpmBoolMaskFloat", src_kpm="bool", src_mask="float", **e)
    add("EncLayerCausal", src_mask="causal", is_causal=True, **e)
    add("EncLayerCausalKpmBatchFirst", src_mask="causal", is_causal=True, src_kpm="bool",
        batch_first=True, **e)
    add("EncLayerUnbatchedMasks", batch=None, src_mask="bool", src_kpm="bool", **e)
    add("EncLayerFloat64Masks", dtype="float64", src_mask="bool3d", src_kpm="float", **e)
    add("EncLayerFast", **fast, **e)
    add("EncLayerFastKpm", src_kpm="bool", **fast, **e)
    add("EncLayerFastMask", src_mask="bool", **fast, **e)
    add("EncLayerFastMask3dKpm", src_mask="bool3d", src_kpm="bool", **fast, **e)
    add("EncLayerFastFloatMasks", src_mask="float", src_kpm="float", **fast, **e)
    add("EncLayerFastGelu", activation="gelu", src_kpm="bool", **fast, **e)
    add("EncLayerFastNormFirst", norm_first=True, src_mask="bool", **fast, **e)
    add("EncLayerFastFloat64", dtype="float64", src_kpm="bool", **fast, **e)
    add("EncLayerFastCausalHint", src_mask="causal", is_causal=True, **fast, **e)
    add("EncLayerFastEps", layer_norm_eps=1e-3, **fast, **e)
    # Where mha runs the layer's own steps (its fused attention kernel): a long
    # sequence, and d_model 512 at 16 rows (prepacked weights; std 1/sqrt(d_model)
    # weights, as Python's init gives, so that rounding is not amplified).
    add("EncLayerFastLong", src_len=128, src_kpm="bool", **fast, **e)
    add("EncLayerFastPackedWeights", d_model=512, nhead=8, dim_feedforward=2048, src_len=16,
        batch=1, weight_scale=512 ** -0.5, **fast, **e)
    add("EncLayerFastCallableFallsBack", activation="callable", **fast, **e)
    add("EncLayerFastOddHeadsFallsBack", nhead=1, **fast, **e)
    add("EncLayerFastNoBiasFallsBack", bias=False, **fast, **e)
    add("EncLayerFastUnbatchedFallsBack", batch=None, **fast, **e)
    # Decoder layer masks.
    d = dict(kind="decoder_layer")
    add("DecLayerTgtMaskBool", tgt_mask="bool", **d)
    add("DecLayerTgtCausal", tgt_mask="causal", is_causal=True, **d)
    add("DecLayerMemoryMaskFloat", memory_mask="float", **d)
    add("DecLayerMemoryMask3d", memory_mask="bool3d", **d)
    add("DecLayerKpms", tgt_kpm="bool", memory_kpm="float", **d)
    add("DecLayerAllMasks", tgt_mask="causal", memory_mask="bool", tgt_kpm="bool",
        memory_kpm="bool", **d)
    add("DecLayerAllMasksBatchFirstFloat64", tgt_mask="float", memory_mask="bool3d",
        tgt_kpm="float", memory_kpm="bool", batch_first=True, dtype="float64", **d)
    add("DecLayerUnbatchedMasks", batch=None, tgt_mask="bool", memory_kpm="bool", **d)
    stacks(add, fast)
    return cases


def stacks(add, fast):
    """TransformerEncoder / TransformerDecoder / Transformer cases."""
    e = dict(kind="encoder")
    add("Encoder", **e)
    add("EncoderNorm", final_norm=True, **e)
    add("EncoderNormFirstNorm", norm_first=True, final_norm=True, **e)
    add("EncoderNoBiasNorm", bias=False, final_norm=True, **e)
    add("EncoderMaskKpm", src_mask="bool", src_kpm="bool", **e)
    add("EncoderCausalDetected", src_mask="causal", **e)  # is_causal=None: detected
    add("EncoderCausalBoolDetected", src_mask="causal_bool", **e)
    add("EncoderCausalFalse", src_mask="causal", is_causal=False, **e)
    add("EncoderTrainDropout", training=True, dropout=0.25, final_norm=True, **e)
    add("EncoderUnbatchedFloat64", batch=None, dtype="float64", src_mask="float", **e)
    # Nested tensors: eval, no grad, batch_first, a left-aligned padding mask.
    add("EncoderNested", src_kpm="left", final_norm=True, **fast, **e)
    add("EncoderNestedGelu", src_kpm="left", activation="gelu", **fast, **e)
    add("EncoderNestedFloat64", src_kpm="left", dtype="float64", **fast, **e)
    add("EncoderNestedDisabled", src_kpm="left", final_norm=True, enable_nested_tensor=False,
        **fast, **e)
    add("EncoderNestedNotLeftAligned", src_kpm="right", **fast, **e)
    add("EncoderNestedNotLeftAlignedNoCheck", src_kpm="left", mask_check=False, **fast, **e)
    add("EncoderNestedWithMaskFallsBack", src_kpm="left", src_mask="bool", **fast, **e)
    add("EncoderNestedNormFirstFallsBack", src_kpm="left", norm_first=True, **fast, **e)
    add("EncoderNestedGradFallsBack", src_kpm="left", batch_first=True, **e)
    add("EncoderFastNoKpm", final_norm=True, **fast, **e)
    d = dict(kind="decoder")
    add("Decoder", **d)
    add("DecoderNorm", final_norm=True, **d)
    add("DecoderCausalDetected", tgt_mask="causal", final_norm=True, **d)
    add("DecoderCausalBoolDetected", tgt_mask="causal_bool", **d)
    add("DecoderAllMasksBatchFirst", tgt_mask="causal", memory_mask="bool", tgt_kpm="bool",
        memory_kpm="bool", batch_first=True, **d)
    add("DecoderTrainDropoutNormFirst", training=True, dropout=0.25, norm_first=True, **d)
    add("DecoderFloat64Gelu", dtype="float64", activation="gelu", **d)
    t = dict(kind="transformer")
    add("Transformer", **t)
    add("TransformerMasks", src_mask="bool", tgt_mask="causal", memory_mask="float",
        src_kpm="bool", tgt_kpm="bool", memory_kpm="bool", **t)
    add("TransformerBatchFirstNormFirst", batch_first=True, norm_first=True, tgt_mask="causal",
        **t)
    add("TransformerNoBiasGelu", bias=False, activation="gelu", **t)
    add("TransformerCallableFloat64", activation="callable", dtype="float64", **t)
    add("TransformerUnbatched", batch=None, tgt_mask="causal", **t)
    add("TransformerTrainDropout", training=True, dropout=0.2, **t)
    add("TransformerEvalNoGradNested", src_kpm="left", batch_first=True, grad=False, **t)


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def activation_of(case):
    if case.activation == "callable":
        return lambda x: F.gelu(x, approximate="tanh")
    return case.activation


def layer_kwargs(case):
    return dict(dim_feedforward=case.dim_feedforward, dropout=case.dropout,
                activation=activation_of(case), layer_norm_eps=case.layer_norm_eps,
                batch_first=case.batch_first, norm_first=case.norm_first, bias=case.bias)


def construct(case):
    """The module, built in the order the C++ test builds it."""
    if case.kind == "transformer":
        return nn.Transformer(case.d_model, case.nhead, case.num_layers, case.num_layers,
                              **layer_kwargs(case))
    encoder = case.kind.startswith("encoder")
    layer_class = nn.TransformerEncoderLayer if encoder else nn.TransformerDecoderLayer
    layer = layer_class(case.d_model, case.nhead, **layer_kwargs(case))
    if case.kind in LAYERS:
        return layer
    norm = (nn.LayerNorm(case.d_model, eps=case.layer_norm_eps, bias=case.bias)
            if case.final_norm else None)
    if encoder:
        return nn.TransformerEncoder(layer, case.num_layers, norm,
                                     enable_nested_tensor=case.enable_nested_tensor,
                                     mask_check=case.mask_check)
    return nn.TransformerDecoder(layer, case.num_layers, norm)


def build_module(case, seed):
    torch.manual_seed(seed)
    module = construct(case)
    init_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in module.parameters():  # every weight and bias distinct and non-trivial
            p.copy_(torch.randn(p.shape, generator=gen) * case.weight_scale)
    module = module.to(getattr(torch, case.dtype))
    module.train(case.training)
    return module, init_state


def sequence(case, length, gen):
    dtype = getattr(torch, case.dtype)
    if case.batch is None:
        shape = (length, case.d_model)
    elif case.batch_first:
        shape = (case.batch, length, case.d_model)
    else:
        shape = (length, case.batch, case.d_model)
    return torch.randn(shape, generator=gen, dtype=dtype)


def attention_mask(kind, case, q_len, k_len, gen):
    if kind is None:
        return None
    dtype = getattr(torch, case.dtype)
    if kind == "causal":
        return nn.Transformer.generate_square_subsequent_mask(q_len, dtype=dtype)
    if kind == "causal_bool":
        return torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1)
    heads = case.nhead * (case.batch or 1)
    shape = (heads, q_len, k_len) if kind == "bool3d" else (q_len, k_len)
    if kind == "float":
        return torch.randn(shape, generator=gen, dtype=dtype)
    mask = torch.rand(shape, generator=gen) < 0.3
    mask[..., 0] = False  # no fully masked row
    return mask


def padding_mask(kind, case, length, gen):
    if kind is None:
        return None
    shape = (length,) if case.batch is None else (case.batch, length)
    if kind == "float":
        return torch.randn(shape, generator=gen, dtype=getattr(torch, case.dtype))
    if kind in ("left", "right"):  # batch i keeps length - i positions
        keep = torch.stack([torch.arange(length) < length - i for i in range(case.batch)])
        return ~keep if kind == "left" else (~keep).flip(-1)
    mask = torch.rand(shape, generator=gen) < 0.3
    mask[..., 0] = False
    return mask


def make_inputs(case, gen):
    """Tensor inputs (leaves first) and masks, by Python's argument names."""
    S, T = case.src_len, case.tgt_len
    inputs = {}
    if case.kind.startswith("encoder") or case.kind == "transformer":
        inputs["src"] = sequence(case, S, gen)
    if case.kind.startswith("decoder") or case.kind == "transformer":
        inputs["tgt"] = sequence(case, T, gen)
    if case.kind.startswith("decoder"):
        inputs["memory"] = sequence(case, S, gen)
    masks = {
        "src_mask": attention_mask(case.src_mask, case, S, S, gen),
        "tgt_mask": attention_mask(case.tgt_mask, case, T, T, gen),
        "memory_mask": attention_mask(case.memory_mask, case, T, S, gen),
        "src_key_padding_mask": padding_mask(case.src_kpm, case, S, gen),
        "tgt_key_padding_mask": padding_mask(case.tgt_kpm, case, T, gen),
        "memory_key_padding_mask": padding_mask(case.memory_kpm, case, S, gen),
    }
    return inputs, {k: v for k, v in masks.items() if v is not None}


def call(case, module, inputs, masks):
    m = masks.get
    if case.kind == "encoder_layer":
        return module(inputs["src"], m("src_mask"), m("src_key_padding_mask"),
                      is_causal=bool(case.is_causal))
    if case.kind == "decoder_layer":
        return module(inputs["tgt"], inputs["memory"], m("tgt_mask"), m("memory_mask"),
                      m("tgt_key_padding_mask"), m("memory_key_padding_mask"),
                      tgt_is_causal=bool(case.is_causal))
    if case.kind == "encoder":
        return module(inputs["src"], m("src_mask"), m("src_key_padding_mask"),
                      is_causal=case.is_causal)
    if case.kind == "decoder":
        return module(inputs["tgt"], inputs["memory"], m("tgt_mask"), m("memory_mask"),
                      m("tgt_key_padding_mask"), m("memory_key_padding_mask"),
                      tgt_is_causal=case.is_causal)
    return module(inputs["src"], inputs["tgt"], m("src_mask"), m("tgt_mask"), m("memory_mask"),
                  m("src_key_padding_mask"), m("tgt_key_padding_mask"),
                  m("memory_key_padding_mask"), src_is_causal=case.is_causal,
                  tgt_is_causal=case.is_causal)


def run_case(case):
    seed = seed_of(case.name)
    module, init_state = build_module(case, seed)
    gen = torch.Generator().manual_seed(seed + 2)
    inputs, masks = make_inputs(case, gen)
    for t in inputs.values():
        t.requires_grad_(case.grad)
    forward_seed = seed + 3
    torch.manual_seed(forward_seed)
    with torch.set_grad_enabled(case.grad):
        out = call(case, module, inputs, masks)
    result = {
        "magic": MAGIC, "version": VERSION, "name": case.name, "kind": case.kind,
        "options": {k: getattr(case, k) for k in (
            "d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps",
            "batch_first", "norm_first", "bias", "num_layers", "final_norm",
            "enable_nested_tensor", "mask_check")},
        "call": {"training": case.training, "grad": case.grad, "dtype": case.dtype,
                 "forward_seed": forward_seed, "is_causal": case.is_causal,
                 "memory_is_causal": False},
        "init_seed": seed, "init_state_dict": init_state,
        "state_dict": {k: v.detach().clone() for k, v in module.state_dict().items()},
        "inputs": {**{k: v.detach() for k, v in inputs.items()}, **masks},
        "expected": {"output": out.detach()},
    }
    if case.grad:
        g_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        (out * g_out).sum().backward()
        grads = {k: v.grad.detach() for k, v in inputs.items()}
        for name, p in module.named_parameters():
            grads["param." + name] = p.grad.detach()
        result["cotangent"] = g_out
        result["grads"] = grads
    return result


def write_checkpoints(out):
    """Real checkpoints: torch.save(module.state_dict()) and their eval outputs."""
    torch.manual_seed(7)
    model = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                           dim_feedforward=32, dropout=0.1).eval()
    src, tgt = torch.randn(7, 2, 16), torch.randn(5, 2, 16)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(5)
    with torch.no_grad():
        output = model(src, tgt, tgt_mask=tgt_mask)
    torch.save(model.state_dict(), os.path.join(out, "checkpoint_transformer.pt"))
    torch.save({"src": src, "tgt": tgt, "tgt_mask": tgt_mask, "output": output},
               os.path.join(out, "checkpoint_transformer.io.pt"))

    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 6, nn.LayerNorm(32)).eval()
    src = torch.randn(3, 9, 32)
    kpm = torch.stack([torch.arange(9) >= 9 - i for i in range(3)])  # left aligned
    with torch.no_grad():  # the nested-tensor path
        output = encoder(src, src_key_padding_mask=kpm)
    torch.save(encoder.state_dict(), os.path.join(out, "checkpoint_encoder6.pt"))
    torch.save({"src": src, "src_key_padding_mask": kpm, "output": output},
               os.path.join(out, "checkpoint_encoder6.io.pt"))

    # A NestedTensor input: Python's encoder returns a nested output. The
    # sequences and the output's are saved as plain tensors (C++'s pickle
    # reader takes no nested tensors).
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
                                    2).eval()
    sequences = [torch.randn(2, 8), torch.randn(3, 8)]
    with torch.no_grad():
        output = encoder(torch.nested.nested_tensor(sequences))
    assert output.is_nested
    torch.save(encoder.state_dict(), os.path.join(out, "checkpoint_encoder_nested.pt"))
    # The same weights in layers that decline their own fast path (an activation
    # given as a function): each layer's attention takes a nested query.
    relu_layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True,
                                            activation=lambda x: F.relu(x))
    by_function = nn.TransformerEncoder(relu_layer, 2, enable_nested_tensor=False).eval()
    by_function.load_state_dict(encoder.state_dict())
    with torch.no_grad():
        output_by_function = by_function(torch.nested.nested_tensor(sequences))
    torch.save({"sequence0": sequences[0], "sequence1": sequences[1],
                "output0": output.unbind()[0], "output1": output.unbind()[1],
                "function_output0": output_by_function.unbind()[0],
                "function_output1": output_by_function.unbind()[1]},
               os.path.join(out, "checkpoint_encoder_nested.io.pt"))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for the case files and manifest.txt")
    parser.add_argument("--list", action="store_true", help="print the case names")
    args = parser.parse_args()
    torch.set_num_threads(1)  # deterministic reductions, same as the C++ test's
    # Python's own notices (nested tensors in prototype, use_nested_tensor off,
    # mismatched mask dtypes) are expected here; the C++ tests check mha's.
    warnings.simplefilter("ignore", UserWarning)
    cases = case_matrix()
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if not args.out:
        parser.error("give --out DIR or --list")
    os.makedirs(args.out, exist_ok=True)
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    start = time.time()
    for case in cases:
        torch.save(run_case(case), os.path.join(args.out, case.name + ".pt"))
    write_checkpoints(args.out)
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write(f"# torch {torch.__version__}\n")
        f.write("\n".join(names) + "\n")
    print(f"wrote {len(cases)} transformer reference cases and 2 checkpoints to {args.out} "
          f"with torch {torch.__version__} in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
