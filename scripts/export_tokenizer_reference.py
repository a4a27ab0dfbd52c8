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
                             generated.txt, transformers' greedy continuation of PROMPT,
                             generated_stop.json, the same stopped by a stop string;
                             bert_uncased's a small random BERT and embeddings.safetensors,
                             transformers' mean-pooled embeddings of SENTENCES)
  <out>/<family>/mha_reference.json
      lines: the test lines (every `--every`-th corpus line, then edge cases);
      ids, offsets: `tokenizer(line, return_offsets_mapping=True)`'s
      input_ids and offset_mapping for each; pair_offsets: those of the pairs;
      decoded, decoded_skip: `decode(ids)`, with `skip_special_tokens=True`;
      pair_ids: `tokenizer(a, b)` of consecutive lines; pair_type_ids: their
      token_type_ids (pair_type_ids_plain: of the first 20 without special tokens);
      truncated: `tokenizer(line, truncation=True, max_length=12)` of the first
      300 lines and the edge cases (truncated_offsets: their offset_mapping); pair_<strategy>: `tokenizer(a, b,
      truncation=strategy, max_length=16)` (null where transformers refuses);
      lossy_ids, lossy_decoded: byte tokens that are not UTF-8, and their text;
      word_ids, pair_word_ids: `word_ids()` (None as -1) of the truncated lines
      (untruncated) and of the pairs;
      overflow: `tokenizer(line, truncation=True, max_length=12, stride=4,
      return_overflowing_tokens=True)["input_ids"]` of 100 lines and the edge
      cases; overflow_windows: only_second's windows' offset_mapping,
      token_type_ids and sequence_ids (None as -1); overflow_<strategy>: pairs with max_length=20, stride=2 (null where
      tokenizers panics);
      batch: `tokenizer(lines[:8], padding=True, return_offsets_mapping=True)` where the family has a pad
      token, else (batch_error) transformers' error message; batch_max_length:
      the same with `padding="max_length", truncation=True, max_length=24`;
      stop_strings, stop_cases: StopStringCriteria's answer on id sequences
      (stop_error: its message where it refuses the stop strings).

The output depends only on this script, the packages and the corpus: it is
kept under --cache (default $MHA_REFERENCE_CACHE, else ~/.cache/mha/reference)
by a hash of those and the arguments, and copied from there when present (a
second build, the sanitizer one, does not write it again).

Usage: export_tokenizer_reference.py --out DIR [--lines N] [--families a,b,...]
                                     [--cache DIR]
"""

import argparse
import functools
import glob
import json
import os
import shutil

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)
from transformers import (AutoTokenizer, BertTokenizer, DistilBertTokenizer, GPT2Tokenizer,
                          LlamaTokenizer,
                          PreTrainedTokenizerFast, Qwen2Tokenizer, RobertaTokenizer)

FORTUNES = "/usr/share/games/fortunes"
os.environ.setdefault("RUST_BACKTRACE", "0")  # tokenizers' expected panics, in one line

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
    "a written \u2581 metaspace, a <0x41> byte token, <s>bos</s> and <unk>, a<sep>b",
    "Ligatures \ufb01 \ufb02, full-width \uff21\uff22\uff23 \uff11\uff12, \u2460 \u00bd",
    "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 \u0939\u093f\u0928\u094d\u0926\u0940 \ud55c\uad6d\uc5b4 \u65e5\u672c\u8a9e",
    "IT'S THEY'RE 123456789 x\r\ny\n\n\nz",
    "ony testimony ony, Tony ony_ \u00e9ony ony\u0301 ony.",
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


ROBERTA_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def with_class(directory, tokenizer_class):
    """The saved tokenizer_config.json naming `tokenizer_class`, as older
    checkpoints name theirs (transformers 5.23 maps the name to its class)."""
    path = os.path.join(directory, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["tokenizer_class"] = tokenizer_class
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


def roberta(directory, trained):
    """RoBERTa's tokenizer as RobertaTokenizer saves it."""
    vocab, merges = trained
    RobertaTokenizer(vocab=vocab, merges=merges).save_pretrained(directory)


def bart(directory, trained):
    """BART's: RoBERTa's class under the name BART checkpoints give it."""
    roberta(directory, trained)
    with_class(directory, "BartTokenizer")


