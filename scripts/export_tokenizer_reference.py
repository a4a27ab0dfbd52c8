#!/usr/bin/env python3
"""Writes tokenizer directories and transformers' outputs on them, for
tests/tokenizer_test.cpp (CTest fixture tokenizer_reference).

Nothing comes from the Hub: each tokenizer is trained with the `tokenizers`
package on a corpus of the fortune files Debian installs (scripts/setup.sh:
fortunes in English, German, Russian, Chinese, Spanish and Czech), saved by
transformers 5.23 as its family's class saves it, then read back with
`AutoTokenizer.from_pretrained` (what a Python user does), whose outputs are
the reference:

  <out>/<family>/            the directory (tokenizer.json, tokenizer_config.json;
                             gpt2's also a small random GPT-2 of its vocabulary and
                             generated.txt, transformers' greedy continuation of PROMPT;
                             bert_uncased's a small random BERT and embeddings.safetensors,
                             transformers' mean-pooled embeddings of SENTENCES)
  <out>/<family>/mha_reference.json
      lines: the test lines (every `--every`-th corpus line, then edge cases);
      ids: `tokenizer(line)["input_ids"]` for each;
      decoded, decoded_skip: `decode(ids)`, with `skip_special_tokens=True`;
      pair_ids: `tokenizer(a, b)` of consecutive lines;
      truncated: `tokenizer(line, truncation=True, max_length=12)` of the first
      300 lines and the edge cases; pair_<strategy>: `tokenizer(a, b,
      truncation=strategy, max_length=16)` (null where transformers refuses);
      lossy_ids, lossy_decoded: byte tokens that are not UTF-8, and their text;
      batch: `tokenizer(lines[:8], padding=True)` where the family has a pad
      token, else (batch_error) transformers' error message; batch_max_length:
      the same with `padding="max_length", truncation=True, max_length=24`.

Usage: export_tokenizer_reference.py --out DIR [--lines N]
"""

import argparse
import glob
import json
import os

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (AutoTokenizer, BertTokenizer, GPT2Tokenizer, PreTrainedTokenizerFast,
                          RobertaTokenizer)

FORTUNES = "/usr/share/games/fortunes"

# Inputs whose handling differs from ordinary prose.
EDGE_CASES = [
    "",
    " ",
    "   leading and trailing   ",
    "tabs\tand\nnewlines\r\n  end",
    "x" * 5000,
    "a special <|endoftext|> token in the text<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "emoji \U0001F600\U0001F44D\U0001F3FD and combining e\u0301 a\u0308",
    "Ελληνικά, русский, 中文, العربية, עברית",
    "numbers 12345 3.14159 1,000,000",
    "it's they're we've I'm you'll he'd",
    "[CLS] and [SEP] written in the text, [MASK] too",
    "<s>RoBERTa's <mask> and </s> in the text <pad>",
    "ÀÉÎÕÜ àéîõü İstanbul ǅ ß ΣΑΣ",
    "\u00a0non-breaking\u2003em space\u3000ideographic",
]


# Invalid UTF-8: a truncated 3-byte sequence, an overlong form, a surrogate,
# a truncated 4-byte one before ASCII, a lone continuation byte, and bytes
# never in UTF-8.
LOSSY_BYTES = [b"\xe2\x82", b"\xc0\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98a", b"\x80",
               b"\xff\xfe", b"ok\xe2\x82\xac"]


def corpus():
    """The fortune files' lines that are UTF-8 text, in a fixed order."""
    files = sorted(glob.glob(f"{FORTUNES}/*")) + sorted(glob.glob(f"{FORTUNES}/*/*"))
    lines = []
    for path in files:
        if os.path.isdir(path) or path.endswith((".dat", ".u8")) or os.path.islink(path):
            continue
        with open(path, "rb") as f:
            for raw in f.read().split(b"\n"):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if line.strip() and line.strip() != "%":
                    lines.append(line)
    if len(lines) < 50000:
        raise SystemExit(f"expected the fortune files under {FORTUNES} (scripts/setup.sh "
                         f"installs them), but found {len(lines)} lines")
    return lines


def byte_level_bpe(lines, special_tokens=("<|endoftext|>",)):
    """A byte-level BPE trained on `lines`: its vocabulary and merges."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    merges = [tuple(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    return tokenizer.get_vocab(), merges


def gpt2(directory, trained):
    """GPT-2's tokenizer as GPT2Tokenizer saves it (gpt2's and opt's pipeline)."""
    vocab, merges = trained
    GPT2Tokenizer(vocab=vocab, merges=merges).save_pretrained(directory)


def gpt2_left_bos(directory, trained):
    """The same with every option a GPT-2 directory may set: a prefix space,
    bos before each sequence, a pad token and left padding."""
    vocab, merges = trained
    GPT2Tokenizer(vocab=vocab, merges=merges, add_prefix_space=True, add_bos_token=True,
                  pad_token="<|endoftext|>", padding_side="left").save_pretrained(directory)


def roberta(directory, lines):
    """RoBERTa's tokenizer as RobertaTokenizer saves it (roberta; bart's class is the same)."""
    vocab, merges = byte_level_bpe(lines, ("<s>", "<pad>", "</s>", "<unk>", "<mask>"))
    RobertaTokenizer(vocab=vocab, merges=merges).save_pretrained(directory)


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def word_piece(lines, lowercase):
    """A WordPiece vocabulary trained on `lines` through BERT's normalizer."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=3000, special_tokens=BERT_SPECIALS,
                                        show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def bert_uncased(directory, lines):
    """BERT's tokenizer as BertTokenizer saves it (bert, distilbert, electra)."""
    vocab = word_piece(lines, lowercase=True).get_vocab()
    BertTokenizer(vocab=vocab, do_lower_case=True).save_pretrained(directory)


