#!/usr/bin/env python3
"""Runs mha-pipeline on a directory the pipeline reference wrote
(export_pipeline_reference.py) and compares each JSON line with what
transformers' pipeline (or sentence-transformers' encode) answered for that
text: labels, entities and words identical, scores and vectors within 1e-5.

Usage: check_pipeline_cli.py TOOL TASK DIR [TOOL OPTIONS...]
  text-classification with --all-labels compares with top_k=None's answers;
  token-classification with --aggregation S with S's (with --stride 8: stride_S's); text-generation with
  --greedy with greedy_new_text's texts, else with sampled's (pass the options
  of that case: --max-new-tokens, --new-text-only, --seed 0); summarization,
  translation and text2text-generation with the text-to-text reference's
  checkpoint_config texts, in its batches.
"""

import json
import math
import os
import subprocess
import sys


def close(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-5)
    return a == b


TEXT2TEXT_FIELDS = {"summarization": "summary_text", "translation": "translation_text",
                    "text2text-generation": "generated_text"}


def main():
    tool, task, directory, *options = sys.argv[1:]
    batch_size = "7"
    if task == "text-generation":
        with open(os.path.join(directory, "mha_generation_reference.json"), encoding="utf-8") as f:
            ref = json.load(f)
        case = "greedy_new_text" if "--greedy" in options else "sampled"
        ref["texts"] = ref["prompts"]
        expected = [[{"generated_text": t} for t in texts] for texts in ref[case]]
    elif task in TEXT2TEXT_FIELDS:
        with open(os.path.join(directory, "mha_text2text_reference.json"), encoding="utf-8") as f:
            ref = json.load(f)
        field = TEXT2TEXT_FIELDS[task]
        expected = [[{field: t} for t in texts] for texts in ref["checkpoint_config"]]
        batch_size = str(ref["batch_size"])
    elif task == "sentence-embedding":
        with open(os.path.join(directory, "mha_sentence_reference.json"), encoding="utf-8") as f:
            ref = json.load(f)
        expected = ref["embeddings"]
    else:
        with open(os.path.join(directory, "mha_pipeline_reference.json"), encoding="utf-8") as f:
            ref = json.load(f)
        if task == "text-classification":
            expected = ref["all" if "--all-labels" in options else "default"]
        else:
            strategy = options[options.index("--aggregation") + 1] if "--aggregation" in options else "none"
            expected = ref[("stride_" if "--stride" in options else "") + strategy]
    # A line per text: the texts holding a line break are left out.
    kept = [i for i, t in enumerate(ref["texts"]) if "\n" not in t and "\r" not in t]
    texts, expected = [ref["texts"][i] for i in kept], [expected[i] for i in kept]
    run = subprocess.run([tool, task, directory, "--batch-size", batch_size, *options],
                         input="\n".join(texts) + "\n", capture_output=True, text=True, check=True)
    lines = run.stdout.split("\n")[:-1]
    if len(lines) != len(texts):
        sys.exit(f"{len(lines)} lines for {len(texts)} texts")
    wrong = [i for i, (line, want) in enumerate(zip(lines, expected)) if not close(json.loads(line), want)]
    for i in wrong[:3]:
        print(f"text {i}: got {lines[i][:200]}\n  expected {json.dumps(expected[i])[:200]}")
    if wrong:
        sys.exit(f"{len(wrong)} of {len(texts)} answers differ")
    print(f"{task} {os.path.basename(directory)} {' '.join(options)}: {len(texts)} answers as the reference's")


if __name__ == "__main__":
    main()
