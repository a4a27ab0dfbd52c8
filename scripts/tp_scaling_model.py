#!/usr/bin/env python3
"""The time-per-forward model of docs/scaling.md: tensor-parallel attention on p
ranks across machines, from one process's measured compute time and a ring
all-reduce over a network link.

  T(p) = T1 / p + T_allreduce(p)
  T_allreduce(p) = 2 (p - 1) * (latency + (B / p) / bandwidth)    (ring: reduce-scatter + all-gather)

T1: measured ms per forward of one process with 1 thread (tp_bench --threads 1);
B = N * L * E * 4 bytes (the float32 output). The compute share assumes the heads'
work splits evenly (projections, attention and out_proj all shrink by p).

p cannot exceed the number of heads H (each rank holds H / p whole heads).

Usage: tp_scaling_model.py [--embed-dim 1024] [--heads 16] [--latency-us 30] NxL=T1_MS ...
"""

import argparse

LINKS_GBIT = (25, 100)
WORLDS = (1, 2, 4, 8, 16, 32, 64)


def allreduce_ms(p, nbytes, gbit, latency_us):
    if p == 1:
        return 0.0
    bandwidth = gbit * 1e9 / 8  # bytes per second
    return 2 * (p - 1) * (latency_us * 1e-6 + (nbytes / p) / bandwidth) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--embed-dim", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--latency-us", type=float, default=30.0)
    parser.add_argument("shapes", nargs="+", help="NxL=T1_MS")
    args = parser.parse_args()
    worlds = [p for p in WORLDS if p <= args.heads]
    for item in args.shapes:
        shape, t1 = item.split("=")
        n, l = (int(v) for v in shape.split("x"))
        t1 = float(t1)
        nbytes = n * l * args.embed_dim * 4
        print(f"\n(N, L) = ({n}, {l}): T1 = {t1:g} ms, {nbytes / 1e6:.1f} MB all-reduced per forward\n")
        print("| p | " + " | ".join(f"{g} Gb/s: ms (speed-up, comm %)" for g in LINKS_GBIT) + " |")
        print("|---|" + "---|" * len(LINKS_GBIT))
        for p in worlds:
            cells = []
            for g in LINKS_GBIT:
                comm = allreduce_ms(p, nbytes, g, args.latency_us)
                total = t1 / p + comm
                cells.append(f"{total:.1f} ({t1 / total:.1f}x, {100 * comm / total:.0f}%)")
            print(f"| {p} | " + " | ".join(cells) + " |")
        for g in LINKS_GBIT:
            times = {p: t1 / p + allreduce_ms(p, nbytes, g, args.latency_us) for p in worlds}
            best = min(times, key=times.get)
            print(f"\n{g} Gb/s: fastest at p = {best} ({times[best]:.1f} ms); "
                  f"largest p still faster than p/2: "
                  f"{max([p for p in worlds[1:] if times[p] < times[p // 2]], default=1)}")


if __name__ == "__main__":
    main()
