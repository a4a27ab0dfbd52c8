#!/usr/bin/env python3
"""Writes small random Hugging Face models and transformers' own outputs for the
C++ tests of mha/hugging_face.h and the examples hf_encoder and hf_seq2seq.

Each model is built from a config with a fixed seed (no download), saved as
transformers publishes checkpoints (save_pretrained: config.json and
model.safetensors, sharded for one, a pytorch_model.bin for two, float16 and
bfloat16 for one each), and run in float32, eval, with padding masks. Each
directory gets `mha_reference.pt`, a plain dict of CPU tensors:
- encoders (bert, bert_float16, bert_served: BERT-base's width, roberta,
  distilbert, electra, electra_small:
  an ElectraForPreTraining; vit, deit_bfloat16): `input_ids` or
  `pixel_values`, `attention_mask`, `embeddings` (hidden_states[0]),
  `last_hidden_state`, `token_type_ids` where the config has token types,
  `pooler_output` where the model has a pooler, and `logits` for a head;
- task models (each text family's ...ForSequenceClassification,
  ...ForTokenClassification and ...ForQuestionAnswering, bert's at BERT-base's
  width too; ViTForImageClassification, DeiTForImageClassificationWithTeacher):
  as the encoders, with `logits` or `start_logits` and `end_logits`;
- seq2seq models (bart, mbart, marian, marian_served: opus-mt's width; the
  language models bart_lm, mbart_lm; marian_untied, bart_untied and
  mbart_untied: tie_word_embeddings false, four embedding matrices):
  `input_ids`, `attention_mask`, `decoder_input_ids`, `encoder_embeddings`,
  `encoder_last_hidden_state`, `decoder_embeddings`,
  `decoder_last_hidden_state` (teacher-forced), `logits` for a language model
  (marian too), and for the generating model `generated` (greedy `generate`,
  padded with -1; the untied ones: 8 new tokens as returned, with `greedy_margin`);
- causal language models (gpt2, gpt2_legacy: the same model as a pytorch_model.bin
  of old GPT-2's layout; gpt2_served: GPT-2 at its served width; opt, opt_350m):
  left-padded `input_ids`, `attention_mask`, `position_ids` (as `generate`
  computes them), `logits` and `last_hidden_state` with those positions,
  `logits_float64` (the same model in float64), `logits_default_positions` (the
  model's own positions), `prompt_logits_unpadded` (the padded row alone,
  unpadded) and `generated` (greedy `generate` from the generation_config.json
  written beside it: prompt and new tokens, finished rows padded) with
  `greedy_margin`, the smallest gap between a chosen token's score and the next.
The generating models (marian, bart_generate, mbart_generate and the causal
ones) also get `sampled_<setting>_<seed>` (sampling `generate`, temperature 0.7
with top-k 50, top-p 0.9, or temperature 0.7 with top-k 50 and a repetition
penalty of 1.3; global seeds 0-4) with `sampling_margin` (the smallest distance
of a sampling cut-off: the k-th from the next score, the top-p mass from the
bound), and `beam_<setting>` with `beam_<setting>_scores` (beam search, see
BEAMS; `beam_bad_word` the two-token bad word of one setting) with
`beam_margin` (the smallest gap at a boundary where beam search ranks
candidates), and `alone_greedy_<row>`, `alone_sampled_<row>` and
`alone_beam_<row>` (each row generated alone, unpadded: what a server's
requests must produce).
A model saved in float16 or bfloat16 is run in float32 from the rounded weights.

Usage: export_hf_reference.py --out DIR
"""

import argparse
import os
import re
import warnings

import torch
import transformers as T

MAGIC = 20261202
SEED = 0