def opt(directory, trained):
    """OPT's: GPT2Tokenizer with </s> as bos (before each sequence) and a pad token."""
    vocab, merges = trained
    GPT2Tokenizer(vocab=vocab, merges=merges, bos_token="</s>", eos_token="</s>",
                  unk_token="</s>", pad_token="<pad>", add_bos_token=True).save_pretrained(directory)


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


def distilbert(directory, lines):
    """DistilBERT's: BertTokenizer's pipeline under DistilBertTokenizer."""
    vocab = word_piece(lines, lowercase=True).get_vocab()
    DistilBertTokenizer(vocab=vocab).save_pretrained(directory)


def electra(directory, lines):
    """ELECTRA's: BertTokenizer under the name ElectraTokenizer (5.23 has no such class)."""
    bert_uncased(directory, lines)
    with_class(directory, "ElectraTokenizer")


def bert_cased(directory, lines):
    """A cased BERT (accents kept), transformers' clean-up of decoded spaces on."""
    vocab = word_piece(lines, lowercase=False).get_vocab()
    BertTokenizer(vocab=vocab, do_lower_case=False,
                  clean_up_tokenization_spaces=True).save_pretrained(directory)


def word_piece_generic(directory, lines):
    """tokenizer.json's own pipeline under the generic class: BertNormalizer,
    BertPreTokenizer, WordPiece and its decoder, a [CLS] $A [SEP] template,
    and a single_word added token."""
    from tokenizers import AddedToken
    tokenizer = word_piece(lines, lowercase=True)
    tokenizer.add_tokens([AddedToken("ony", single_word=True, normalized=False)])
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]").save_pretrained(directory)


BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def llama2(directory, lines):
    """A Llama-2-style tokenizer as LlamaTokenizer saves it: a SentencePiece-
    style BPE with byte fallback (the 256 <0xXX> tokens after <unk>, <s>,
    </s>) on a small alphabet, so rare characters fall back to bytes."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, limit_alphabet=120, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    tokenizer.train_from_iterator(lines, trainer)
    merges = [tuple(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    LlamaTokenizer(vocab=tokenizer.get_vocab(), merges=merges, add_bos_token=True,
                   pad_token="<unk>").save_pretrained(directory)


def llama2_spm(directory, lines):
    """Llama 2's directory as published: a SentencePiece BPE tokenizer.model
    with byte fallback (trained by the sentencepiece package with Llama 2's
    settings: identity normalization, digits split, spaces kept) and a
    tokenizer_config.json naming LlamaTokenizer, no tokenizer.json:
    transformers reads the model's pieces into its own pipeline."""
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines[::4]), model_prefix=os.path.join(directory, "tokenizer"),
        model_type="bpe", vocab_size=3000, byte_fallback=True, character_coverage=0.995,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, user_defined_symbols=["<sep>"], minloglevel=2)
    os.remove(os.path.join(directory, "tokenizer.vocab"))
    config = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
              "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>",
              "legacy": False, "model_max_length": 4096}
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split_byte_level_bpe(lines, pattern, special_tokens, normalizer=None):
    """A byte-level BPE behind a Split pre-tokenizer (Llama 3's and Qwen2's
    way), trained on `lines`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    return tokenizer


def llama3(directory, lines):
    """A Llama-3-style tokenizer.json under the generic class: Split +
    ByteLevel, BPE with ignore_merges, <|begin_of_text|> before each sequence."""
    tokenizer = split_byte_level_bpe(lines, LLAMA3_PATTERN,
                                     ["<|begin_of_text|>", "<|end_of_text|>"])
    spec = json.loads(tokenizer.to_str())
    spec["model"]["ignore_merges"] = True
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
            special_tokens=[("<|begin_of_text|>", bos)])])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|begin_of_text|>",
                            eos_token="<|end_of_text|>").save_pretrained(directory)


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2(directory, lines):
    """A Qwen2-style tokenizer as Qwen2Tokenizer saves it (NFC, Split, ByteLevel)."""
    tokenizer = split_byte_level_bpe(lines, QWEN2_PATTERN, ["<|endoftext|>"], normalizers.NFC())
    merges = [tuple(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    Qwen2Tokenizer(vocab=tokenizer.get_vocab(), merges=merges).save_pretrained(directory)


def bpe_suffix_generic(directory, lines):
    """tokenizer.json's own pipeline: NFKC, Lowercase, Replace, Strip;
    Whitespace, Punctuation, Digits; a BPE with a continuing-subword prefix,
    an end-of-word suffix and fused unknown tokens; Replace and BPEDecoder."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, end_of_word_suffix="</w>",
                                     continuing_subword_prefix="##"))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Lowercase(), normalizers.Replace(Regex(r"\s+"), " "),
        normalizers.Strip()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation(),
        pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.BpeTrainer(vocab_size=3000, limit_alphabet=100, end_of_word_suffix="</w>",
                                  continuing_subword_prefix="##",
                                  special_tokens=["<unk>", "<pad>"], show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("##", ""),
                                           decoders.BPEDecoder(suffix="</w>")])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(directory)