def bert_cased(directory, lines):
    """A cased BERT (accents kept), transformers' clean-up of decoded spaces on."""
    vocab = word_piece(lines, lowercase=False).get_vocab()
    BertTokenizer(vocab=vocab, do_lower_case=False,
                  clean_up_tokenization_spaces=True).save_pretrained(directory)


def word_piece_generic(directory, lines):
    """tokenizer.json's own pipeline under the generic class: BertNormalizer,
    BertPreTokenizer, WordPiece and its decoder, a [CLS] $A [SEP] template."""
    from tokenizers import processors
    tokenizer = word_piece(lines, lowercase=True)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]").save_pretrained(directory)


PROMPT = "Once upon a time, the fortune said"


def gpt2_model(directory, new_tokens=12):
    """A small random GPT-2 of the tokenizer's vocabulary in `directory`, and
    the text transformers' greedy generate + batch_decode continues PROMPT with
    (generated.txt; its smallest margin between the chosen token and the next
    must be well above float32 rounding, else a tie could flip a token)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    tokenizer = AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(7)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=64, n_layer=2,
                        n_head=4, bos_token_id=0, eos_token_id=0, initializer_range=0.2)
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(directory)
    inputs = tokenizer(PROMPT, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, output_scores=True, return_dict_in_generate=True,
                             pad_token_id=0)
    margin = min(float((s.topk(2).values[0, 0] - s.topk(2).values[0, 1])) for s in out.scores)
    if margin < 1e-3:
        raise SystemExit(f"gpt2 model: greedy margin {margin} is too small to compare tokens")
    text = tokenizer.batch_decode(out.sequences, skip_special_tokens=True)[0]
    with open(os.path.join(directory, "generated.txt"), "w", encoding="utf-8") as f:
        f.write(text)


SENTENCES = ["The early bird catches the worm.", "Der frühe Vogel fängt den Wurm.",
             "Кто рано встаёт, тому бог подаёт.", "A rolling stone gathers no moss."]


def bert_model(directory):
    """A small random BERT of the tokenizer's vocabulary in `directory`, and
    transformers' mean-pooled embeddings of SENTENCES (embeddings.safetensors)."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel
    tokenizer = AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(11)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
    model = BertModel(config).eval()
    model.save_pretrained(directory)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    save_file({"embeddings": ((hidden * mask).sum(1) / mask.sum(1)).contiguous()},
              os.path.join(directory, "embeddings.safetensors"))


def byte_chars():
    """GPT-2's byte -> character map (each byte's token in a byte-level BPE)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def reference(directory, lines):
    tokenizer = AutoTokenizer.from_pretrained(directory)
    ids = [tokenizer(line)["input_ids"] for line in lines]
    values = {
        "class": type(tokenizer).__name__,
        "lines": lines,
        "ids": ids,
        "decoded": [tokenizer.decode(i) for i in ids],
        "decoded_skip": [tokenizer.decode(i, skip_special_tokens=True) for i in ids],
        "pair_ids": [tokenizer(a, b)["input_ids"] for a, b in zip(lines[:200:2], lines[1:200:2])],
    }
    # Truncation to 12 ids (special tokens included) of single texts, and of
    # pairs to 16 ids by each strategy (None where transformers refuses).
    short = lines[:300] + lines[-len(EDGE_CASES):]
    values["truncated"] = [tokenizer(line, truncation=True, max_length=12)["input_ids"]
                           for line in short]
    for strategy in ("longest_first", "only_first", "only_second"):
        truncated = []
        for a, b in zip(lines[:200:2], lines[1:200:2]):
            try:
                truncated.append(tokenizer(a, b, truncation=strategy, max_length=16)["input_ids"])
            except Exception:  # tokenizers: the sequence to truncate is too short
                truncated.append(None)
        values[f"pair_{strategy}"] = truncated
    # Byte sequences that are not UTF-8, one byte token each: decoded with U+FFFD.
    chars = byte_chars()
    values["lossy_ids"] = [tokenizer.convert_tokens_to_ids([chars[b] for b in bad])
                           for bad in LOSSY_BYTES]
    values["lossy_decoded"] = [tokenizer.decode(ids) for ids in values["lossy_ids"]]
    try:
        batch = tokenizer(lines[:8], padding=True)
        values["batch"] = {"input_ids": batch["input_ids"],
                           "attention_mask": batch["attention_mask"]}
        batch = tokenizer(lines[:8], padding="max_length", truncation=True, max_length=24)
        values["batch_max_length"] = {"input_ids": batch["input_ids"],
                                      "attention_mask": batch["attention_mask"]}
    except ValueError as e:
        values["batch_error"] = str(e)
    with open(os.path.join(directory, "mha_reference.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, ensure_ascii=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--lines", type=int, default=10000,
                        help="corpus lines to compare, spread over the whole corpus")
    args = parser.parse_args()
    lines = corpus()
    step = max(1, len(lines) // args.lines)
    test_lines = lines[::step][: args.lines] + EDGE_CASES
    trained = byte_level_bpe(lines)
    families = {"gpt2": lambda d: (gpt2(d, trained), gpt2_model(d)),
                "gpt2_left_bos": lambda d: gpt2_left_bos(d, trained),
                "roberta": lambda d: roberta(d, lines),
                "bert_uncased": lambda d: (bert_uncased(d, lines), bert_model(d)),
                "bert_cased": lambda d: bert_cased(d, lines),
                "word_piece_generic": lambda d: word_piece_generic(d, lines)}
    for family, build in families.items():
        directory = os.path.join(args.out, family)
        os.makedirs(directory, exist_ok=True)
        build(directory)
        reference(directory, test_lines)
        print(f"{family}: {len(test_lines)} lines")


if __name__ == "__main__":
    main()