def tokens(batch, length, vocab, lengths, pad, left=False):
    """Random token ids (never `pad`) and a right-padded (or left-padded) attention mask."""
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(3, vocab - 2, (batch, length), generator=g)
    mask = torch.zeros(batch, length, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
        ids[i, n:] = pad
        if left:
            ids[i], mask[i] = ids[i].roll(length - n), mask[i].roll(length - n)
    return ids, mask


def token_types(config, ids, random):
    """Random 0/1 token types, or transformers' default (zeros)."""
    if not random:
        return torch.zeros_like(ids)
    g = torch.Generator().manual_seed(SEED + 3)
    return torch.randint(0, config.type_vocab_size, ids.shape, generator=g)


def save(model, directory, dtype=None, shard=None, bin_file=False):
    """Saves as published; returns the float32 model holding the saved values."""
    os.makedirs(directory, exist_ok=True)
    if dtype is not None:
        model = model.to(dtype)
    if bin_file:
        model.config.save_pretrained(directory)
        torch.save(model.state_dict(), os.path.join(directory, "pytorch_model.bin"))
    elif shard is not None:
        model.save_pretrained(directory, max_shard_size=shard)
    else:
        model.save_pretrained(directory)
    return model.float().eval()


def save_legacy_gpt2(model, directory):
    """Saves a GPT2LMHeadModel as older GPT-2 checkpoints were published: a
    pytorch_model.bin of the GPT2Model (no `transformer.` prefix, no lm_head)
    with the buffers transformers 4 wrote: `attn.bias`, the causal tril as
    uint8 (1, 1, n_positions, n_positions), and `attn.masked_bias` (-1e4)."""
    os.makedirs(directory, exist_ok=True)
    model.config.save_pretrained(directory)
    state = dict(model.transformer.state_dict())
    n = model.config.n_positions
    for i in range(model.config.n_layer):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n, dtype=torch.uint8)).view(1, 1, n, n)
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(state, os.path.join(directory, "pytorch_model.bin"))


def write(directory, values):
    values = {k: v.detach().contiguous() for k, v in values.items()}
    values["magic"] = torch.tensor(MAGIC)
    torch.save(values, os.path.join(directory, "mha_reference.pt"))


def heads(result, values):
    """Adds the pooler's and the head's outputs, where the model has them."""
    for key in ("pooler_output", "logits", "start_logits", "end_logits"):
        if getattr(result, key, None) is not None:
            values[key] = getattr(result, key)
    return values


@torch.no_grad()
def text_encoder(out, name, config, build=T.AutoModel.from_config, random_types=False,
                 **save_args):
    torch.manual_seed(SEED)
    model = save(build(config).eval(), os.path.join(out, name), **save_args)
    pad = config.pad_token_id if config.pad_token_id is not None else 0
    ids, mask = tokens(2, 7, config.vocab_size, [7, 4], pad)
    values = {"input_ids": ids, "attention_mask": mask}
    if hasattr(config, "type_vocab_size"):
        values["token_type_ids"] = token_types(config, ids, random_types)
    result = model(**values, output_hidden_states=True)
    # hidden_states (the base model's, under a head too): [0] is the input of
    # layer 0 (for ELECTRA after embeddings_project where there is one), [-1]
    # is last_hidden_state.
    values.update(embeddings=result.hidden_states[0], last_hidden_state=result.hidden_states[-1])
    write(os.path.join(out, name), heads(result, values))


@torch.no_grad()
def vision_encoder(out, name, config, build=None, **save_args):
    torch.manual_seed(SEED)
    if build is None:
        model = (T.AutoModel.from_config(config, add_pooling_layer=False)
                 if config.model_type == "vit" else T.AutoModel.from_config(config))
    else:
        model = build(config)
    model = save(model.eval(), os.path.join(out, name), **save_args)
    pixels = torch.randn(2, config.num_channels, config.image_size, config.image_size,
                         generator=torch.Generator().manual_seed(SEED + 1))
    result = model(pixel_values=pixels, output_hidden_states=True)
    values = {"pixel_values": pixels, "embeddings": result.hidden_states[0]}
    if build is None:  # a classifier's output has no last_hidden_state (normed)
        values["last_hidden_state"] = result.last_hidden_state
    write(os.path.join(out, name), heads(result, values))


