"""Timing helpers: mha's round in a subprocess, in-process medians, the GEMM peak, the read
bandwidth, a busy loop."""

import contextlib
import os
import statistics
import subprocess
import sys
import time

import torch

GEMM_SIZE = 1024  # the peak: torch.mm of two (1024, 1024) float32 matrices unless told


def mha_env(wait_policy=None):
    """The environment of mha's subprocess: this one's, with OMP_WAIT_POLICY set when given.

    "unset" removes it (the OpenMP runtime's default: libgomp spins a while before
    sleeping). The OpenMP runtime inside the torch wheel reads OMP_WAIT_POLICY
    when it loads, so it has to be set in the subprocess's environment.
    """
    env = dict(os.environ)
    if wait_policy == "unset":
        env.pop("OMP_WAIT_POLICY", None)
    elif wait_policy is not None:
        env["OMP_WAIT_POLICY"] = wait_policy
    return env


def wait_policy():
    """This environment's OMP_WAIT_POLICY, or "unset"."""
    return os.environ.get("OMP_WAIT_POLICY", "unset")


def mha_round(binary, case_file, kind, threads, iters, warmup, out=None, env=None,
              precision="float32"):
    """Runs peer_rounds once (bench/peer_rounds.cpp): the median ms of its `iters` calls."""
    command = [binary, f"--case={kind}", f"--weights={case_file}", f"--threads={threads}",
               f"--iters={iters}", f"--warmup={warmup}", f"--precision={precision}"]
    if out:
        command.append(f"--out={out}")
    stdout = subprocess.run(command, check=True, capture_output=True, text=True,
                            env=env or mha_env()).stdout
    return float(stdout.split("median_ms")[1].split()[0])


def mha_model_bytes(binary, case_file, precision):
    """(model bytes, embedding bytes) of the decode case's model in `precision` (peer_rounds --memory)."""
    command = [binary, "--case=decode", f"--weights={case_file}", "--threads=1", "--iters=1",
               f"--precision={precision}", "--memory"]
    words = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    return int(words[words.index("model_bytes") + 1]), int(words[words.index("embedding_bytes") + 1])


def median_ms(call, iters, warmup=1):
    """The median wall time of `iters` calls of `call` in ms, after `warmup` calls."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def gemm_peak(threads, iters=5, size=GEMM_SIZE):
    """GFLOP/s of torch.mm at size^3 on `threads` threads (median of `iters` calls)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    ms = median_ms(lambda: torch.mm(a, b), iters, warmup=2)
    return 2 * size ** 3 / (ms * 1e-3) / 1e9


def read_bandwidth(threads):
    """Bytes per second of torch.sum over a 1 GiB float32 tensor on `threads` threads."""
    torch.set_num_threads(threads)
    x = torch.ones(1 << 28)
    ms = median_ms(lambda: x.sum(), 5, warmup=2)
    return x.numel() * 4 / (ms * 1e-3)


@contextlib.contextmanager
def busy_loop():
    """A competing CPU-bound process (a Python busy loop) for the duration of the block."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let it start spinning
        yield
    finally:
        proc.terminate()
        proc.wait()


def load_average():
    """The 1, 5 and 15 minute load averages, as text."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def load_span(start):
    """The 1-minute load average at `start` (os.getloadavg()[0]) and now, as text."""
    return f"{start:.1f} to {os.getloadavg()[0]:.1f}"
