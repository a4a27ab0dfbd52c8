#!/usr/bin/env python3
"""Checks that src/'s folders and the public headers depend downward only (docs/architecture.md).

Each source file belongs to a stage: its folder under src/, or for the file
at src/'s root, `functional` (functional.cpp). A public header include/mha/X.h belongs to the stage that
implements it (HOMES), and its includes are checked as that stage's. A file may include headers of its own stage and of the
stages its stage builds on (BUILDS_ON); every other include is an error unless
EXCEPTIONS names it with its reason. docs/architecture.md shows the table and
the exceptions as `--markdown` prints them, and the check fails when it does not.

Usage: check_layers.py [--markdown] [ROOT]
"""

import pathlib
import re
import sys

# Each stage and the stages below it that it may use (not transitively closed:
# a stage lists everything it may include).
BUILDS_ON = {
    "common": [],
    "linear": ["common"],
    "attention": ["common", "linear"],
    "functional": ["common", "linear", "attention"],
    "cache": ["common"],
    "module": ["common", "linear", "attention", "cache"],
    "state_dict": ["common", "linear"],
    "transformer": ["common", "linear", "attention", "cache", "module"],
    "tensor_parallel": ["common", "linear", "attention", "functional", "module", "state_dict"],
    "quantization": ["common", "linear", "attention", "module", "transformer", "tensor_parallel"],
    "serving": ["common", "linear", "attention", "cache", "module", "transformer", "quantization"],
    "hugging_face": ["common", "linear", "attention", "cache", "module", "state_dict", "transformer",
                     "quantization"],
    "generation": ["common", "linear", "attention", "functional", "cache", "module", "state_dict",
                   "transformer", "tensor_parallel", "quantization", "serving", "hugging_face",
                   "text"],
    "text": ["common"],
    "pipelines": ["common", "linear", "attention", "functional", "cache", "module", "state_dict",
                  "transformer", "tensor_parallel", "quantization", "serving", "hugging_face",
                  "text", "generation"],
}

# The stage that implements each public header.
HOMES = {
    "kernel_switches.h": "common",
    "functional.h": "functional",
    "functional_options.h": "attention",
    "rotary_embedding.h": "attention",
    "attention_forward.h": "module",
    "multihead_attention.h": "module",
    "multihead_attention_options.h": "common",
    "kv_cache.h": "cache",
    "paged_kv_cache.h": "cache",
    "paged_stack_cache.h": "cache",
    "paged_sequences.h": "cache",
    "convertible_module.h": "linear",
    "state_dict.h": "state_dict",
    "attention_blocks.h": "state_dict",
    "layer_norm.h": "transformer",
    "transformer.h": "transformer",
    "transformer_coder.h": "transformer",
    "transformer_layers.h": "transformer",
    "transformer_cache.h": "transformer",
    "tensor_parallel.h": "tensor_parallel",
    "quantization.h": "quantization",
    "quantize_recipe.h": "linear",
    "prepack.h": "quantization",
    "batching.h": "serving",
    "hugging_face.h": "hugging_face",
    "hf_models.h": "hugging_face",
    "hf_encoder_models.h": "hugging_face",
    "hf_task_models.h": "hugging_face",
    "pipelines.h": "pipelines",
    "sentence_transformer.h": "pipelines",
    "text_generation_pipeline.h": "pipelines",
    "text2text_pipeline.h": "pipelines",
    "hf_language_models.h": "hugging_face",
    "generation_config.h": "generation",
    "generation.h": "generation",
    "generation_server.h": "generation",
    "logits_processors.h": "generation",
    "stopping_criteria.h": "generation",
    "mha.h": "pipelines",
    "tokenizer.h": "text",
}

# (stage, included header): why it is allowed although it points upward.
EXCEPTIONS = {}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def stage_of(path: pathlib.Path, src: pathlib.Path) -> str:
    rel = path.relative_to(src)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return {"functional.cpp": "functional"}.get(rel.name, "")


def target_stage(include: str, src: pathlib.Path):
    if include.startswith("mha/"):
        return HOMES.get(include[4:], "?")
    if (src / include).exists():
        parts = pathlib.Path(include).parts
        return parts[0] if len(parts) > 1 else stage_of(src / include, src)
    return None  # a system or third-party header


def check(root: pathlib.Path):
    src = root / "src"
    errors, used = [], set()
    for header in sorted((root / "include" / "mha").glob("*.h")):
        if header.name not in HOMES:
            errors.append(f"include/mha/{header.name}: no stage in HOMES")
    headers = sorted((root / "include" / "mha").glob("*.h"))
    for path in headers + sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cpp")):
        stage = HOMES.get(path.name, "?") if path in headers else stage_of(path, src)
        if stage not in BUILDS_ON:
            errors.append(f"{path.relative_to(root)}: not in a stage folder ({sorted(BUILDS_ON)})")
            continue
        for include in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target = target_stage(include, src)
            if target is None or target == stage or target in BUILDS_ON[stage]:
                continue
            if (stage, include) in EXCEPTIONS:
                used.add((stage, include))
                continue
            errors.append(f"{path.relative_to(root)}: {stage} includes {include} ({target}), "
                          f"which {stage} does not build on")
    for unused in sorted(set(EXCEPTIONS) - used):
        errors.append(f"exception {unused[0]} -> {unused[1]} is no longer needed: remove it")
    return errors


LABELS = {"functional": "`functional.cpp` (the functional API)"}


def label(stage: str) -> str:
    return LABELS.get(stage, f"`{stage}/`")


def markdown() -> str:
    """The layering table and the exceptions, as docs/architecture.md shows them."""
    rows = ["| stage | may include |", "|---|---|"]
    rows += [f"| {label(stage)} | {', '.join(label(b) for b in below) or 'nothing of mha'} |"
             for stage, below in BUILDS_ON.items()]
    exceptions = [f"- `{stage}` -> `{include}`: {why}."
                  for (stage, include), why in EXCEPTIONS.items()]
    if not exceptions:
        return "\n".join(rows) + "\n\nNo exceptions: every include points downward."
    return "\n".join(rows) + "\n\nExceptions, each with its reason:\n\n" + "\n".join(exceptions)


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    if "--markdown" in argv:
        print(markdown())
        return 0
    errors = check(root)
    architecture = (root / "docs" / "architecture.md")
    if not architecture.exists() or markdown() not in architecture.read_text(encoding="utf-8"):
        errors.append("docs/architecture.md does not show the layering table and its exceptions "
                      "as `scripts/check_layers.py --markdown` prints them")
    for e in errors:
        print(e)
    print(f"layering: {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