@torch.no_grad()
def seq2seq(out, name, config, model_class, generate=False, greedy=False, **save_args):
    torch.manual_seed(SEED)
    directory = os.path.join(out, name)
    model = model_class(config).eval()
    if not generate and hasattr(model, "final_logits_bias"):
        # transformers starts it at zeros: values the logits show
        model.final_logits_bias.normal_(generator=torch.Generator().manual_seed(SEED + 3))
    model = save(model, directory, **save_args)
    ids, mask = tokens(2, 6, config.vocab_size, [6, 3], config.pad_token_id)
    g = torch.Generator().manual_seed(SEED + 2)
    decoder_ids = torch.randint(3, config.vocab_size - 2, (2, 5), generator=g)
    decoder_ids[:, 0] = config.decoder_start_token_id
    result = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                   output_hidden_states=True)
    values = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": decoder_ids,
              "encoder_embeddings": result.encoder_hidden_states[0],
              "encoder_last_hidden_state": result.encoder_last_hidden_state,
              "decoder_embeddings": result.decoder_hidden_states[0],
              "decoder_last_hidden_state": (result.last_hidden_state
                                            if hasattr(result, "last_hidden_state")
                                            else result.decoder_hidden_states[-1])}
    heads(result, values)
    if greedy:  # 8 new tokens from the saved generation config
        values["generated"], values["greedy_margin"] = greedy_with_margin(
            model, input_ids=ids, attention_mask=mask, max_new_tokens=8)
    if generate:
        model.generation_config.min_new_tokens = 2
        model.generation_config.max_new_tokens = 9
        model.generation_config.bad_words_ids = [[config.pad_token_id]]  # as Marian's configs
        model.generation_config.save_pretrained(directory)
        generated, values["greedy_margin"] = greedy_with_margin(
            model, input_ids=ids, attention_mask=mask)
        values["generated"] = generated.masked_fill(generated == config.pad_token_id, -1)
        # The first token is the decoder start, which is also the pad token.
        values["generated"][:, 0] = config.decoder_start_token_id
        sampled(model, values, input_ids=ids, attention_mask=mask)
        beams(model, values, [int(generated[0, 1]), int(generated[0, 2])],
              input_ids=ids, attention_mask=mask)
        alone(model, values, ids, mask)
    write(directory, values)


def greedy_causal(model, directory, ids, mask, pad):
    """transformers' greedy `generate` on the left-padded prompts, from the
    generation_config.json written beside the model: 10 new tokens at most, at
    least 2, a multi-token bad word, no repeated 3-gram, and as end token the
    4th token the first row generates without one (so that row ends early and
    is padded, and the other runs on)."""
    config = model.generation_config
    config.max_new_tokens, config.min_new_tokens = 10, 2
    config.no_repeat_ngram_size = 3
    config.pad_token_id, config.eos_token_id = pad, None
    free = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1)
    prompt = ids.shape[1]
    config.eos_token_id = int(free[0, prompt + 3])
    config.bad_words_ids = [[int(free[1, prompt]), int(free[1, prompt + 1])]]
    config.save_pretrained(directory)
    return greedy_with_margin(model, input_ids=ids, attention_mask=mask)


def greedy_with_margin(model, **inputs):
    """transformers' greedy `generate`, and the smallest margin of its choices:
    over every step and every row still generating, the processed score of the
    chosen token minus the next best (a token check against mha, whose logits
    agree within float32 rounding, means something only well above 1e-5)."""
    out = model.generate(**inputs, do_sample=False, num_beams=1, output_scores=True,
                         return_dict_in_generate=True)
    eos = model.generation_config.eos_token_id
    eos = torch.tensor(eos if isinstance(eos, list) else [eos])
    first = out.sequences.shape[1] - len(out.scores)  # the first generated position
    margins = []
    for step, scores in enumerate(out.scores):
        ended = torch.isin(out.sequences[:, first:first + step], eos).any(dim=1)
        top2 = scores.topk(2, dim=-1).values
        gap = (top2[:, 0] - top2[:, 1])[~ended]
        margins.append(gap[torch.isfinite(gap)])  # a forced token has no runner-up
    return out.sequences, torch.cat(margins).min()


