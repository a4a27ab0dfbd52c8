"""The bert rows: mha's TextEncoderModel against transformers and ONNX Runtime on BERT-base.

The model of peers/bert.py, from its Hugging Face directory in mha
(load_hf_model: as loaded, prepacked; and with float weights,
prepack(false)), in memory in transformers (BertModel, eager attention,
under inference_mode), and in ONNX Runtime: the legacy exporter's graph as
it is ("ONNX Runtime") and after ONNX Runtime's BERT optimizer ("ORT
optimized", its fused operators in the check note);
sessions as peers/onnx_peer.py's (intra-op T, inter-op 1, sequential, every
graph optimisation). Per cell (N sequences of L random ids, all-ones mask)
and thread count: first every engine's last_hidden_state against
transformers' (any engine further than TOLERANCE fails the run), then
`rounds` rounds of mha's subprocesses (as loaded, float weights; one warm-up
call, then K timed) and the peers' K calls in this process. Each row's note
gives both engines' share of the floor that binds: the compute floor (the
layers' matmul FLOPs over the GEMM peak, torch.mm of 2048 x 2048 matrices)
or the read floor (the weights' bytes over the read sweep's bandwidth), both
measured once per thread count.
"""

import os

import numpy as np
import torch

from . import bert, onnx_peer, timing
from .report import Row

CELLS = {(1, 16): 20, (1, 128): 5, (8, 128): 3, (32, 128): 1}  # (N, L) -> calls per round
TOLERANCE = 1e-4        # largest accepted |engine - transformers| of an output element
PEAK_SIZE = 2048        # the GEMM peak's matrix size
PRECISIONS = ("float32", "float")
PAIRS = (("float32", "transformers"), ("float32", "ONNX Runtime"), ("float32", "ORT optimized"),
         ("float", "ORT optimized"))  # the rows of a cell: mha's precision, peer
TARGETS = {("float32", "transformers"): 0.8, ("float32", "ORT optimized"): 0.9}  # mha / peer


def _case_file(directory, ids, mask):
    """mha's case file, inside the model's directory (bench/peer_rounds.cpp, bert)."""
    path = os.path.join(directory, f"case_n{ids.size(0)}_l{ids.size(1)}.pt")
    torch.save({"input_ids": ids, "attention_mask": mask}, path)
    return path


def _session(path, threads, feed):
    """An ONNX Runtime session as peers/onnx_peer.py's; returns a call -> last_hidden_state."""
    sess = onnx_peer.inference_session(path, threads)
    return lambda: sess.run(None, feed)[0]


def _engines(model, graphs, threads, ids, mask):
    """Peer name -> one call on the cell's input, returning last_hidden_state (N, L, 768)."""
    def hf():
        with torch.inference_mode():
            return model(input_ids=ids, attention_mask=mask).last_hidden_state

    feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    calls = {name: _session(path, threads, feed) for name, path in graphs.items()}
    return {"transformers": hf, **calls}


def _diff(y, ref):
    """The largest |y - ref| of an element."""
    return float(np.abs(np.asarray(y, dtype=np.float32) - ref.numpy()).max())


def _mha_output(args, case_file, threads, precision, ref, work):
    """mha's last_hidden_state for the cell (one call), as numpy."""
    out = os.path.join(work, "bert_hidden.bin")
    timing.mha_round(args.cpp, case_file, "bert", threads, 1, 0, out=out, precision=precision)
    return np.fromfile(out, dtype=np.float32).reshape(ref.shape)


def _checks(name, args, case_file, threads, engines, work):
    """Engine -> max |difference| from transformers' output; raises beyond TOLERANCE."""
    torch.set_num_threads(threads)
    ref = engines["transformers"]()
    diffs = {p: _diff(_mha_output(args, case_file, threads, p, ref, work), ref) for p in PRECISIONS}
    diffs.update({peer: _diff(call(), ref) for peer, call in engines.items()})
    print(f"  T = {threads}: max abs diff from transformers: " +
          ", ".join(f"{e} {d:.2e}" for e, d in diffs.items()), flush=True)
    wrong = {e: d for e, d in diffs.items() if d > TOLERANCE}
    if wrong:
        raise RuntimeError(f"{name}, T = {threads}: output beyond {TOLERANCE:g} of transformers' "
                           f"(max abs diff {wrong})")
    return diffs