def metaspace_generic(directory, lines):
    """tokenizer.json's own pipeline: NFD, StripAccents, NFC; WhitespaceSplit
    then Metaspace ("always", split); a byte-fallback BPE; ByteFallback and
    Metaspace decoders."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.NFD(), normalizers.StripAccents(), normalizers.NFC()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(prepend_scheme="always", split=True)])
    trainer = trainers.BpeTrainer(vocab_size=3000, limit_alphabet=120, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>", add_bos_token=True,
                            add_eos_token=True).save_pretrained(directory)


def unigram_generic(directory, lines):
    """tokenizer.json's own pipeline with a Unigram model (T5's and XLM-R's
    kind): NFKC, Metaspace, a Unigram with an unknown piece, the Metaspace
    decoder, `$A </s>`."""
    save_unigram(directory, lines, normalizers.NFKC())


def save_unigram(directory, lines, normalizer):
    """A Unigram of 8,000 pieces behind `normalizer` and Metaspace, trained
    on `lines`, with `$A </s>`, saved under the generic class."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=8000, unk_token="<unk>", max_piece_length=12,
                                      special_tokens=["<pad>", "</s>", "<unk>"],
                                      show_progress=False)
    tokenizer.train_from_iterator(lines[::4], trainer)
    tokenizer.decoder = decoders.Metaspace()
    eos = tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>",
                            eos_token="</s>").save_pretrained(directory)


def protobuf_field(message, number):
    """The bytes of length-delimited field `number` of a protobuf `message`."""
    def varint(at):
        value, shift = 0, 0
        while True:
            byte = message[at]
            value |= (byte & 0x7F) << shift
            at, shift = at + 1, shift + 7
            if byte < 0x80:
                return value, at
    at = 0
    while at < len(message):
        key, at = varint(at)
        wire = key & 7
        if wire == 0:
            _, at = varint(at)
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        elif wire == 2:
            length, at = varint(at)
            if key >> 3 == number:
                return message[at:at + length]
            at += length
        else:
            raise SystemExit(f"protobuf: wire type {wire} is not expected here")
    raise SystemExit(f"protobuf: no field {number}")


def sentencepiece_charsmap(lines):
    """SentencePiece's compiled nmt_nfkc rules: the precompiled_charsmap of a
    model the sentencepiece package trains (the ModelProto's NormalizerSpec,
    field 3; its charsmap, field 2)."""
    import io
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines[::40]), model_writer=model,
                                   vocab_size=2000, normalization_rule_name="nmt_nfkc",
                                   character_coverage=0.98, minloglevel=2)
    return protobuf_field(protobuf_field(model.getvalue(), 3), 2)


def unigram_precompiled(directory, lines):
    """A T5-style tokenizer.json under the generic class: SentencePiece's
    nmt_nfkc rules (Precompiled) and runs of spaces made one, Metaspace, a
    Unigram, `$A </s>`."""
    save_unigram(directory, lines, normalizers.Sequence([
        normalizers.Precompiled(sentencepiece_charsmap(lines)),
        normalizers.Replace(Regex(" {2,}"), " ")]))


def without_tokenizer_json(directory, files):
    """The directory as older checkpoints have it: `files` (name -> text)
    written beside tokenizer_config.json, tokenizer.json removed."""
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    os.remove(os.path.join(directory, "tokenizer.json"))