SAMPLING = {"t07_k50": dict(temperature=0.7, top_k=50), "p09": dict(top_p=0.9, top_k=0),
            "t07_rep13": dict(temperature=0.7, top_k=50, repetition_penalty=1.3)}


class SamplingCutoffs(T.LogitsProcessor):
    """Records how far each row's sampling cut-offs are from flipping a token
    (run last of the processors, before the warpers, which it imitates):
    top-k's k-th score minus the next, top-p's cumulative mass at the cut
    minus the bound (and the next mass minus it)."""

    def __init__(self, temperature, top_k, top_p):
        self.temperature, self.top_k, self.top_p, self.margins = temperature, top_k, top_p, []

    def __call__(self, input_ids, scores):
        warped = scores / self.temperature
        if self.top_k:
            top = warped.topk(self.top_k + 1, dim=-1).values
            gap = top[:, -2] - top[:, -1]
            self.margins.append(gap[torch.isfinite(gap)])
            warped = warped.masked_fill(warped < top[:, -2:-1], float("-inf"))
        if self.top_p < 1.0:
            cumulative = warped.sort(dim=-1).values.softmax(dim=-1).cumsum(dim=-1)
            self.margins.append((cumulative - (1 - self.top_p)).abs().min(dim=-1).values)
        return scores


def sampled(model, values, **inputs):
    """transformers' sampling `generate` with the directory's generation config
    and each of SAMPLING's settings, seeds 0-4 of the global generator:
    `sampled_<setting>_<seed>`, and `sampling_margin`."""
    margins = []
    for name, setting in SAMPLING.items():
        for seed in range(5):
            cutoffs = SamplingCutoffs(setting.get("temperature", 1.0), setting["top_k"],
                                      setting.get("top_p", 1.0))
            torch.manual_seed(seed)
            values[f"sampled_{name}_{seed}"] = model.generate(
                **inputs, do_sample=True, num_beams=1,
                logits_processor=T.LogitsProcessorList([cutoffs]), **setting)
            margins += cutoffs.margins
    values["sampling_margin"] = torch.cat(margins).min()


# Beam search settings (4 beams each), over the directory's generation config;
# `ngram3_ret2` adds a two-token bad word (from the greedy output) to its bad words.
BEAMS = {"lp1": dict(length_penalty=1.0, early_stopping=False),
         "lp2_early": dict(length_penalty=2.0, early_stopping=True),
         "never": dict(early_stopping="never"),
         "ngram3_ret2": dict(no_repeat_ngram_size=3, num_return_sequences=2),
         "sample_0": dict(do_sample=True, temperature=0.7, top_k=50)}


def boundary_gaps(values, boundaries):
    """Each row's gaps between its b-th and (b + 1)-th best value, for b in
    `boundaries`, where both are real candidates (above -1e8, where beam
    search puts what is out of the race)."""
    top = values.topk(min(max(boundaries) + 1, values.shape[-1]), dim=-1).values
    gaps = [top[:, b - 1] - top[:, b] for b in boundaries if b < top.shape[-1]]
    real = [top[:, b] > -1e8 for b in boundaries if b < top.shape[-1]]
    return torch.cat([gap[ok & torch.isfinite(gap)] for gap, ok in zip(gaps, real)])


