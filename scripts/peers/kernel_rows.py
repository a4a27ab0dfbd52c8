"""The attention and encoder-layer rows: mha against ONNX Runtime and AOTInductor.

Per case: Python's output is the reference; the ONNX graph is exported once,
an AOTInductor package is compiled per thread count. Before any timing every
engine's output is compared with Python's, and an engine further than
TOLERANCE from it is not timed. Then `rounds` rounds: mha's subprocess (K
calls, median), each peer's K calls in this process (median), and for a
GEMM-bound case the GEMM peak.
"""

import os

import numpy as np
import torch

from . import aoti_peer, cases, onnx_peer, timing
from .report import Row

TOLERANCE = 1e-3  # largest accepted |engine - Python| of an output element


def _first_line(error):
    """The error's type and the first line of its message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _export(module, x, work, key):
    """The ONNX graph's path, or None and why not."""
    try:
        return onnx_peer.export(module, x, work, key), None
    except Exception as error:  # any export failure only removes this peer
        return None, f"did not export ({_first_line(error)})"


def _peers(case, module, x, work, threads, onnx_path):
    """Peer name -> call on the case's input, and peer name -> why it is missing."""
    calls, missing = {}, {}
    if onnx_path:
        run = onnx_peer.session(onnx_path, threads)
        x_np = x.numpy()
        calls["ONNX Runtime"] = lambda: run(x_np)
    try:
        path, seconds = aoti_peer.compile_package(module, x, work, case.key, threads)
        print(f"  T = {threads}: AOTInductor package in {seconds:.0f} s", flush=True)
        runner = aoti_peer.load(path)
        calls["AOTInductor"] = lambda: runner(x)
    except Exception as error:  # a failed compilation only removes this peer
        missing["AOTInductor"] = f"did not compile ({_first_line(error)})"
    return calls, missing


def _diff(y, ref):
    return float(np.abs(np.asarray(y, dtype=np.float32) - ref.numpy()).max())


def _check(case, case_file, work, threads, calls, ref, args):
    """Max |difference| from Python of mha and of each peer; drops the peers beyond TOLERANCE."""
    out = os.path.join(work, f"{case.key}_t{threads}.bin")
    timing.mha_round(args.cpp, case_file, case.kind, threads, 1, 0, out=out)
    mha = _diff(np.fromfile(out, dtype=np.float32).reshape(ref.shape), ref)
    torch.set_num_threads(threads)
    diffs = {name: _diff(call(), ref) for name, call in calls.items()}
    print(f"  T = {threads}: max abs diff from Python: mha {mha:.2e}, " +
          ", ".join(f"{n} {d:.2e}" for n, d in diffs.items()), flush=True)
    wrong = {n: f"output wrong (max abs diff {d:.2e})" for n, d in diffs.items() if d > TOLERANCE}
    return mha, diffs, wrong


def _rounds(case, case_file, threads, calls, args):
    """Per-round medians: mha's, each peer's, and the GEMM peaks (GEMM-bound cases)."""
    iters = 1 if args.smoke else case.iters
    mha, peers, peaks = [], {name: [] for name in calls}, []
    for _ in range(args.rounds):
        mha.append(timing.mha_round(args.cpp, case_file, case.kind, threads, iters, warmup=2))
        torch.set_num_threads(threads)
        for name, call in calls.items():
            peers[name].append(timing.median_ms(call, iters))
        if case.gemm_bound:
            peaks.append(timing.gemm_peak(threads))
    return mha, peers, peaks


def rows(case, work, args):
    """The case's rows: per thread count, one row per peer."""
    print(f"{case.name}", flush=True)
    module, x = cases.build(case)
    with torch.inference_mode():
        ref = module(x)
    case_file = os.path.join(work, f"{case.key}.pt")
    cases.write_kernel_file(case, module, x, case_file)
    onnx_path, onnx_missing = _export(module, x, work, case.key)
    result = []
    for threads in args.threads:
        calls, missing = _peers(case, module, x, work, threads, onnx_path)
        if onnx_missing:
            missing["ONNX Runtime"] = onnx_missing
        mha_diff, diffs, wrong = _check(case, case_file, work, threads, calls, ref, args)
        if mha_diff > TOLERANCE:
            raise RuntimeError(f"{case.name}: mha's output is {mha_diff:.2e} from Python's")
        missing.update(wrong)
        timed = {n: c for n, c in calls.items() if n not in wrong}
        load_start = os.getloadavg()[0]
        mha, peers, peaks = _rounds(case, case_file, threads, timed, args)
        load = timing.load_span(load_start)
        peak = float(np.median(peaks)) if peaks else None
        gflop = cases.flops(case) / 1e9 if case.gemm_bound else None
        for name in ("ONNX Runtime", "AOTInductor"):
            check = f"{mha_diff:.1e}; {diffs[name]:.1e}" if name in diffs else f"{mha_diff:.1e}; -"
            result.append(Row(case.name, str(threads), name, mha, peers.get(name, []), check,
                              gflop, peak, missing.get(name, ""), load, target=case.target))
    return result
