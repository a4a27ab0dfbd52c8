#!/usr/bin/env python3
"""Writes task models with real tokenizers and transformers' pipeline() answers
for the C++ tests of mha/pipelines.h.

For each text family (bert, roberta, distilbert, electra) the tokenizer the
tokenizer reference trained (export_tokenizer_reference.py's directories:
WordPiece for bert, distilbert and electra, byte-level BPE for roberta) is
saved beside a ...ForSequenceClassification and a ...ForTokenClassification
model built from a config (vocabulary of the tokenizer's size, weights of std
0.2 with a fixed seed), as `<family>_sequence_classification` and
`<family>_token_classification`. bert's tokenizer is saved with
model_max_length 24, so that its long texts are truncated. Each directory gets
`mha_pipeline_reference.json`: the texts (the first corpus lines of the
tokenizer reference and its edge cases) and transformers 5.23's pipeline
answers, one text at a time:
- text-classification: the default (the best label), top_k=None (all, best
  first) and function_to_apply="sigmoid" with top_k=2;
- token-classification: every aggregation_strategy (none, simple, first,
  average, max), and none with ignore_labels=[].

Usage: export_pipeline_reference.py --tokenizers DIR --out DIR
"""

import argparse
import json
import os
import warnings

import torch
import transformers as T

SEED = 0
FAMILIES = (("bert", "bert_uncased", T.BertConfig, {}),
            ("roberta", "roberta", T.RobertaConfig, dict(pad_token_id=1)),
            ("distilbert", "distilbert", T.DistilBertConfig, {}),
            ("electra", "electra", T.ElectraConfig, dict(embedding_size=16)))
SENTIMENT = dict(id2label={0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"})
ENTITIES = dict(id2label=dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "MISC"])))


def config_of(config_class, vocab, extra, labels):
    if config_class is T.DistilBertConfig:
        shape = dict(dim=32, n_layers=2, n_heads=4, hidden_dim=48)
    else:
        shape = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=48)
    return config_class(vocab_size=vocab, max_position_embeddings=512, initializer_range=0.2,
                        **shape, **extra, **labels)


def texts_of(tokenizer_dir):
    """The first 24 corpus lines and the edge cases (its last lines) but the 5,000-character word."""
    with open(os.path.join(tokenizer_dir, "mha_reference.json"), encoding="utf-8") as f:
        lines = json.load(f)["lines"]
    return [t for t in lines[:24] + lines[-20:] if 0 < len(t) < 1000]


def scores(answer):
    """A pipeline answer with plain floats (numpy's float32 are not JSON)."""
    if isinstance(answer, list):
        return [scores(a) for a in answer]
    if isinstance(answer, dict):
        return {k: (float(v) if k == "score" else (int(v) if k in ("index", "start", "end") else v))
                for k, v in answer.items()}
    return answer


def write(directory, values):
    with open(os.path.join(directory, "mha_pipeline_reference.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, ensure_ascii=False)


@torch.no_grad()
def task(out, family, tokenizer_dir, config_class, extra, model_class, labels, answers):
    tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
    if family == "bert":
        tokenizer.model_max_length = 24
    torch.manual_seed(SEED)
    model = model_class(config_of(config_class, len(tokenizer), extra, labels)).eval()
    name = family + "_" + ("sequence" if "Sequence" in model_class.__name__ else "token")
    directory = os.path.join(out, name + "_classification")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    texts = texts_of(tokenizer_dir)
    write(directory, dict(texts=texts, **answers(directory, texts)))


def text_classification(directory, texts):
    pipe = T.pipeline("text-classification", model=directory, device="cpu")
    return dict(default=[scores(pipe(t)) for t in texts],
                all=[scores(pipe(t, top_k=None)) for t in texts],
                sigmoid_top2=[scores(pipe(t, top_k=2, function_to_apply="sigmoid")) for t in texts])


def token_classification(directory, texts):
    pipe = T.pipeline("token-classification", model=directory, device="cpu")
    out = {s: [scores(pipe(t, aggregation_strategy=s)) for t in texts]
           for s in ("none", "simple", "first", "average", "max")}
    out["none_all_labels"] = [scores(pipe(t, ignore_labels=[])) for t in texts]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizers", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    for family, tokenizer_name, config_class, extra in FAMILIES:
        tokenizer_dir = os.path.join(args.tokenizers, tokenizer_name)
        prefix = config_class.__name__[:-len("Config")]
        task(args.out, family, tokenizer_dir, config_class, extra,
             getattr(T, f"{prefix}ForSequenceClassification"), SENTIMENT, text_classification)
        task(args.out, family, tokenizer_dir, config_class, extra,
             getattr(T, f"{prefix}ForTokenClassification"), ENTITIES, token_classification)
    print(f"wrote {2 * len(FAMILIES)} task models and transformers {T.__version__}'s pipeline "
          f"answers to {args.out}")


if __name__ == "__main__":
    main()