def recording_beam_margins(model, margins):
    """Wraps `model`'s beam search helpers so that every choice they make
    appends its margin to `margins`, the gap at each boundary that decides
    something: the step's B best and K kept continuations, the B running
    beams among those that go on, the finished hypotheses (their order in the
    first two, which are returned, and the B kept), and the early-stop test's
    best running score against the worst finished one."""
    top_k, running, update, early = (
        model._get_top_k_continuations, model._get_running_beams_for_next_iteration,
        model._update_finished_beams, model._check_early_stop_heuristic)

    def top_k_recorded(**kw):
        if not kw["do_sample"]:
            margins.append(boundary_gaps(kw["accumulated_log_probs"],
                                         [kw["num_beams"], kw["beams_to_keep"]]))
        return top_k(**kw)

    def running_recorded(**kw):
        going_on = kw["topk_log_probs"] + kw["next_token_hits_stopping_criteria"] * -1.0e9
        margins.append(boundary_gaps(going_on, [kw["num_beams"]]))
        return running(**kw)

    def update_recorded(**kw):
        done = kw["next_token_hits_stopping_criteria"] & kw["top_num_beam_mask"][None, :]
        new = kw["topk_log_probs"] / ((kw["cur_len"] + 1 - kw["decoder_prompt_len"])
                                      ** kw["length_penalty"])
        merged = torch.cat((kw["beam_scores"], new.masked_fill(~done, -1e9)), dim=1)
        margins.append(boundary_gaps(merged, [1, 2, kw["num_beams"]]))
        return update(**kw)

    def early_recorded(**kw):
        length = kw["cur_len"] - kw["decoder_prompt_len"]
        if kw["early_stopping"] == "never" and kw["length_penalty"] > 0.0:
            length = kw["max_length"] - kw["decoder_prompt_len"]
        best = kw["running_beam_scores"][:, 0] / (length ** kw["length_penalty"])
        worst = kw["beam_scores"].min(dim=1).values
        tested = kw["is_early_stop_heuristic_unsatisfied"][:, 0] & (worst > -1e8)
        margins.append((best - worst).abs()[tested])
        return early(**kw)

    model._get_top_k_continuations = top_k_recorded
    model._get_running_beams_for_next_iteration = running_recorded
    model._update_finished_beams = update_recorded
    model._check_early_stop_heuristic = early_recorded


def alone(model, values, ids, mask):
    """transformers' batch-1 `generate` of each row alone, unpadded, with the
    directory's generation config: `alone_greedy_<row>`, sampling
    (temperature 0.7, top-k 50) after `torch.manual_seed(20 + row)`:
    `alone_sampled_<row>`, and beam search with 4 beams: `alone_beam_<row>`
    (what a server's requests must each produce), with `alone_margin`, the
    smallest greedy gap, sampling cut-off distance or beam boundary gap."""
    margins = []
    for row in range(ids.shape[0]):
        prompt = ids[row:row + 1, mask[row] == 1]
        values[f"alone_greedy_{row}"], greedy_margin = greedy_with_margin(model, input_ids=prompt)
        cutoffs = SamplingCutoffs(0.7, 50, 1.0)
        torch.manual_seed(20 + row)
        values[f"alone_sampled_{row}"] = model.generate(
            input_ids=prompt, num_beams=1, logits_processor=T.LogitsProcessorList([cutoffs]),
            **dict(SAMPLING["t07_k50"], do_sample=True))
        margins += cutoffs.margins + [greedy_margin.reshape(1)]
        recording_beam_margins(model, margins)
        values[f"alone_beam_{row}"] = model.generate(input_ids=prompt, num_beams=4,
                                                     do_sample=False)
        forget_beam_margins(model)
    values["alone_margin"] = torch.cat(margins).min()


def beams(model, values, bad_word, **inputs):
    """transformers' beam search `generate` (4 beams) with the directory's
    generation config and each of BEAMS' settings: `beam_<setting>` and
    `beam_<setting>_scores` (`sequences_scores`), `beam_bad_word` and `beam_margin`."""
    margins = []
    values["beam_bad_word"] = torch.tensor(bad_word)
    recording_beam_margins(model, margins)
    bad_words = (model.generation_config.bad_words_ids or []) + [bad_word]
    for name, setting in BEAMS.items():
        extra = dict(bad_words_ids=bad_words) if name == "ngram3_ret2" else {}
        torch.manual_seed(0)
        out = model.generate(**inputs, num_beams=4, return_dict_in_generate=True,
                             output_scores=True, **setting, **extra)
        values[f"beam_{name}"], values[f"beam_{name}_scores"] = out.sequences, out.sequences_scores
    values["beam_margin"] = torch.cat(margins).min()
    forget_beam_margins(model)


