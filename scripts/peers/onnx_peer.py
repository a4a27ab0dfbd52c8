"""ONNX Runtime: the module exported by torch.onnx.export(dynamo=True), a session per thread count.

Export: opset 20, the input's fixed shape (no dynamic axes). Session
(https://onnxruntime.ai/docs/performance/tune-performance/threading.html):
intra_op_num_threads=T, inter_op_num_threads=1, sequential execution, every
graph optimisation (ORT_ENABLE_ALL), the CPU execution provider.
"""

import os

import onnxruntime as ort
import torch

OPSET = 20


def export(module, x, directory, key):
    """Writes the module's ONNX graph for input x; returns its path."""
    path = os.path.join(directory, f"{key}.onnx")
    if not os.path.exists(path):
        torch.onnx.export(module, (x,), path, dynamo=True, opset_version=OPSET,
                          input_names=["x"], output_names=["y"], verbose=False)
    return path


def session(path, threads):
    """An ORT session on `threads` intra-op threads; returns a call x (numpy) -> y (numpy)."""
    sess = inference_session(path, threads)
    return lambda x: sess.run(None, {"x": x})[0]


def inference_session(path, threads):
    """The ORT session of `path`: `threads` intra-op threads, sequential, every optimisation."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