def bert_vocab_txt(directory, lines):
    """BERT's older directory: vocab.txt (a token a line) and tokenizer_config.json."""
    vocab = word_piece(lines, lowercase=True).get_vocab()
    BertTokenizer(vocab=vocab, do_lower_case=True).save_pretrained(directory)
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    without_tokenizer_json(directory, {"vocab.txt": "".join(t + "\n" for t in tokens)})


def gpt2_vocab_merges(directory, trained):
    """GPT-2's older directory: vocab.json, merges.txt and tokenizer_config.json."""
    vocab, merges = trained
    GPT2Tokenizer(vocab=vocab, merges=merges).save_pretrained(directory)
    without_tokenizer_json(directory, {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)})


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
    # A stop string from the middle of the continuation, and where generate stops on it.
    continuation = tokenizer.decode(out.sequences[0, inputs["input_ids"].shape[1]:])
    stop = next(continuation[i:i + 2] for i in range(3, len(continuation) - 1)
                if not any(c.isspace() or c == "\ufffd" for c in continuation[i:i + 2]))
    stopped = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False,
                             stop_strings=[stop], tokenizer=tokenizer, pad_token_id=0)
    if stopped.shape[1] >= out.sequences.shape[1]:
        raise SystemExit(f"gpt2 model: the stop string {stop!r} did not stop generate")
    with open(os.path.join(directory, "generated_stop.json"), "w", encoding="utf-8") as f:
        json.dump({"prompt": PROMPT, "stop_strings": [stop], "max_new_tokens": new_tokens,
                   "sequences": stopped.tolist()}, f, ensure_ascii=False)


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


STOP_STRINGS = ["stop", "the end", ".\n", "\u00f6", "!!"]
STOP_TEXTS = ["Stop! Don't stop now, the end is near.\nThe end.", "Sch\u00f6n, gr\u00f6\u00dfer, b\u00f6se!!",
              "st op stopper nonstop the  end", "unstoppable.\n\n.\n"]


def stop_string_cases(tokenizer, lines):
    """transformers' StopStringCriteria(tokenizer, STOP_STRINGS) on every
    prefix of the ids of STOP_TEXTS and of some corpus lines (and, once, with
    an id outside the vocabulary before the newest token)."""
    import torch
    from transformers.generation.stopping_criteria import StopStringCriteria
    try:
        criteria = StopStringCriteria(tokenizer, STOP_STRINGS)
    except ValueError as e:
        return {"stop_strings": STOP_STRINGS, "stop_error": str(e)}
    sequences = []
    for text in STOP_TEXTS + lines[:20]:
        ids = tokenizer(text)["input_ids"]
        sequences += [ids[:k] for k in range(1, len(ids) + 1)]
    ids = tokenizer(STOP_TEXTS[0])["input_ids"]
    sequences += [ids[:k] + [len(tokenizer) + 7] + ids[k:k + 2] for k in range(len(ids))]
    return {"stop_strings": STOP_STRINGS,
            "stop_cases": [{"ids": s, "stop": bool(criteria(torch.tensor([s]), None)[0])}
                           for s in sequences]}


def lossy_ids(tokenizer, bad):
    """The ids of byte tokens of `bad`: <0xXX> where the vocabulary has them
    (byte fallback), else byte-level characters."""
    vocab = tokenizer.get_vocab()
    tokens = [f"<0x{b:02X}>" for b in bad]
    if not all(t in vocab for t in tokens):
        tokens = [byte_chars()[b] for b in bad]
    return tokenizer.convert_tokens_to_ids(tokens)


