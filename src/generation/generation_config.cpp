// mha::GenerationConfig: transformers' GenerationConfig fields, read as
// transformers' `from_pretrained` reads them (generation_config.json, else
// config.json; transformers/generation/utils.py, `_load_generation_config`'s
// fallback) and checked as its `validate` and logits processors check them.

#include "mha/generation_config.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "mha/hugging_face.h"

namespace mha {

namespace {

/// transformers' GenerationConfig fields that mha does not implement, each
/// with the JSON values that leave generation as without it (its default;
/// `null` always does).
const std::map<std::string, std::vector<std::string>>& unimplemented_fields() {
  static const std::map<std::string, std::vector<std::string>> fields = {
      {"max_time", {}},
      {"min_p", {}},
      {"top_h", {}},
      {"typical_p", {"1.0", "1"}},
      {"epsilon_cutoff", {"0.0", "0"}},
      {"eta_cutoff", {"0.0", "0"}},
      {"encoder_repetition_penalty", {"1.0", "1"}},
      {"encoder_no_repeat_ngram_size", {"0"}},
      {"remove_invalid_values", {"false"}},
      {"exponential_decay_length_penalty", {}},
      {"sequence_bias", {}},
      {"token_healing", {"false"}},
      {"guidance_scale", {"1.0", "1"}},
      {"watermarking_config", {}},
      {"diversity_penalty", {"0.0", "0"}},
      {"num_beam_groups", {"1"}},
      {"constraints", {}},
      {"force_words_ids", {}},
      {"penalty_alpha", {}},
      {"dola_layers", {}},
      {"use_mtp", {"false"}},
      {"output_scores", {"false"}},
      {"output_logits", {"false"}},
      {"output_attentions", {"false"}},
      {"output_hidden_states", {"false"}},
      {"return_dict_in_generate", {"false"}},
  };
  return fields;
}

/// transformers' `validate`: forcing tokens that are all suppressed leaves no
/// finite score at the forcing step.
void check_forced_not_suppressed(const char* field,
                                 std::vector<int64_t> forced,
                                 const std::vector<int64_t>& suppressed) {
  const std::set<int64_t> suppressed_set(suppressed.begin(), suppressed.end());
  const bool all_suppressed =
      std::all_of(forced.begin(), forced.end(), [&](int64_t t) { return suppressed_set.count(t); });
  std::sort(forced.begin(), forced.end());
  forced.erase(std::unique(forced.begin(), forced.end()), forced.end());
  TORCH_CHECK_VALUE(
      forced.empty() || !all_suppressed,
      fmt::format("Every token in `{0}` ({1}) is also in `suppress_tokens`. Forcing a "
                  "token while suppressing it sets all logits to `-inf` at the forcing "
                  "step, which produces `nan` probabilities and crashes generation. "
                  "Remove the overlapping token(s) from either `{0}` or "
                  "`suppress_tokens` (if you meant to prevent an early EOS token, use "
                  "`min_new_tokens` instead).",
                  field, forced));
}

/// A field of `unimplemented_fields()` set to another value is an error naming it.
void check_unimplemented(const HfConfig& file) {
  for (const auto& [field, defaults] : unimplemented_fields()) {
    if (!file.has(field)) continue;  // absent or null
    const std::string value = file.json_text(field);
    bool is_default = false;
    for (const std::string& d : defaults) is_default = is_default || value == d;
    TORCH_CHECK(is_default,
                fmt::format("{}: generation field '{}' is {}, which mha's generate does not "
                            "implement; remove it or set it to transformers' default{}",
                            file.source(), field, value,
                            defaults.empty() ? " (null)" : " (" + defaults.front() + ")"));
  }
}

/// transformers' `early_stopping`: true, false or "never".
EarlyStopping early_stopping_of(const HfConfig& file) {
  const std::string value = file.json_text("early_stopping");
  if (value == "true") return EarlyStopping::kTrue;
  if (value == "false") return EarlyStopping::kFalse;
  TORCH_CHECK_VALUE(value == "\"never\"",
                    fmt::format("{}: `early_stopping` must be a boolean or 'never', but is {}.",
                                file.source(), value));
  return EarlyStopping::kNever;
}

/// An optional token id: the field's integer, or unset when absent or null.
std::optional<int64_t> token_of(const HfConfig& file, const std::string& field) {
  return file.has(field) ? std::optional<int64_t>(file.integer(field)) : std::nullopt;
}

/// The implemented fields `file` sets; the others keep `config`'s values.
void read_fields(const HfConfig& file, GenerationConfig& c) {
  if (file.has("max_length")) c.max_length(file.integer("max_length"));
  if (file.has("max_new_tokens")) c.max_new_tokens(file.integer("max_new_tokens"));
  if (file.has("min_length")) c.min_length(file.integer("min_length"));
  if (file.has("min_new_tokens")) c.min_new_tokens(file.integer("min_new_tokens"));
  c.do_sample(file.boolean("do_sample", c.do_sample()));
  c.num_beams(file.integer("num_beams", c.num_beams()));
  c.num_return_sequences(file.integer("num_return_sequences", c.num_return_sequences()));
  c.length_penalty(file.number("length_penalty", c.length_penalty()));
  if (file.has("early_stopping")) c.early_stopping(early_stopping_of(file));
  c.temperature(file.number("temperature", c.temperature()));
  c.top_k(file.integer("top_k", c.top_k()));
  c.top_p(file.number("top_p", c.top_p()));
  c.repetition_penalty(file.number("repetition_penalty", c.repetition_penalty()));
  c.no_repeat_ngram_size(file.integer("no_repeat_ngram_size", c.no_repeat_ngram_size()));
  if (file.has("bad_words_ids")) c.bad_words_ids(file.integer_lists("bad_words_ids"));
  c.forced_bos_token_id(token_of(file, "forced_bos_token_id"));
  if (file.has("forced_eos_token_id")) c.forced_eos_token_id(file.integers("forced_eos_token_id"));
  if (file.has("suppress_tokens")) c.suppress_tokens(file.integers("suppress_tokens"));
  if (file.has("begin_suppress_tokens")) {
    c.begin_suppress_tokens(file.integers("begin_suppress_tokens"));
  }
  c.renormalize_logits(file.boolean("renormalize_logits", c.renormalize_logits()));
  if (file.has("eos_token_id")) c.eos_token_id(file.integers("eos_token_id"));
  if (file.has("stop_strings")) c.stop_strings(file.strings("stop_strings"));
  c.pad_token_id(token_of(file, "pad_token_id"));
  c.bos_token_id(token_of(file, "bos_token_id"));
  c.decoder_start_token_id(token_of(file, "decoder_start_token_id"));
}

/// `value` as Python's `str(float)` writes it: 0.0, 1.5, 1e-05.
std::string python_float(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".enia") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

void GenerationConfig::validate() const {
  TORCH_CHECK_VALUE(!max_new_tokens_ || *max_new_tokens_ > 0,
                    fmt::format("`max_new_tokens` must be greater than 0, but is {}.",
                                max_new_tokens_.value_or(0)));
  TORCH_CHECK_VALUE(
      min_length_ >= 0,
      fmt::format("`min_length` has to be a non-negative integer, but is {}", min_length_));
  TORCH_CHECK_VALUE(
      num_beams_ >= 1,
      fmt::format("`num_beams` has to be a strictly positive integer, but is {}", num_beams_));
  if (num_return_sequences_ > 1) {
    TORCH_CHECK_VALUE(num_beams_ > 1 || do_sample_,
                      fmt::format("Greedy methods (do_sample != True) without beam search do not "
                                  "support `num_return_sequences` different than 1 (got {}).",
                                  num_return_sequences_));
    TORCH_CHECK_VALUE(num_beams_ == 1 || num_return_sequences_ <= num_beams_,
                      fmt::format("`num_return_sequences` ({}) has to be smaller or equal to "
                                  "`num_beams` ({}).",
                                  num_return_sequences_, num_beams_));
  }
  TORCH_CHECK_VALUE(repetition_penalty_ > 0,
                    fmt::format("`penalty` has to be a strictly positive float, but is {}",
                                python_float(repetition_penalty_)));
  if (do_sample_) {
    TORCH_CHECK_VALUE(temperature_ > 0,
                      fmt::format("`temperature` (={}) has to be a strictly positive float, "
                                  "otherwise your next token scores will be invalid.{}",
                                  python_float(temperature_),
                                  temperature_ == 0.0 ? " If you're looking for greedy decoding "
                                                        "strategies, set `do_sample=False`."
                                                      : ""));
    TORCH_CHECK_VALUE(
        top_k_ >= 0,
        fmt::format("`top_k` has to be a strictly positive integer, but is {}", top_k_));
    TORCH_CHECK_VALUE(top_p_ >= 0, fmt::format("`top_p` has to be a float > 0 and < 1, but is {}",
                                               python_float(top_p_)));
  }
  check_forced_not_suppressed(
      "forced_bos_token_id",
      forced_bos_token_id_ ? std::vector<int64_t>{*forced_bos_token_id_} : std::vector<int64_t>{},
      suppress_tokens_);
  check_forced_not_suppressed("forced_eos_token_id", forced_eos_token_id_, suppress_tokens_);
}

GenerationConfig read_generation_config(const std::string& directory) {
  const std::filesystem::path dir(directory);
  const std::filesystem::path generation_file = dir / "generation_config.json";
  const HfConfig file = HfConfig::read(
      (std::filesystem::exists(generation_file) ? generation_file : dir / "config.json").string());
  check_unimplemented(file);
  GenerationConfig config;
  read_fields(file, config);
  try {
    config.validate();
  } catch (const c10::Error& e) {
    TORCH_CHECK_VALUE(false, file.source(), ": ", e.what_without_backtrace());
  }
  return config;
}

}  // namespace mha