def forget_beam_margins(model):
    """Undoes `recording_beam_margins`."""
    for name in ("_get_top_k_continuations", "_get_running_beams_for_next_iteration",
                 "_update_finished_beams", "_check_early_stop_heuristic"):
        delattr(model, name)


@torch.no_grad()
def causal_lm(out, name, config, model_class, legacy=None):
    """A causal language model on left-padded prompts; `legacy` also writes the
    same GPT-2 model and values in old GPT-2's layout under that name."""
    torch.manual_seed(SEED)
    directory = os.path.join(out, name)
    model = save(model_class(config).eval(), directory)
    pad = config.pad_token_id if config.pad_token_id is not None else 0
    ids, mask = tokens(2, 7, config.vocab_size, [7, 4], pad, left=True)
    # As generate: 0.. from each row's first real token, 1 at the pads.
    positions = (mask.cumsum(-1) - 1).masked_fill_(mask == 0, 1)
    result = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                   output_hidden_states=True)
    values = {"input_ids": ids, "attention_mask": mask, "position_ids": positions,
              "logits": result.logits,
              # last_hidden_state as the lm_head reads it: after ln_f (GPT-2),
              # after final_layer_norm and project_out where the OPT has them.
              "last_hidden_state": result.hidden_states[-1],
              # GPT-2's own positions are 0.. whatever the padding; OPT's are
              # cumsum(mask) * mask - 1 (-1 at the pads), offset by 2.
              "logits_default_positions": model(input_ids=ids, attention_mask=mask).logits,
              "prompt_logits_unpadded": model(input_ids=ids[1:, mask[1] == 1]).logits,
              # The same in float64: how far float32 rounding alone takes transformers.
              "logits_float64": model.double()(input_ids=ids, attention_mask=mask,
                                               position_ids=positions).logits}
    model.float()
    values["generated"], values["greedy_margin"] = greedy_causal(model, directory, ids, mask, pad)
    sampled(model, values, input_ids=ids, attention_mask=mask)
    prompt = ids.shape[1]
    beams(model, values, [int(values["generated"][0, prompt]), int(values["generated"][0, prompt + 1])],
          input_ids=ids, attention_mask=mask)
    alone(model, values, ids, mask)
    write(directory, values)
    if legacy is not None:
        save_legacy_gpt2(model, os.path.join(out, legacy))
        write(os.path.join(out, legacy), values)


TASKS = ("SequenceClassification", "TokenClassification", "QuestionAnswering")