def _rounds(args, case_file, threads, engines, iters):
    """Engine -> per-round medians: mha's subprocesses (as loaded, float), then each peer."""
    times = {e: [] for e in (*PRECISIONS, *engines)}
    for _ in range(args.rounds):
        for precision in PRECISIONS:
            times[precision].append(timing.mha_round(args.cpp, case_file, "bert", threads, iters,
                                                     warmup=1, precision=precision))
        torch.set_num_threads(threads)
        for peer, call in engines.items():
            times[peer].append(timing.median_ms(call, iters))
    return times


def _ms(ms):
    """ms as the table gives them: 3 significant digits below 100, whole ms above."""
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def _floor_note(floors, mha_ms, peer_ms):
    """Which floor binds, and each engine's share of it (floor / median time): mha; peer."""
    kind = max(floors, key=floors.get)
    other = min(floors, key=floors.get)
    shares = "; ".join(f"{floors[kind] / np.median(ms):.0%}" for ms in (mha_ms, peer_ms))
    return (f"{kind} floor {_ms(floors[kind])} ms binds ({other} {_ms(floors[other])} ms): "
            f"{shares}")


def _fused_note(fused):
    """ONNX Runtime's fused operators, and whether Attention is among them."""
    counts = ", ".join(f"{op} {k}" for op, k in fused.items())
    return f"ORT fused {counts or 'nothing'}" + ("" if "Attention" in fused else "; NO Attention")


def _machine(threads):
    """(GEMM peak GFLOP/s, read bandwidth bytes/s) on `threads` threads."""
    return timing.gemm_peak(threads, size=PEAK_SIZE), timing.read_bandwidth(threads)


def _bounds(n, length, weights, machine):
    """(GFLOP of a call, GEMM peak, floor name -> ms) of a cell: compute and read floors."""
    peak, bandwidth = machine
    gflop = bert.flops(n, length) / 1e9
    return gflop, peak, {"compute": gflop / peak * 1e3, "read": weights / bandwidth * 1e3}


def rows(directory, model, work, args):
    """Every bert row: cell x threads x (mha precision, peer) of PAIRS."""
    print("bert", flush=True)
    graph = bert.export(model, work)
    optimized, fused = bert.optimize(graph)
    fused = _fused_note(fused)
    print(f"  {fused}", flush=True)
    graphs = {"ONNX Runtime": graph, "ORT optimized": optimized}
    machine = {threads: _machine(threads) for threads in args.threads}
    weights = bert.weight_bytes(model)
    result = []
    for (n, length), iters in list(CELLS.items())[:1] if args.smoke else CELLS.items():
        ids, mask = bert.inputs(n, length)
        case_file = _case_file(directory, ids, mask)
        for threads in args.threads:
            engines = _engines(model, graphs, threads, ids, mask)
            bounds = _bounds(n, length, weights, machine[threads])
            result += _timed_rows(f"bert ({n}, {length})", 1 if args.smoke else iters, args,
                                  case_file, threads, engines, bounds, fused, work)
    return result


def _timed_rows(name, iters, args, case_file, threads, engines, bounds, fused, work):
    """The rows of one cell on `threads` threads: PAIRS, timed over the same rounds."""
    print(f"{name}, T = {threads}", flush=True)
    diffs = _checks(name, args, case_file, threads, engines, work)
    load_start = os.getloadavg()[0]
    times = _rounds(args, case_file, threads, engines, iters)
    load = timing.load_span(load_start)
    gflop, peak, floors = bounds
    result = []
    for precision, peer in PAIRS:
        check = (f"{diffs[precision]:.1e}; {diffs[peer]:.1e}; "
                 f"{_floor_note(floors, times[precision], times[peer])}")
        if peer == "ORT optimized":
            check += f"; {fused}"
        mha = "as loaded" if precision == "float32" else "float weights"
        result.append(Row(f"{name}, mha {mha}", str(threads), peer, times[precision], times[peer],
                          check, gflop, peak, load=load, target=TARGETS.get((precision, peer)),
                          floor_ms=max(floors.values())))
    return result
