"""The BERT-base model of the bert rows, as a Hugging Face directory and as ONNX graphs.

transformers' BertModel at BERT-base's size (hidden 768, 12 layers, 12
heads, intermediate 3072, vocabulary 30,522, 512 positions, the pooler)
with random weights from a seed (no download; biases and LayerNorm affines
perturbed from their zero/one initialisation, so that the cross-check covers
them), eager attention, saved with save_pretrained. The ONNX graph is the
legacy exporter's (torch.onnx.export(dynamo=False), opset 17, batch and
sequence dynamic) with the inputs input_ids and attention_mask: ONNX
Runtime's BERT optimizer fuses Attention only where the graph has a mask
input, so every engine gets an all-ones mask (no padding). Its optimized
copy is onnxruntime.transformers.optimizer.optimize_model(model_type="bert").
"""

import os

import torch
import transformers as T
from torch import nn

HIDDEN, LAYERS, HEADS, INTERMEDIATE, VOCAB = 768, 12, 12, 3072, 30522
OPSET = 17
INPUTS, OUTPUTS = ("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output")


def config():
    """The BertConfig of the model (eager attention)."""
    return T.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                        num_attention_heads=HEADS, intermediate_size=INTERMEDIATE,
                        max_position_embeddings=512, attn_implementation="eager")


@torch.no_grad()
def write(directory, seed=0):
    """Saves the seeded model to `directory`; returns it (eval)."""
    torch.manual_seed(seed)
    model = T.BertModel(config()).eval()
    for p in model.parameters():
        if p.dim() == 1:
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(directory)
    return model


def inputs(n, length, seed=1):
    """(N, L) ids, none of them the pad token, and their all-ones attention mask."""
    ids = torch.randint(1, VOCAB, (n, length), generator=torch.Generator().manual_seed(seed))
    return ids, torch.ones_like(ids)


def flops(n, length):
    """Multiply-adds x 2 of the layers' matmuls: projections, FFN, scores and weighted sum."""
    tokens = n * length
    dense = 2 * tokens * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * INTERMEDIATE)
    attention = 2 * 2 * n * length * length * HIDDEN
    return LAYERS * (dense + attention)


def weight_bytes(model):
    """Bytes of the weights a call reads whole: all but the embedding tables (rows gathered)."""
    return 4 * sum(p.numel() for name, p in model.named_parameters()
                   if not name.startswith("embeddings.") or "LayerNorm" in name)


class _Outputs(nn.Module):
    """The model called with keywords, returning its two outputs as a tuple (for the export)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


def export(model, directory):
    """The legacy exporter's graph of the model in `directory`; returns its path."""
    path = os.path.join(directory, "bert.onnx")
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}}
    # eval, as the exporter restores the wrapper's training mode onto the model afterwards
    torch.onnx.export(_Outputs(model).eval(), inputs(2, 16), path, dynamo=False,
                      opset_version=OPSET, input_names=list(INPUTS), output_names=list(OUTPUTS),
                      dynamic_axes=axes)
    return path


def optimize(path):
    """ONNX Runtime's BERT optimizer on the graph: the optimized graph's path, fused op counts."""
    from onnxruntime.transformers import optimizer

    optimized = optimizer.optimize_model(path, model_type="bert", num_heads=HEADS,
                                         hidden_size=HIDDEN)
    out = path.replace(".onnx", "_optimized.onnx")
    optimized.save_model_to_file(out)
    fused = {op: k for op, k in optimized.get_fused_operator_statistics().items() if k}
    return out, fused
