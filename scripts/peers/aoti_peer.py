"""AOTInductor: torch.export.export, then a compiled package per thread count.

Inductor's C++ kernels are compiled for the thread count current at compile
time (torch._inductor.utils.parallel_num_threads: config.cpp.threads, else
torch.get_num_threads()), so each (case, T) gets its own package, compiled
with torch.set_num_threads(T) and run with the same setting
(https://pytorch.org/docs/stable/torch.compiler_aot_inductor.html).
"""

import os
import time

import torch


def compile_package(module, x, directory, key, threads):
    """Compiles (or reuses) the package of `key` for `threads`; returns its path and seconds taken.

    Raises whatever export or compilation raises.
    """
    path = os.path.join(directory, f"{key}_t{threads}.pt2")
    start = time.perf_counter()
    if not os.path.exists(path):
        torch.set_num_threads(threads)
        program = torch.export.export(module, (x,))
        torch._inductor.aoti_compile_and_package(program, package_path=path)
    return path, time.perf_counter() - start


def load(path):
    """The package's runner: a call x (tensor) -> y (tensor), under inference mode."""
    runner = torch._inductor.aoti_load_package(path)

    def call(x):
        with torch.inference_mode():
            return runner(x)
    return call