def reference(directory, lines):
    tokenizer = AutoTokenizer.from_pretrained(directory)
    encodings = [tokenizer(line, return_offsets_mapping=True) for line in lines]
    ids = [e["input_ids"] for e in encodings]
    pairs = list(zip(lines[:200:2], lines[1:200:2]))
    values = {
        "class": type(tokenizer).__name__,
        "lines": lines,
        "ids": ids,
        "offsets": [e["offset_mapping"] for e in encodings],
        "pair_offsets": [tokenizer(a, b, return_offsets_mapping=True)["offset_mapping"]
                         for a, b in pairs],
        "decoded": [tokenizer.decode(i) for i in ids],
        "decoded_skip": [tokenizer.decode(i, skip_special_tokens=True) for i in ids],
        "pair_ids": [tokenizer(a, b)["input_ids"] for a, b in zip(lines[:200:2], lines[1:200:2])],
        "pair_type_ids": [tokenizer(a, b, return_token_type_ids=True)["token_type_ids"]
                          for a, b in pairs],
        "pair_type_ids_plain": [tokenizer(a, b, add_special_tokens=False,
                                          return_token_type_ids=True)["token_type_ids"]
                                for a, b in pairs[:20]],
    }
    # Truncation to 12 ids (special tokens included) of single texts, and of
    # pairs to 16 ids by each strategy (None where transformers refuses).
    short = lines[:300] + lines[-len(EDGE_CASES):]
    # Word ids (None as -1) of those lines and of the pairs.
    def word_ids(encoding):
        return [-1 if w is None else w for w in encoding.word_ids()]
    values["word_ids"] = [word_ids(tokenizer(line)) for line in short]
    values["pair_word_ids"] = [word_ids(tokenizer(a, b)) for a, b in pairs]
    values["truncated"] = [tokenizer(line, truncation=True, max_length=12)["input_ids"]
                           for line in short]
    values["truncated_offsets"] = [
        tokenizer(line, truncation=True, max_length=12, return_offsets_mapping=True)[
            "offset_mapping"] for line in short]
    for strategy in ("longest_first", "only_first", "only_second"):
        truncated = []
        for a, b in zip(lines[:200:2], lines[1:200:2]):
            try:
                truncated.append(tokenizer(a, b, truncation=strategy, max_length=16)["input_ids"])
            except Exception:  # tokenizers: the sequence to truncate is too short
                truncated.append(None)
        values[f"pair_{strategy}"] = truncated
    # Overflowing windows with a stride, of single texts and of pairs (None
    # where tokenizers panics: a cut side not longer than the stride).
    def overflow(*texts, **options):
        try:
            return tokenizer(*texts, return_overflowing_tokens=True, **options)["input_ids"]
        except BaseException as e:  # pyo3's PanicException is a BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
            return None
    values["overflow"] = [overflow(line, truncation=True, max_length=12, stride=4)
                          for line in lines[:100] + lines[-len(EDGE_CASES):]]
    for strategy in ("longest_first", "only_first", "only_second"):
        values[f"overflow_{strategy}"] = [
            overflow(a, b, truncation=strategy, max_length=20, stride=2)
            for a, b in zip(lines[:100:2], lines[1:100:2])]
    # The pairs' windows (only_second, as question answering cuts a context)
    # with offsets and sequence ids.
    def windows(a, b):
        try:
            enc = tokenizer(a, b, truncation="only_second", max_length=20, stride=2,
                            return_overflowing_tokens=True, return_offsets_mapping=True,
                            return_token_type_ids=True)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            return None
        return {"offsets": enc["offset_mapping"], "type_ids": enc["token_type_ids"],
                "sequence_ids": [[-1 if s is None else s for s in enc.sequence_ids(i)]
                                 for i in range(len(enc["input_ids"]))]}
    values["overflow_windows"] = [windows(a, b) for a, b in zip(lines[:100:2], lines[1:100:2])]
    # Byte sequences that are not UTF-8, one byte token each: decoded with U+FFFD.
    values["lossy_ids"] = [ids for ids in (lossy_ids(tokenizer, bad) for bad in LOSSY_BYTES)
                           if None not in ids]
    values["lossy_decoded"] = [tokenizer.decode(ids) for ids in values["lossy_ids"]]
    try:
        batch = tokenizer(lines[:8], padding=True, return_offsets_mapping=True)
        values["batch"] = {"input_ids": batch["input_ids"],
                           "attention_mask": batch["attention_mask"],
                           "offset_mapping": batch["offset_mapping"]}
        batch = tokenizer(lines[:8], padding="max_length", truncation=True, max_length=24)
        values["batch_max_length"] = {"input_ids": batch["input_ids"],
                                      "attention_mask": batch["attention_mask"]}
    except ValueError as e:
        values["batch_error"] = str(e)
    values.update(stop_string_cases(tokenizer, lines))
    with open(os.path.join(directory, "mha_reference.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, ensure_ascii=False)


def cache_key(args):
    """What the output depends on: this script, the packages that write it,
    the corpus files, the arguments."""
    import hashlib
    from importlib.metadata import version
    key = hashlib.sha256()
    with open(__file__, "rb") as f:
        key.update(f.read())
    for package in ("torch", "transformers", "tokenizers", "sentencepiece"):
        key.update(f"{package}={version(package)};".encode())
    for path in sorted(glob.glob(f"{FORTUNES}/**", recursive=True)):
        if os.path.isfile(path):
            key.update(f"{path}:{os.path.getsize(path)};".encode())
    key.update(f"{args.lines};{args.families}".encode())
    return key.hexdigest()[:16]


def from_cache(cache, out):
    """Copies a complete cached output into `out`; False where there is none."""
    if not os.path.exists(os.path.join(cache, "complete")):
        return False
    shutil.copytree(cache, out, dirs_exist_ok=True)
    return True


def to_cache(out, cache, keep=3):
    """Stores `out` as `cache`, keeping the `keep` newest entries beside it."""
    parent = os.path.dirname(cache)
    os.makedirs(parent, exist_ok=True)
    staging = cache + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(out, staging)
    with open(os.path.join(staging, "complete"), "w", encoding="utf-8"):
        pass
    shutil.rmtree(cache, ignore_errors=True)
    os.rename(staging, cache)
    os.utime(cache)  # the newest: copytree gave it `out`'s time, which may be old
    entries = sorted((os.path.join(parent, e) for e in os.listdir(parent)), key=os.path.getmtime)
    for old in entries[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--lines", type=int, default=10000,
                        help="corpus lines to compare, spread over the whole corpus")
    parser.add_argument("--families", default="", help="comma-separated families (default: all)")
    parser.add_argument("--cache", default=os.environ.get(
        "MHA_REFERENCE_CACHE", os.path.expanduser("~/.cache/mha/reference")),
        help="where outputs are kept by what they depend on ('' for none)")
    args = parser.parse_args()
    cache = os.path.join(args.cache, "tokenizer", cache_key(args)) if args.cache else ""
    if cache and from_cache(cache, args.out):
        print(f"from the cache {cache}")
        return
    lines = corpus()
    step = max(1, len(lines) // args.lines)
    test_lines = lines[::step][: args.lines] + EDGE_CASES
    trained = byte_level_bpe(lines)
    roberta_trained = functools.lru_cache(maxsize=None)(
        lambda: byte_level_bpe(lines, ROBERTA_SPECIALS))
    families = {"gpt2": lambda d: (gpt2(d, trained), gpt2_model(d)),
                "gpt2_left_bos": lambda d: gpt2_left_bos(d, trained),
                "roberta": lambda d: roberta(d, roberta_trained()),
                "bart": lambda d: bart(d, roberta_trained()),
                "opt": lambda d: opt(d, roberta_trained()),
                "distilbert": lambda d: distilbert(d, lines),
                "electra": lambda d: electra(d, lines),
                "bert_uncased": lambda d: (bert_uncased(d, lines), bert_model(d)),
                "bert_cased": lambda d: bert_cased(d, lines),
                "word_piece_generic": lambda d: word_piece_generic(d, lines),
                "llama2": lambda d: llama2(d, lines),
                "llama2_spm": lambda d: llama2_spm(d, lines),
                "llama3": lambda d: llama3(d, lines),
                "qwen2": lambda d: qwen2(d, lines),
                "bpe_suffix_generic": lambda d: bpe_suffix_generic(d, lines),
                "metaspace_generic": lambda d: metaspace_generic(d, lines),
                "unigram_generic": lambda d: unigram_generic(d, lines),
                "unigram_precompiled": lambda d: unigram_precompiled(d, lines),
                "bert_vocab_txt": lambda d: bert_vocab_txt(d, lines),
                "gpt2_vocab_merges": lambda d: gpt2_vocab_merges(d, trained)}
    wanted = set(filter(None, args.families.split(",")))
    for family, build in families.items():
        if wanted and family not in wanted:
            continue
        directory = os.path.join(args.out, family)
        os.makedirs(directory, exist_ok=True)
        build(directory)
        reference(directory, test_lines)
        print(f"{family}: {len(test_lines)} lines")
    if cache:
        to_cache(args.out, cache)


if __name__ == "__main__":
    main()
