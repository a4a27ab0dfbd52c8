#!/usr/bin/env python3
"""Writes the seed corpora of the weights-reader fuzzers (tests/fuzz/corpus/
{torch_save,safetensors,torchscript}) from the installed torch: small files of
nn.MultiheadAttention(4, 2), the module the fuzz targets load into
(tests/fuzz/weights_fuzz_target.h), in the forms the readers accept.

  export_fuzz_seeds.py --out tests/fuzz/corpus

The seeds are committed; rerun this only to change them.
"""

import argparse
import collections
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file


def state_dict(dtype=torch.float32):
    torch.manual_seed(0)
    return collections.OrderedDict(
        (k, v.detach().to(dtype)) for k, v in nn.MultiheadAttention(4, 2).state_dict().items())


def torch_save_seeds(out):
    sd = state_dict()
    torch.save(sd, f"{out}/ordered_dict.pt")
    torch.save(dict(sd), f"{out}/plain_dict.pt")
    torch.save({"model": sd, "step": 3}, f"{out}/nested.pt")
    torch.save(state_dict(torch.float16), f"{out}/float16.pt")
    # Views of one storage: q, k, v thirds of one packed tensor, saved as views.
    packed = sd["in_proj_weight"].clone()
    views = collections.OrderedDict(sd)
    views["in_proj_weight"] = packed
    views["q_view"] = packed[0:4]
    views["v_view_t"] = packed[8:12].t()
    torch.save(views, f"{out}/views.pt")
    torch.save(collections.OrderedDict(), f"{out}/empty.pt")
    training_seeds(out)
    python_value_seeds(out)


def training_seeds(out):
    """Training checkpoints: model, optimizer after a step, scheduler, epoch, RNG state."""
    for name, make in [("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("adamw", lambda p: torch.optim.AdamW(p, lr=1e-3, amsgrad=True))]:
        torch.manual_seed(0)
        model = nn.MultiheadAttention(4, 2)
        optimizer = make(model.parameters())
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        x = torch.randn(2, 1, 4)
        model(x, x, x)[0].sum().backward()
        optimizer.step()
        scheduler.step()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": 3,
                    "rng": torch.get_rng_state()[:64]}, f"{out}/train_{name}.pt")


def python_value_seeds(out):
    """Every container, scalar, key type and dtype of torch.load(weights_only=True)."""
    sd = state_dict()
    shared = torch.arange(6.0)
    torch.save({
        "model": sd, "list": [shared, [shared[2:], 1], "s"], "tuple": (shared, (1, 2.5, None)),
        "int_keys": {0: {"exp_avg": shared}, -1: shared, 2**70: shared},
        "ordered_in_list": [collections.OrderedDict(a=shared)],
        "scalars": [b"\x00b", 2**80, -(2**70), torch.Size([2]), torch.bfloat16, 1 + 2j,
                    bytearray(b"a"), torch.device("cpu"), collections.Counter(a=1), {1, 2}],
        "skipped": {True: shared, 1.5: shared, ("a", 1): shared, None: shared,
                    "set": {shared}},
    }, f"{out}/python_values.pt")
    torch.save({str(d).removeprefix("torch."): torch.arange(4).to(d).reshape(2, 2).t()
                for d in [torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.bool,
                          torch.complex64, torch.uint16, torch.uint64, torch.float8_e4m3fn]},
               f"{out}/dtypes.pt")
    torch.save([nn.Parameter(torch.ones(2)), torch.tensor(1.5)], f"{out}/parameters.pt")
    torch.save(torch.ones(2, 2), f"{out}/lone_tensor.pt")
    memo = torch.zeros(260)  # one storage; 260 views need LONG_BINPUT memo indices
    torch.save([memo[i:i + 1] for i in range(260)], f"{out}/long_memo.pt")
    torch.save(nn.Linear(2, 2), f"{out}/whole_module.pt")


def safetensors_seeds(out):
    sd = state_dict()
    save_file(dict(sd), f"{out}/mha.safetensors")
    save_file(dict(sd), f"{out}/with_metadata.safetensors", metadata={"format": "pt"})
    save_file(dict(state_dict(torch.bfloat16)), f"{out}/bfloat16.safetensors")
    save_file({"ints": torch.arange(6, dtype=torch.int64).reshape(2, 3),
               "flags": torch.tensor([True, False]),
               "scalar": torch.tensor(1.5, dtype=torch.float64),
               "empty": torch.zeros(0, 4)}, f"{out}/dtypes.safetensors")
    save_file({}, f"{out}/empty.safetensors")


def torchscript_seeds(out):
    torch.manual_seed(0)
    scripted = torch.jit.script(nn.MultiheadAttention(4, 2))
    torch.jit.save(scripted, f"{out}/mha.pt")

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(4, 2)
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            return self.attn(x, x, x)[0] * self.scale[0]

    torch.jit.save(torch.jit.script(Holder()), f"{out}/holder.pt")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the corpus folder (tests/fuzz/corpus)")
    args = parser.parse_args()
    for name, write in [("torch_save", torch_save_seeds), ("safetensors", safetensors_seeds),
                        ("torchscript", torchscript_seeds)]:
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        write(folder)


if __name__ == "__main__":
    main()
