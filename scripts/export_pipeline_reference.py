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
  first) and function_to_apply="sigmoid" with top_k=2; `pairs`: consecutive
  texts as {"text": a, "text_pair": b} with top_k=None, truncation=True;
- token-classification: every aggregation_strategy (none, simple, first,
  average, max), and none with ignore_labels=[]; each but none with
  stride=TOKEN_STRIDE (bert's long texts in windows of 24 tokens).

Sentence embeddings (sentence-transformers 6.3's SentenceTransformer): a BERT
encoder of the bert tokenizer's vocabulary, as the package writes a model
today (`st_written`: mean pooling, a Tanh Dense to 16, Normalize,
max_seq_length 24) and in the published format (`st_<mode>`: modules.json
with sentence_transformers.models types, pooling_mode_* booleans,
sentence_bert_config.json's max_seq_length 32; each pooling mode, and cls +
mean together; on RoBERTa's byte-level tokenizer for lasttoken). Each gets
`mha_sentence_reference.json`: the texts and `SentenceTransformer(dir).encode(texts)`.

Question answering (`<family>_question_answering`, bert and roberta): transformers
5.x's pipeline() has no "question-answering" task any more, so `qa_reference`
below is transformers 4.x's QuestionAnsweringPipeline (preprocess's windows and
p_mask, select_starts_ends, decode_spans, postprocess and get_indices)
ported over AutoModelForQuestionAnswering's logits of each window;
`mha_qa_reference.json` holds questions (a corpus line's first three words, at most 20 characters),
contexts (the next five lines joined)
and the answers for: the defaults (align_to_words=True); max_seq_len 64 with doc_stride 16 (many
windows); that with top_k 3, max_answer_len 4 and handle_impossible_answer; and the first
and third with align_to_words=False (`tokens`, `windows_top3_tokens`).

Text generation (`gpt2_text_generation`: the tokenizer reference's small random
GPT-2 and its tokenizer): `mha_generation_reference.json` holds a few short
prompts, the generate() arguments the pipeline adds to a call (`call_defaults`),
and transformers' `pipeline("text-generation")` texts for each of
GENERATION_CASES (the pipeline's default sampling, greedy new text, two sampled
sequences), each prompt after `torch.manual_seed(SEED + index)`, and of
BATCHED_GENERATION_CASES (all prompts in one call, left-padded batches, one seed;
the tokenizer is saved with its end token as pad token, which batching needs).

Text to text (`bart_text2text`: a small random BART on the bart tokenizer, with
a generation config of its own and config.json's `prefix`):
`mha_text2text_reference.json` holds texts of different lengths and, for each
of TEXT2TEXT_CASES, what transformers 4.x's text2text pipelines returned:
generate() on padded batches of the prefixed texts, batch_decode without
special tokens (transformers 5.x removed those pipelines).

Usage: export_pipeline_reference.py --tokenizers DIR --out DIR
"""

import argparse
import json
import os
import warnings

import numpy as np
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
    pairs = list(zip(texts[0::2], texts[1::2]))
    return dict(default=[scores(pipe(t)) for t in texts],
                all=[scores(pipe(t, top_k=None)) for t in texts],
                sigmoid_top2=[scores(pipe(t, top_k=2, function_to_apply="sigmoid")) for t in texts],
                pairs=[scores(pipe({"text": a, "text_pair": b}, top_k=None, truncation=True))
                       for a, b in pairs])


TOKEN_STRIDE = 8


def token_classification(directory, texts):
    pipe = T.pipeline("token-classification", model=directory, device="cpu")
    out = {s: [scores(pipe(t, aggregation_strategy=s)) for t in texts]
           for s in ("none", "simple", "first", "average", "max")}
    out["none_all_labels"] = [scores(pipe(t, ignore_labels=[])) for t in texts]
    for s in ("simple", "first", "average", "max"):
        out["stride_" + s] = [scores(pipe(t, aggregation_strategy=s, stride=TOKEN_STRIDE))
                              for t in texts]
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


def decode_spans(start, end, topk, max_answer_len, undesired_tokens):
    """transformers 4.x's decode_spans (pipelines/question_answering.py)."""
    outer = np.matmul(np.expand_dims(start, -1), np.expand_dims(end, 1))
    candidates = np.tril(np.triu(outer), max_answer_len - 1)
    scores_flat = candidates.flatten()
    if topk == 1:
        idx_sort = [np.argmax(scores_flat)]
    elif len(scores_flat) < topk:
        idx_sort = np.argsort(-scores_flat)
    else:
        idx = np.argpartition(-scores_flat, topk)[0:topk]
        idx_sort = idx[np.argsort(-scores_flat[idx])]
    starts, ends = np.unravel_index(idx_sort, candidates.shape)[1:]
    desired_spans = np.isin(starts, undesired_tokens.nonzero()) & np.isin(ends, undesired_tokens.nonzero())
    starts = starts[desired_spans]
    ends = ends[desired_spans]
    scores = candidates[0, starts, ends]
    return starts, ends, scores


def select_starts_ends(start, end, p_mask, attention_mask, min_null_score, top_k,
                       handle_impossible_answer, max_answer_len):
    """transformers 4.x's select_starts_ends."""
    undesired_tokens = np.abs(np.array(p_mask) - 1)
    if attention_mask is not None:
        undesired_tokens = undesired_tokens & attention_mask
    undesired_tokens_mask = undesired_tokens == 0.0
    start = np.where(undesired_tokens_mask, -10000.0, start)
    end = np.where(undesired_tokens_mask, -10000.0, end)
    start = np.exp(start - start.max(axis=-1, keepdims=True))
    start = start / start.sum()
    end = np.exp(end - end.max(axis=-1, keepdims=True))
    end = end / end.sum()
    if handle_impossible_answer:
        min_null_score = min(min_null_score, (start[0, 0] * end[0, 0]).item())
    start[0, 0] = end[0, 0] = 0.0
    starts, ends, scores = decode_spans(start, end, top_k, max_answer_len, undesired_tokens)
    return starts, ends, scores, min_null_score


@torch.no_grad()
def get_indices(enc, s, e, sequence_index, align_to_words):
    """transformers 4.x's QuestionAnsweringPipeline.get_indices on a tokenizers Encoding."""
    if align_to_words:
        try:
            start_word = enc.token_to_word(s)
            end_word = enc.token_to_word(e)
            start_index = enc.word_to_chars(start_word, sequence_index=sequence_index)[0]
            end_index = enc.word_to_chars(end_word, sequence_index=sequence_index)[1]
        except Exception:
            start_index = enc.offsets[s][0]
            end_index = enc.offsets[e][1]
    else:
        start_index = enc.offsets[s][0]
        end_index = enc.offsets[e][1]
    return start_index, end_index


def qa_reference(model, tokenizer, question, context, top_k=1, max_seq_len=None, doc_stride=None,
                 max_answer_len=15, handle_impossible_answer=False, align_to_words=True):
    """transformers 4.x's QuestionAnsweringPipeline on one (question, context)."""
    if max_seq_len is None:
        max_seq_len = min(tokenizer.model_max_length, 384)
    if doc_stride is None:
        doc_stride = min(max_seq_len // 2, 128)
    enc = tokenizer(text=question, text_pair=context, truncation="only_second", max_length=max_seq_len,
                    stride=doc_stride, return_token_type_ids=True, return_overflowing_tokens=True,
                    return_offsets_mapping=True, return_special_tokens_mask=True)
    min_null_score = 1000000
    answers = []
    for span in range(len(enc["input_ids"])):
        ids = enc["input_ids"][span]
        p_mask = [tok != 1 for tok in enc.sequence_ids(span)]
        for cls_index in np.nonzero(np.array(ids) == tokenizer.cls_token_id)[0]:
            p_mask[cls_index] = 0
        inputs = {"input_ids": torch.tensor([ids]),
                  "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        if "token_type_ids" in tokenizer.model_input_names:  # _forward's model inputs
            inputs["token_type_ids"] = torch.tensor([enc["token_type_ids"][span]])
        out = model(**inputs)
        p_mask = torch.tensor(p_mask, dtype=torch.long).unsqueeze(0).numpy()
        attention_mask = np.ones((1, len(ids)), dtype=np.int64)
        starts, ends, scores, min_null_score = select_starts_ends(
            out.start_logits.numpy(), out.end_logits.numpy(), p_mask, attention_mask, min_null_score,
            top_k, handle_impossible_answer, max_answer_len)
        for s, e, score in zip(starts, ends, scores):
            # the question first (padding on the right): the context is sequence 1
            start_index, end_index = get_indices(enc.encodings[span], int(s), int(e), 1,
                                                 align_to_words)
            answers.append({"score": score.item(), "start": start_index, "end": end_index,
                            "answer": context[start_index:end_index]})
    if handle_impossible_answer:
        answers.append({"score": min_null_score, "start": 0, "end": 0, "answer": ""})
    return sorted(answers, key=lambda x: x["score"], reverse=True)[:top_k]


@torch.no_grad()
def question_answering(out, tokenizers):
    for family, tokenizer_name, config_class, extra in FAMILIES[:2]:
        tokenizer_dir = os.path.join(tokenizers, tokenizer_name)
        tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
        prefix = config_class.__name__[:-len("Config")]
        torch.manual_seed(SEED)
        model = getattr(T, f"{prefix}ForQuestionAnswering")(
            config_of(config_class, len(tokenizer), extra, {})).eval()
        directory = os.path.join(out, f"{family}_question_answering")
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        lines = [t for t in texts_of(tokenizer_dir) if "\n" not in t]
        questions = [" ".join(line.split()[:3])[:20] + "?" for line in lines[:12]]  # a few words
        contexts = [" ".join(lines[i + 1:i + 6]) for i in range(12)]
        settings = {"default": {}, "windows": dict(max_seq_len=64, doc_stride=16),
                    "windows_top3": dict(max_seq_len=64, doc_stride=16, top_k=3, max_answer_len=4,
                                         handle_impossible_answer=True),
                    "tokens": dict(align_to_words=False),
                    "windows_top3_tokens": dict(max_seq_len=64, doc_stride=16, top_k=3,
                                                max_answer_len=4, handle_impossible_answer=True,
                                                align_to_words=False)}
        values = {"questions": questions, "contexts": contexts}
        for name, setting in settings.items():
            values[name] = [qa_reference(model, tokenizer, q, c, **setting)
                            for q, c in zip(questions, contexts)]
        with open(os.path.join(directory, "mha_qa_reference.json"), "w", encoding="utf-8") as f:
            json.dump(values, f, ensure_ascii=False)


GENERATION_CASES = {
    "sampled": dict(max_new_tokens=8),
    "greedy_new_text": dict(max_new_tokens=10, do_sample=False, return_full_text=False),
    "sampled_two": dict(max_new_tokens=6, num_return_sequences=2, temperature=1.3),
}


BATCHED_GENERATION_CASES = {
    "batched_sampled": dict(max_new_tokens=8, batch_size=4),
    "batched_greedy": dict(max_new_tokens=10, do_sample=False, batch_size=3),
}


@torch.no_grad()
def text_generation(out, tokenizers):
    """transformers' pipeline("text-generation") on the tokenizer reference's small
    random GPT-2, each prompt after torch.manual_seed(SEED + its index)."""
    source = os.path.join(tokenizers, "gpt2")
    directory = os.path.join(out, "gpt2_text_generation")
    T.AutoModelForCausalLM.from_pretrained(source).save_pretrained(directory)
    tokenizer = T.AutoTokenizer.from_pretrained(source)
    tokenizer.pad_token = tokenizer.eos_token  # batching needs one (pad_collate_fn)
    tokenizer.save_pretrained(directory)
    prompts = [t for t in texts_of(source) if 0 < len(tokenizer(t)["input_ids"]) <= 24][:6]
    pipe = T.pipeline("text-generation", model=directory, device="cpu")
    # The generate() arguments the pipeline adds to a call that sets none.
    added = pipe._prepare_generate_kwargs({})
    values = {"prompts": prompts,
              "call_defaults": {k: added.get(k) for k in ("max_new_tokens", "do_sample",
                                                          "temperature")}}
    for name, kwargs in GENERATION_CASES.items():
        values[name] = []
        for i, prompt in enumerate(prompts):
            torch.manual_seed(SEED + i)
            values[name].append([r["generated_text"] for r in pipe(prompt, **kwargs)])
    for name, kwargs in BATCHED_GENERATION_CASES.items():
        torch.manual_seed(SEED)
        values[name] = [[r["generated_text"] for r in each] for each in pipe(prompts, **kwargs)]
    with open(os.path.join(directory, "mha_generation_reference.json"), "w",
              encoding="utf-8") as f:
        json.dump(values, f, ensure_ascii=False)


TEXT2TEXT_PREFIX = "summarize: "
TEXT2TEXT_BATCH = 3
TEXT2TEXT_CASES = {
    "checkpoint_config": {},
    "greedy": dict(max_new_tokens=10, num_beams=1, no_repeat_ngram_size=0),
    "beams_two": dict(max_new_tokens=8, num_beams=3, num_return_sequences=2),
    "sampled_two": dict(max_new_tokens=8, num_beams=1, do_sample=True, top_k=0,
                        num_return_sequences=2),
}


def greedy_margin(model, inputs, kwargs):
    """The smallest gap between a greedy step's two best processed scores."""
    out = model.generate(**inputs, **kwargs, output_scores=True, return_dict_in_generate=True)
    top = torch.stack(out.scores).topk(2, dim=-1).values  # (steps, B, 2)
    finite = torch.isfinite(top).all(-1)
    return (top[..., 0] - top[..., 1])[finite].min().item()


@torch.no_grad()
def text2text_generation(out, tokenizers):
    """transformers 4.x's text2text pipelines (summarization, translation): the
    config's prefix before each text, padded batches of TEXT2TEXT_BATCH,
    generate() with the checkpoint's generation config and each case's
    arguments, batch_decode without special tokens; a small random BART on
    the bart tokenizer, sampled cases after torch.manual_seed(SEED)."""
    source = os.path.join(tokenizers, "bart")
    directory = os.path.join(out, "bart_text2text")
    tokenizer = T.AutoTokenizer.from_pretrained(source)
    config = T.BartConfig(vocab_size=len(tokenizer), d_model=32, encoder_layers=2,
                          decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                          encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=128,
                          init_std=0.2, pad_token_id=tokenizer.pad_token_id, bos_token_id=0,
                          eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2,
                          prefix=TEXT2TEXT_PREFIX)
    torch.manual_seed(SEED)
    model = T.BartForConditionalGeneration(config).eval()
    model.generation_config = T.GenerationConfig(
        num_beams=2, max_length=16, no_repeat_ngram_size=3, bos_token_id=0, eos_token_id=2,
        pad_token_id=tokenizer.pad_token_id, decoder_start_token_id=2, forced_eos_token_id=2)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    texts = [t for t in texts_of(source)
             if 0 < len(tokenizer(t)["input_ids"]) <= 40 and "\n" not in t and "\r" not in t][:7]
    batches = [texts[i:i + TEXT2TEXT_BATCH] for i in range(0, len(texts), TEXT2TEXT_BATCH)]
    values = {"texts": texts, "prefix": TEXT2TEXT_PREFIX, "batch_size": TEXT2TEXT_BATCH}
    for name, kwargs in TEXT2TEXT_CASES.items():
        torch.manual_seed(SEED)
        values[name] = []
        for batch in batches:
            inputs = tokenizer([TEXT2TEXT_PREFIX + t for t in batch], padding=True,
                               return_tensors="pt")
            if name == "greedy" and greedy_margin(model, inputs, kwargs) < 1e-3:
                raise SystemExit("text2text: a greedy step's best two scores are too close")
            decoded = tokenizer.batch_decode(model.generate(**inputs, **kwargs),
                                             skip_special_tokens=True)
            each = len(decoded) // len(batch)
            values[name] += [decoded[i:i + each] for i in range(0, len(decoded), each)]
    with open(os.path.join(directory, "mha_text2text_reference.json"), "w",
              encoding="utf-8") as f:
        json.dump(values, f, ensure_ascii=False)


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
    question_answering(args.out, args.tokenizers)
    text_generation(args.out, args.tokenizers)
    text2text_generation(args.out, args.tokenizers)
    print(f"wrote {2 * len(FAMILIES)} task models and transformers {T.__version__}'s pipeline "
          f"answers, {sentence_models} sentence-transformers models and their embeddings, 2 question "
          f"answering models and transformers 4.x's answers, a text generation model and its texts, a "
          f"text-to-text model and its texts to {args.out}")


if __name__ == "__main__":
    main()
