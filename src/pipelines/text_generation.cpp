// mha::TextGenerationPipeline: transformers 5.23's pipelines/text_generation.py
// (preprocess, _forward, postprocess) and pipelines/base.py's
// `_prepare_generate_kwargs` (the pipeline's generation defaults).

#include <c10/util/Exception.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/text_generation_pipeline.h>
#include <torch/types.h>

#include <utility>

namespace mha {

namespace {

/// TextGenerationPipeline's `_default_generation_config`.
constexpr int64_t kDefaultNewTokens = 256;
constexpr double kDefaultTemperature = 0.7;

}  // namespace

TextGenerationPipeline::TextGenerationPipeline(const std::string& directory)
    : TextGenerationPipeline(load_hf_model(directory).as<CausalLM>(),
                             load_hf_tokenizer(directory),
                             read_generation_config(directory)) {}

TextGenerationPipeline::TextGenerationPipeline(CausalLM model,
                                               Tokenizer tokenizer,
                                               GenerationConfig generation_config)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      generation_config_(std::move(generation_config)) {}

GenerationConfig TextGenerationPipeline::call_config(const TextGenerationOptions& options) const {
  // A field is set by the call's argument, else by a config value other than
  // GenerationConfig's default (transformers' to_diff_dict); the pipeline's
  // defaults fill the rest, the temperature only when sampling.
  GenerationConfig config = options.generation_config().value_or(generation_config_);
  const GenerationConfig unset;
  if (options.max_new_tokens()) {
    config.max_new_tokens(options.max_new_tokens());
  } else if (!config.max_new_tokens() && !config.max_length()) {
    config.max_new_tokens(kDefaultNewTokens);
  }
  if (options.do_sample()) {
    config.do_sample(*options.do_sample());
  } else if (config.do_sample() == unset.do_sample()) {
    config.do_sample(true);
  }
  if (options.temperature()) {
    config.temperature(*options.temperature());
  } else if (config.do_sample() && config.temperature() == unset.temperature()) {
    config.temperature(kDefaultTemperature);
  }
  if (!config.pad_token_id() && tokenizer_.pad_token_id()) {
    config.pad_token_id(tokenizer_.pad_token_id());
  }
  return config;
}

std::vector<std::vector<std::string>> TextGenerationPipeline::operator()(
    const std::vector<std::string>& prompts, const TextGenerationOptions& options) const {
  const GenerationConfig config = call_config(options);
  const std::optional<Tokenizer> stop_tokenizer =
      config.stop_strings().empty() ? std::nullopt : std::optional<Tokenizer>(tokenizer_);
  CausalLM model = model_;
  std::vector<std::vector<std::string>> out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int64_t> ids = tokenizer_.encode(prompts[p]);
    TORCH_CHECK_VALUE(!ids.empty(), "TextGenerationPipeline: prompts[", p,
                      "] encodes to no token; transformers would start it from bos_token_id");
    const auto length = static_cast<int64_t>(ids.size());
    const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);  // (1, L)
    const torch::Tensor sequences =
        generate(model, input, torch::ones_like(input), config, std::nullopt, {}, {},
                 stop_tokenizer);  // (R, L + T)
    std::vector<std::string> texts;
    for (int64_t r = 0; r < sequences.size(0); ++r) {
      const torch::Tensor fresh = sequences[r].slice(0, length).contiguous();  // (T)
      const std::vector<int64_t> new_ids(fresh.data_ptr<int64_t>(),
                                         fresh.data_ptr<int64_t>() + fresh.numel());
      const std::string text = tokenizer_.decode(new_ids, options.skip_special_tokens());
      texts.push_back(options.return_full_text() ? prompts[p] + text : text);
    }
    out.push_back(std::move(texts));
  }
  return out;
}

}  // namespace mha
