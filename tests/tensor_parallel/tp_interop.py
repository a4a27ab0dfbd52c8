"""A Python rank (torch.distributed, Gloo) and a C++ rank (mha_tp_interop) form
one group through one TCPStore and compute one tensor-parallel forward of
nn.MultiheadAttention's weights together; then the C++ rank gathers the whole
module, which nn.MultiheadAttention loads back unchanged.

Usage: tp_interop.py MHA_TP_INTEROP_PROGRAM
"""

import datetime
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

E, H, WORLD, RANK = 16, 4, 2, 1  # the C++ program is rank 0 (it hosts the store)
TIMEOUT = datetime.timedelta(seconds=30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_partial(m, x, rank):
    """This rank's heads of self-attention and its out_proj columns: (L, N, E)."""
    w, hl = E // WORLD, H // WORLD
    rows = slice(rank * w, (rank + 1) * w)
    L, N, _ = x.shape
    q, k, v = (F.linear(x, W[rows], b[rows])
               for W, b in zip(m.in_proj_weight.chunk(3), m.in_proj_bias.chunk(3)))
    q, k, v = (t.reshape(L, N * hl, w // hl).transpose(0, 1) for t in (q, k, v))
    attn = torch.softmax(q @ k.transpose(1, 2) / (w // hl) ** 0.5, dim=-1) @ v
    return F.linear(attn.transpose(0, 1).reshape(L, N, w), m.out_proj.weight[:, rows])


def shard_for_gather(m, rank):
    """The tensors mha's save gathers, in its order: packed in_proj rows, in_proj
    bias, out_proj columns."""
    w = E // WORLD
    rows = slice(rank * w, (rank + 1) * w)
    packed = lambda t: torch.cat([c[rows] for c in t.chunk(3)])
    return [packed(m.in_proj_weight), packed(m.in_proj_bias),
            m.out_proj.weight[:, rows].contiguous()]


def main():
    program = sys.argv[1]
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(E, H)
    torch.nn.init.normal_(m.in_proj_bias)
    torch.nn.init.normal_(m.out_proj.bias)
    x = torch.randn(5, 3, E)
    with torch.no_grad():
        expected = m(x, x, x, need_weights=False)[0]
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(m.state_dict(), f"{tmp}/whole.pt")
        torch.save({"x": x, "expected": expected}, f"{tmp}/io.pt")
        port = free_port()
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                   WORLD_SIZE=str(WORLD), OMP_NUM_THREADS="1")
        cxx = subprocess.Popen([program, tmp], env=env)
        try:
            store = dist.TCPStore("127.0.0.1", port, WORLD, is_master=False, timeout=TIMEOUT)
            store.set(f"mha_tp/world_size/{RANK}", str(WORLD))  # mha's world-size check
            # init_process_group prefixes "default_pg" itself only when it makes the store
            # (init_method); mha's ranks use the keys of that default group.
            dist.init_process_group("gloo", store=dist.PrefixStore("default_pg", store),
                                    rank=RANK, world_size=WORLD, timeout=TIMEOUT)
            with torch.no_grad():
                # mha's check before its first forward: world size, options, dtype, shard ok.
                signature = torch.tensor([WORLD, E, H, E, E, 1, 0, 0, 0, 6, 0])  # 6: float32
                gathered = [torch.empty_like(signature) for _ in range(WORLD)]
                dist.all_gather(gathered, signature)
                assert all(torch.equal(g, signature) for g in gathered), gathered
                out = local_partial(m, x, RANK)
                dist.all_reduce(out)
                out += m.out_proj.bias
                for shard in shard_for_gather(m, RANK):
                    dist.all_gather([torch.empty_like(shard) for _ in range(WORLD)], shard)
            dist.destroy_process_group()
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
            print(f"Python rank {RANK}: max |out - nn.MultiheadAttention| = "
                  f"{(out - expected).abs().max().item():.3g} PASS")
            assert cxx.wait(timeout=60) == 0, "the C++ rank failed"
        finally:
            if cxx.poll() is None:
                cxx.kill()
        gathered = torch.nn.MultiheadAttention(E, H)
        gathered.load_state_dict(torch.load(f"{tmp}/gathered.pt", weights_only=True))
        for name, p in m.state_dict().items():
            assert torch.equal(gathered.state_dict()[name], p), name
        print("nn.MultiheadAttention loaded the gathered checkpoint: PASS")


if __name__ == "__main__":
    main()
