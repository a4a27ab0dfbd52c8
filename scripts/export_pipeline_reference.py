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

Sentence embeddings (sentence-transformers 6.3's SentenceTransformer): a BERT
encoder of the bert tokenizer's vocabulary, as the package writes a model
today (`st_written`: mean pooling, a Tanh Dense to 16, Normalize,
max_seq_length 24) and in the published format (`st_<mode>`: modules.json
with sentence_transformers.models types, pooling_mode_* booleans,
sentence_bert_config.json's max_seq_length 32; each pooling mode, and cls +
mean together; on RoBERTa's byte-level tokenizer for lasttoken). Each gets
`mha_sentence_reference.json`: the texts and `SentenceTransformer(dir).encode(texts)`.

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


LEGACY_MODES = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
                "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
                "weightedmean": "pooling_mode_weightedmean_tokens",
                "lasttoken": "pooling_mode_lasttoken"}


def base_encoder(directory, tokenizer_dir, config_class, extra):
    """A random encoder of the tokenizer's vocabulary saved with it in `directory`."""
    tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(SEED)
    model = T.AutoModel.from_config(config_of(config_class, len(tokenizer), extra, {}))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def write_published(directory, modes, max_seq_length, dimension):
    """modules.json and the configs as published models hold them."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": max_seq_length, "do_lower_case": False}, f)
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    pooling = {"word_embedding_dimension": dimension}
    pooling.update({key: mode in modes for mode, key in LEGACY_MODES.items()})
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f)


def sentence_embeddings(out, tokenizers):
    from sentence_transformers import SentenceTransformer, models
    texts = texts_of(os.path.join(tokenizers, "bert_uncased"))
    written = os.path.join(out, "st_written")
    base_encoder(written + "_base", os.path.join(tokenizers, "bert_uncased"), T.BertConfig, {})
    word = models.Transformer(written + "_base", max_seq_length=24)
    torch.manual_seed(SEED)
    modules = [word, models.Pooling(32, pooling_mode="mean"),
               models.Dense(32, 16, activation_function=torch.nn.Tanh()), models.Normalize()]
    SentenceTransformer(modules=modules).save(written)
    cases = [("st_written", "bert_uncased")]
    for modes, tokenizer in ((("cls",), "bert_uncased"), (("max",), "bert_uncased"),
                             (("mean_sqrt_len_tokens",), "bert_uncased"),
                             (("weightedmean",), "bert_uncased"), (("lasttoken",), "roberta"),
                             (("cls", "mean"), "bert_uncased")):
        name = "st_" + "_".join(modes)
        family = (T.RobertaConfig, dict(pad_token_id=1)) if tokenizer == "roberta" else (T.BertConfig, {})
        base_encoder(os.path.join(out, name), os.path.join(tokenizers, tokenizer), *family)
        write_published(os.path.join(out, name), modes, 32, 32)
        cases.append((name, tokenizer))
    for name, tokenizer in cases:
        texts = texts_of(os.path.join(tokenizers, tokenizer))
        model = SentenceTransformer(os.path.join(out, name), device="cpu")
        vectors = model.encode(texts, batch_size=8, convert_to_tensor=True)
        with open(os.path.join(out, name, "mha_sentence_reference.json"), "w", encoding="utf-8") as f:
            json.dump({"texts": texts, "embeddings": vectors.tolist(),
                       "max_seq_length": model.max_seq_length}, f, ensure_ascii=False)
    return len(cases)


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
    sentence_models = sentence_embeddings(args.out, args.tokenizers)
    print(f"wrote {2 * len(FAMILIES)} task models and transformers {T.__version__}'s pipeline "
          f"answers, {sentence_models} sentence-transformers models and their embeddings to {args.out}")


if __name__ == "__main__":
    main()