def task_models(out, text, distilbert, vision):
    """Each encoder family's task heads (transformers' AutoModelFor... classes)
    with labels by name, weights of std 0.2 (class scores of about one, not of
    a hundredth); `<family>_<task>` directories, e.g. roberta_token_classification."""
    sentiment = dict(id2label={0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"},
                     label2id={"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2})
    entities = dict(id2label=dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])))
    families = (("bert", T.BertConfig, text), ("roberta", T.RobertaConfig, dict(pad_token_id=1, **text)),
                ("distilbert", T.DistilBertConfig, distilbert),
                ("electra", T.ElectraConfig, dict(embedding_size=16, **text)))
    for family, config_class, fields in families:
        prefix = config_class.__name__[:-len("Config")]
        for task in TASKS:
            labels = {"SequenceClassification": sentiment, "TokenClassification": entities}.get(task, {})
            # RoBERTa's: a multi-label classifier (the problem_type carried with the model).
            extra = dict(problem_type="multi_label_classification") if (
                family == "roberta" and task == TASKS[0]) else {}
            snake = "_".join(w.lower() for w in re.findall("[A-Z][a-z]+", task))
            text_encoder(out, f"{family}_{snake}",
                         config_class(initializer_range=0.2, **fields, **labels, **extra),
                         build=getattr(T, f"{prefix}For{task}"))
    # At BERT-base's width (the panel GEMMs' sizes), 2 layers.
    text_encoder(out, "bert_served_sequence_classification",
                 T.BertConfig(vocab_size=99, max_position_embeddings=32, hidden_size=768,
                              num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                              **sentiment),
                 build=T.BertForSequenceClassification)
    birds = dict(id2label=dict(enumerate(["sparrow", "robin", "wren", "finch"])))
    vision_encoder(out, "vit_image_classification",
                   T.ViTConfig(initializer_range=0.2, **vision, **birds),
                   build=T.ViTForImageClassification)
    vision_encoder(out, "deit_image_classification_with_teacher",
                   T.DeiTConfig(initializer_range=0.2, **vision, **birds),
                   build=T.DeiTForImageClassificationWithTeacher)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    warnings.filterwarnings("ignore")
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
    text = dict(vocab_size=99, max_position_embeddings=32, **small)
    text_encoder(out, "bert", T.BertConfig(**text))
    text_encoder(out, "bert_float16", T.BertConfig(hidden_act="gelu_new", **text),
                 dtype=torch.float16)
    text_encoder(out, "roberta", T.RobertaConfig(pad_token_id=1, **text), shard="20KB")
    distilbert = dict(vocab_size=99, max_position_embeddings=32, dim=32, n_layers=2, n_heads=4,
                      hidden_dim=48, activation="relu")
    text_encoder(out, "distilbert", T.DistilBertConfig(**distilbert), bin_file=True)
    text_encoder(out, "electra", T.ElectraConfig(embedding_size=32, **text), random_types=True)
    text_encoder(out, "electra_small", T.ElectraConfig(embedding_size=16, **text),
                 build=T.ElectraForPreTraining, random_types=True)
    # BERT-base's width (768, 12 heads of 64, FFN 3,072), 2 layers: the panel
    # GEMMs and attention at the size served, which width 32 never reaches.
    text_encoder(out, "bert_served",
                 T.BertConfig(vocab_size=99, max_position_embeddings=32, hidden_size=768,
                              num_hidden_layers=2, num_attention_heads=12,
                              intermediate_size=3072))
    vision = dict(image_size=16, patch_size=4, num_channels=3, **small)
    vision_encoder(out, "vit", T.ViTConfig(**vision), shard="20KB")
    vision_encoder(out, "deit_bfloat16", T.DeiTConfig(**vision), dtype=torch.bfloat16)
    task_models(out, text, distilbert, vision)

    s2s = dict(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
               decoder_ffn_dim=40, max_position_embeddings=32)
    seq2seq(out, "bart", T.BartConfig(**s2s), T.BartModel)
    seq2seq(out, "mbart", T.MBartConfig(scale_embedding=True, decoder_start_token_id=2, **s2s), T.MBartModel)
    # init_std 0.5: rows that decode differently; eos 38: a token this model
    # picks at once, so min_new_tokens, the end of one row (then padding) and
    # the forced end of the other are all exercised.
    seq2seq(out, "marian",
            T.MarianConfig(activation_function="swish", scale_embedding=True, init_std=0.5,
                           pad_token_id=98, decoder_start_token_id=98, eos_token_id=38,
                           forced_eos_token_id=38, **s2s),
            T.MarianMTModel, generate=True)
    # Marian at opus-mt's width (512, 8 heads of 64, FFN 2,048), 2 + 2 layers,
    # weights of std 0.05 (logits of about 3; at its own 0.02, beam search and
    # the lone requests came within 1.6e-4 and 1.7e-4 of ties); as marian otherwise.
    seq2seq(out, "marian_served",
            T.MarianConfig(**dict(s2s, d_model=512, encoder_attention_heads=8,
                                  decoder_attention_heads=8, encoder_ffn_dim=2048,
                                  decoder_ffn_dim=2048),
                           activation_function="swish", scale_embedding=True, pad_token_id=98,
                           decoder_start_token_id=98, eos_token_id=38, forced_eos_token_id=38,
                           init_std=0.05),
            T.MarianMTModel, generate=True)
    seq2seq(out, "bart_lm", T.BartConfig(**s2s), T.BartForConditionalGeneration)
    seq2seq(out, "mbart_lm", T.MBartConfig(scale_embedding=True, decoder_start_token_id=2, **s2s),
            T.MBartForConditionalGeneration)
    # Untied (tie_word_embeddings false): transformers 5.23 ties nothing, so
    # the file holds shared, encoder.embed_tokens, decoder.embed_tokens and
    # lm_head as four matrices, and each stack embeds with its own; std 0.25
    # (at 0.5, marian's logits reach 9, where transformers' own float32 lies 2.7e-5
    # from float64).
    for family, config_class, model_class, extra in (
            ("marian", T.MarianConfig, T.MarianMTModel,
             dict(scale_embedding=True, pad_token_id=98, decoder_start_token_id=98,
                  eos_token_id=38)),
            ("bart", T.BartConfig, T.BartForConditionalGeneration, {}),
            ("mbart", T.MBartConfig, T.MBartForConditionalGeneration,
             dict(scale_embedding=True, decoder_start_token_id=2))):
        seq2seq(out, f"{family}_untied",
                config_class(tie_word_embeddings=False, init_std=0.25, **extra, **s2s),
                model_class, greedy=True)
    # As bart_lm and mbart_lm with weights of std 0.5: logits of a few units,
    # whose choices are far from ties.
    seq2seq(out, "bart_generate", T.BartConfig(init_std=0.5, **s2s),
            T.BartForConditionalGeneration, generate=True)
    seq2seq(out, "mbart_generate",
            T.MBartConfig(scale_embedding=True, decoder_start_token_id=2, init_std=0.5, **s2s),
            T.MBartForConditionalGeneration, generate=True)

    # Weights of std 0.5 (initializer_range, init_std) rather than 0.02: logits
    # of a few units rather than of a tenth. The lm_head is tied to the token
    # embeddings, so save_pretrained writes no lm_head.weight.
    causal_lm(out, "gpt2",
              T.GPT2Config(vocab_size=99, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                           n_inner=48, activation_function="gelu_new", initializer_range=0.5),
              T.GPT2LMHeadModel, legacy="gpt2_legacy")
    # GPT-2 at its served width (768, 12 heads of 64, FFN 3,072), 2 layers, a
    # small vocabulary: the panel GEMMs at K = 768 and 3,072 and the paged decode
    # kernel's 64-wide heads, which width 32 never reaches. GPT-2's own weight
    # std (0.02): logits of about 2. (At std 0.1, logits to 10, the LM head's
    # gain of 2.8 took mha's logits as loaded to 1.5e-5 of float64's, and
    # transformers' to 7.3e-6: float32 rounding, beyond an absolute 1e-5.)
    causal_lm(out, "gpt2_served",
              T.GPT2Config(vocab_size=99, n_positions=32, n_embd=768, n_layer=2, n_head=12,
                           activation_function="gelu_new"),
              T.GPT2LMHeadModel)
    opt = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, ffn_dim=48,
               num_attention_heads=4, max_position_embeddings=32, pad_token_id=1, init_std=0.5)
    causal_lm(out, "opt", T.OPTConfig(word_embed_proj_dim=32, do_layer_norm_before=True, **opt),
              T.OPTForCausalLM)
    # As facebook/opt-350m: norms after the blocks, none at the end, and
    # embeddings projected in and out. init_std 0.25: at 0.5 its logits reach
    # 10, where float32 rounding alone (transformers' against itself, cached
    # against whole) passes 1e-5.
    causal_lm(out, "opt_350m",
              T.OPTConfig(word_embed_proj_dim=16, do_layer_norm_before=False,
                          **dict(opt, init_std=0.25)),
              T.OPTForCausalLM)
    print(f"wrote 40 Hugging Face models and transformers {T.__version__}'s outputs to {out}")


if __name__ == "__main__":
    main()
