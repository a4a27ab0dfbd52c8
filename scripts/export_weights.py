#!/usr/bin/env python3
"""Export PyTorch weights to a .safetensors file that mha::load_state_dict (C++)
reads, optionally keeping only the keys under a prefix.

The source is a checkpoint file or a module built by a Python expression:

  # the self-attention of a saved TransformerEncoderLayer, keys stripped:
  export_weights.py layer.pt attn.safetensors --prefix self_attn.

  # a fresh nn.MultiheadAttention(512, 8), seeded:
  export_weights.py --module "torch.nn.MultiheadAttention(512, 8)" --seed 0 mha.safetensors

  # what a checkpoint holds:
  export_weights.py model.pt --list

Checkpoint files: torch.save of a state_dict (OrderedDict or dict), of a
checkpoint dict with nested dicts ({"model": state_dict, "epoch": 3}: keys
become "model.<name>", non-tensor values are dropped), of a whole nn.Module
(needs --unsafe-load: it runs the file's pickled code); TorchScript archives
(torch.jit.save); .safetensors files. Tensors are written contiguous, on the
CPU, each with its own bytes (tied weights are duplicated, as safetensors
requires).

C++ can read the original files directly (mha::read_state_dict detects
torch.save, TorchScript and safetensors); this script is for sharing weights
without pickles, for selecting a submodule, or for converting dtypes.
"""

import argparse
import sys

import torch


def flatten(obj, prefix, out):
    """Tensors of nested dicts by dotted name; other values are dropped."""
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, torch.Tensor):
        out[prefix.rstrip(".")] = obj
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "_metadata" or not isinstance(key, str):
                continue
            flatten(value, f"{prefix}{key}.", out)


def load_source(args):
    if args.module:
        torch.manual_seed(args.seed)
        namespace = {"torch": torch, "nn": torch.nn}
        module = eval(args.module, namespace)  # noqa: S307 - a command-line expression
        if not isinstance(module, torch.nn.Module):
            sys.exit(f"--module {args.module!r} gave a {type(module).__name__}, not an nn.Module")
        return module.state_dict()
    path = args.input
    with open(path, "rb") as f:
        head = f.read(16)
    if len(head) >= 9 and head[8:9] == b"{":
        from safetensors.torch import load_file
        return load_file(path)
    if head[:4] == b"PK\x03\x04":
        import zipfile
        names = zipfile.ZipFile(path).namelist()
        if any(n.endswith("/constants.pkl") for n in names):
            script = torch.jit.load(path, map_location="cpu")
            tensors = dict(script.named_parameters())
            tensors.update(dict(script.named_buffers()))
            return tensors
    try:
        return torch.load(path, map_location="cpu", weights_only=not args.unsafe_load)
    except Exception as e:  # noqa: BLE001 - explain the usual cause
        hint = "" if args.unsafe_load else (
            "\nIf it is a whole pickled nn.Module and you trust the file, pass --unsafe-load.")
        sys.exit(f"{path}: cannot load: {e}{hint}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", help="checkpoint file (omit with --module)")
    parser.add_argument("output", nargs="?", help="the .safetensors file to write")
    parser.add_argument("--module", metavar="EXPR",
                        help='a Python expression building the module, e.g. '
                             '"torch.nn.MultiheadAttention(512, 8)" (then only OUTPUT is given)')
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed before --module")
    parser.add_argument("--prefix", default="",
                        help='keep only the keys under this prefix, e.g. "encoder.layers.0.self_attn." '
                             '(a missing trailing "." is added)')
    parser.add_argument("--keep-prefix", action="store_true",
                        help="keep the prefix in the written names (default: strip it)")
    parser.add_argument("--dtype", choices=["float32", "float64", "float16", "bfloat16"],
                        help="convert floating-point tensors to this dtype")
    parser.add_argument("--unsafe-load", action="store_true",
                        help="torch.load with weights_only=False (whole pickled modules; runs "
                             "code from the file: only for files you trust)")
    parser.add_argument("--list", action="store_true",
                        help="print the selected names, shapes and dtypes instead of writing")
    args = parser.parse_args()
    if args.module and args.input and not args.output:
        args.input, args.output = None, args.input
    if not args.module and not args.input:
        parser.error("give a checkpoint file or --module EXPR")
    if args.module and args.input:
        parser.error("give a checkpoint file or --module EXPR, not both")
    if not args.output and not args.list:
        parser.error("give the output .safetensors file (or --list)")

    tensors = {}
    flatten(load_source(args), "", tensors)
    prefix = args.prefix
    if prefix and not prefix.endswith("."):
        prefix += "."
    if prefix:
        selected = {k: v for k, v in tensors.items() if k.startswith(prefix) and k != prefix}
        if not selected:
            sys.exit(f"prefix {prefix!r} matches no key; the keys are: "
                     + ", ".join(list(tensors)[:8]) + (" ..." if len(tensors) > 8 else ""))
        if not args.keep_prefix:
            selected = {k[len(prefix):]: v for k, v in selected.items()}
        tensors = selected
    if not tensors:
        sys.exit("no tensors to export")
    dtype = getattr(torch, args.dtype) if args.dtype else None
    out = {}
    for name, t in tensors.items():
        t = t.detach().to("cpu")
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[name] = t.contiguous().clone()

    if args.list:
        for name, t in out.items():
            print(f"{name}\t{list(t.shape)}\t{str(t.dtype).replace('torch.', '')}")
        return
    from safetensors.torch import save_file
    source = args.module or args.input
    save_file(out, args.output, metadata={"format": "pt", "source": str(source),
                                          "prefix": prefix})
    print(f"wrote {len(out)} tensors to {args.output}")


if __name__ == "__main__":
    main()
