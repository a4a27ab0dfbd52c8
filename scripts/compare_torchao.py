#!/usr/bin/env python3
"""For information: mha's int8 numbers against torchao's int8 dynamic quantization.

torchao's Int8DynamicActivationInt8WeightConfig (per-channel symmetric int8
weights like mha's default recipe, but activations quantized per row, symmetric)
runs on the CPU on nn.Linear modules only; it cannot reach nn.MultiheadAttention's
in_proj_weight. So the comparison takes the int8 reference cases whose
converted weights are all nn.Linear (scripts/export_int8_reference.py: a Linear,
an encoder layer with only its feed-forward linears converted), quantizes the
same float module with torchao, and prints the max difference of each from
float32 and from each other. mha's outputs are the references' "expected.output"
(the int8 parity test checks mha equals them bitwise).

Needs torchao (pinned in scripts/bench_peers_requirements.txt; not used by CI).
Usage: compare_torchao.py REFERENCE_DIR   # e.g. build/tests/int8_reference
"""

import os
import sys
import warnings

import torch

from export_int8_reference import CASES, build, make_inputs, run

COMPARED = ("LinearPerChannel", "EncoderLayerLinearsOnly")


def main():
    warnings.simplefilter("ignore")
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    print("| case | max abs mha int8 - float32 | torchao - float32 | mha int8 - torchao |")
    print("|---|---|---|---|")
    torch.backends.mha.set_fastpath_enabled(False)
    for case in (c for c in CASES if c.name in COMPARED):
        saved = torch.load(os.path.join(sys.argv[1], case.name + ".pt"))
        module = build(case, torch.Generator().manual_seed(0))
        module.load_state_dict({k[6:]: v for k, v in saved.items() if k.startswith("model.")})
        inputs = {k[6:]: v for k, v in saved.items() if k.startswith("input.")}
        quantize_(module, Int8DynamicActivationInt8WeightConfig(),
                  filter_fn=lambda m, name: isinstance(m, torch.nn.Linear) and
                  not isinstance(m, torch.nn.modules.linear.NonDynamicallyQuantizableLinear))
        with torch.no_grad():
            torchao_out = run(case, module, inputs)[0]
        mha, reference = saved["expected.output"], saved["float.output"]
        print(f"| {case.name} | {(mha - reference).abs().max():.3g} | "
              f"{(torchao_out - reference).abs().max():.3g} | {(mha - torchao_out).abs().max():.3g} |")


if __name__ == "__main__":
    main()
