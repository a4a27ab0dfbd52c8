"""The whole checkpoints that tests/tensor_parallel/tp_load_test.cpp loads shards
from: one nn.MultiheadAttention(32, 4, add_bias_kv=True, kdim=20, vdim=24) (random
biases) in every way its weights reach a file:

  reference.pt          torch.save(m.state_dict())
  nested.pt             torch.save({"model": {"layer.attn.<key>": ...}, "epoch": 3})
  deflated.pt           reference.pt re-zipped with ZIP_DEFLATED records
  strided.pt            the 2-D weights saved as transposed views (not contiguous)
  float64.safetensors   safetensors.torch.save_file of the state dict in float64
  scripted.pt           torch.jit.save(torch.jit.script(m))

Usage: tp_checkpoints.py OUT_DIR
"""

import os
import sys
import zipfile

import torch
from safetensors.torch import save_file


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(32, 4, add_bias_kv=True, kdim=20, vdim=24)
    with torch.no_grad():
        for bias in (m.in_proj_bias, m.out_proj.bias):
            bias.normal_()
    sd = m.state_dict()
    torch.save(sd, f"{out}/reference.pt")
    torch.save({"model": {f"layer.attn.{k}": v for k, v in sd.items()}, "epoch": 3},
               f"{out}/nested.pt")
    with zipfile.ZipFile(f"{out}/reference.pt") as stored, \
            zipfile.ZipFile(f"{out}/deflated.pt", "w", zipfile.ZIP_DEFLATED) as deflated:
        for info in stored.infolist():
            deflated.writestr(info.filename, stored.read(info))
    strided = {k: v.t().contiguous().t() if v.dim() == 2 else v for k, v in sd.items()}
    assert not strided["q_proj_weight"].is_contiguous()
    torch.save(strided, f"{out}/strided.pt")
    save_file({k: v.double().contiguous() for k, v in sd.items()}, f"{out}/float64.safetensors")
    torch.jit.save(torch.jit.script(m), f"{out}/scripted.pt")


if __name__ == "__main__":
    main()
