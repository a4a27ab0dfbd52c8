#!/usr/bin/env python3
"""Writes checkpoints of the shapes Python training code saves, and next to
each the tensors that mha::read_state_dict must return (run by CTest as a
fixture; never committed).

  export_checkpoint_zoo.py --out DIR

For every DIR/<name>.pt, DIR/<name>.json holds what a walk of
torch.load(path, weights_only=True) finds with the naming rules of
include/mha/state_dict.h (`walk` below): {"tensors": [[dotted name, shape,
dtype, FNV-1a 64 of the contiguous bytes as hex], ...], "skipped": [path, ...]}.
The shapes: training checkpoints (model + optimizer after real steps with SGD
with momentum, Adam, AdamW + LR scheduler + epoch + RNG state), Python
containers and scalars (lists, tuples, sets, bytes, big ints, torch.Size,
dtypes, OrderedDict in lists, int keys, keys of other types), shared tensors
and views with offsets, every dtype torch.save writes that LibTorch has, a
plain state_dict, a lone tensor, a list of nn.Parameters. Also, without a
.json, files the reader refuses: a whole pickled module, a name collision.
"""

import argparse
import collections
import json
import os

import torch
import torch.nn as nn

FNV_OFFSET, FNV_PRIME, MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
KEY_LABELS = {bool: "bool", float: "float", tuple: "tuple", type(None): "None", bytes: "bytes"}


def fnv1a64(tensor):
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK
    return f"{h:016x}"


def join(name, segment):
    return f"{name}.{segment}" if name else segment


def holds_tensor(value):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(holds_tensor(k) or holds_tensor(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_tensor(v) for v in value)
    return False


def walk(value, name, tensors, skipped):
    """The naming rules of mha::read_state_dict (include/mha/state_dict.h)."""
    if isinstance(value, torch.Tensor):
        assert name not in tensors, f"two tensors named {name!r}"
        tensors[name] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            if type(key) is str or type(key) is int:
                walk(item, join(name, str(key)), tensors, skipped)
            elif holds_tensor(key) or holds_tensor(item):
                label = KEY_LABELS.get(type(key), "other")
                skipped.append(join(name, f"<{label} key>"))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            walk(item, join(name, str(i)), tensors, skipped)
    elif isinstance(value, (set, frozenset)):
        skipped.extend(join(name, "<set item>") for item in value if holds_tensor(item))


def save(out, name, obj):
    path = os.path.join(out, f"{name}.pt")
    torch.save(obj, path)
    tensors, skipped = {}, []
    walk(torch.load(path, weights_only=True), "", tensors, skipped)
    expected = {
        "tensors": [[k, list(t.shape), str(t.dtype), fnv1a64(t)] for k, t in sorted(tensors.items())],
        "skipped": sorted(skipped),
    }
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(expected, f, indent=1)


def training_checkpoint(make_optimizer, make_scheduler):
    """A MultiheadAttention(8, 2) after two real steps (loss: output squared)."""
    model = nn.MultiheadAttention(8, 2)
    optimizer = make_optimizer(model.parameters())
    scheduler = make_scheduler(optimizer)
    x = torch.randn(3, 2, 8)
    for _ in range(2):
        optimizer.zero_grad()
        model(x, x, x)[0].pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": 3,
        "best_loss": 0.25,
        "rng": torch.get_rng_state(),
    }


def export_training(out):
    save(out, "train_sgd", training_checkpoint(
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5)))
    save(out, "train_adam", training_checkpoint(
        lambda p: torch.optim.Adam(p, lr=1e-3),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10)))
    save(out, "train_adamw", training_checkpoint(
        lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01, amsgrad=True),
        lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=4)))


def export_containers(out):
    base = torch.arange(24.0).reshape(4, 6)
    shared = torch.linspace(-1, 1, 5)
    save(out, "containers", {
        "list": [torch.ones(2), [torch.zeros(3), 7], "text"],
        "tuple": (torch.full((2,), 3.0), (1, 2.5, None)),
        "int_keys": {0: {"exp_avg": torch.ones(2)}, -3: torch.zeros(1), 2**70: torch.ones(1)},
        "ordered_in_list": [collections.OrderedDict(a=torch.ones(1), b=2)],
        "shared": {"a": shared, "b": shared, "list": [shared, shared[1:]]},
        "views": {"row": base[2], "column": base[:, 3], "t": base.t(), "offset": base.view(-1)[5:9]},
        "scalars": {"bytes": b"\x00\xffraw", "big": 2**80, "negative_big": -(2**70),
                    "size": torch.Size([2, 3]), "dtype": torch.bfloat16, "complex": 1 + 2j,
                    "bytearray": bytearray(b"ab"), "device": torch.device("cpu"),
                    "counter": collections.Counter(a=2), "set": {1, 2}, "empty": [(), {}, []],
                    "float": 0.5, "true": True, "none": None},
        "skipped": {True: torch.ones(1), 1.5: torch.ones(2), ("a", 1): torch.ones(3),
                    None: [torch.ones(1)], b"k": torch.ones(1), torch.Size([1]): torch.ones(1),
                    "set": {torch.ones(1), torch.zeros(1)}, "set_of_tuples": {(torch.ones(1),)}},
        "many": [torch.full((1,), float(i)) for i in range(300)],  # LONG_BINPUT memo indices
        "repeated": [shared[:2]] * 500,  # one tensor, 500 names (BINGET)
    })


def export_dtypes(out):
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64,
              torch.complex128, torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn,
              torch.float8_e5m2]
    tensors = {}
    for dtype in dtypes:
        values = torch.arange(-6, 6, dtype=torch.float64).reshape(3, 4) * 0.75
        if not dtype.is_floating_point and not dtype.is_complex:
            values = values.abs().round()
        if dtype.is_complex:
            values = torch.complex(values, -values)
        name = str(dtype).removeprefix("torch.")
        tensors[name] = values.to(dtype)
        tensors[f"{name}_view"] = tensors[name].t()[1:]
    tensors["scalar"] = torch.tensor(2.5)
    tensors["empty"] = torch.zeros(0, 3)
    save(out, "dtypes", tensors)


def export_plain(out):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    save(out, "state_dict", layer.state_dict())
    save(out, "lone_tensor", torch.arange(6.0).reshape(2, 3))
    save(out, "parameters", [nn.Parameter(torch.ones(2, 2)), nn.Parameter(torch.zeros(3),
                                                                          requires_grad=False)])


def export_bad(out):
    """Files read_state_dict refuses (rows of tests/bad_input/weights_file_rows_test.cpp)."""
    torch.save(nn.Linear(2, 2), os.path.join(out, "whole_module.pt"))
    t = torch.ones(2)
    torch.save({"a": {0: t, "0": t}}, os.path.join(out, "name_collision.pt"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    export_training(args.out)
    export_containers(args.out)
    export_dtypes(args.out)
    export_plain(args.out)
    export_bad(args.out)


if __name__ == "__main__":
    main()
