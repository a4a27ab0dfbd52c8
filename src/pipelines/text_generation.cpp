// mha::TextGenerationPipeline: transformers 5.23's pipelines/text_generation.py
// (preprocess, _forward, postprocess), pipelines/base.py's
// `_prepare_generate_kwargs` (the pipeline's generation defaults) and
// `pad_collate_fn` (a batch's prompts padded on the left).

#include <c10/util/Exception.h>
#include <mha/generation.h>
#include <mha/hf_models.h>
#include <mha/text_generation_pipeline.h>
#include <torch/types.h>

#include <algorithm>
#include <utility>

#include "pipelines/batches.h"

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
  TORCH_CHECK_VALUE(options.batch_size() == 1 || tokenizer_.pad_token_id(),
                    "TextGenerationPipeline: batch_size ", options.batch_size(),
                    " needs the tokenizer's pad token, and this tokenizer has none (transformers: "
                    "\"Pipeline with tokenizer without pad_token cannot do batching\")");
  std::vector<std::vector<int64_t>> ids;
  for (size_t p = 0; p < prompts.size(); ++p) {
    ids.push_back(tokenizer_.encode(prompts[p]));
    TORCH_CHECK_VALUE(!ids.back().empty(), "TextGenerationPipeline: prompts[", p,
                      "] encodes to no token; transformers would start it from bos_token_id");
  }
  if (prompts.size() > 1) {
    // transformers runs a list of prompts through a torch DataLoader, whose
    // iterator draws its base seed from the default generator first.
    torch::empty({}, torch::kLong).random_();
  }
  std::vector<std::vector<std::string>> out;
  detail::for_each_batch(prompts.size(), options.batch_size(), [&](size_t begin, size_t end) {
    for (auto& texts : run_batch(prompts, ids, begin, end, config, options)) {
      out.push_back(std::move(texts));
    }
  });
  return out;
}

std::vector<std::vector<std::string>> TextGenerationPipeline::run_batch(
    const std::vector<std::string>& prompts,
    const std::vector<std::vector<int64_t>>& ids,
    size_t begin,
    size_t end,
    const GenerationConfig& config,
    const TextGenerationOptions& options) const {
  size_t longest = 0;
  for (size_t p = begin; p < end; ++p) longest = std::max(longest, ids[p].size());
  const auto length = static_cast<int64_t>(longest);
  const auto batch = static_cast<int64_t>(end - begin);
  torch::Tensor input =
      torch::full({batch, length}, tokenizer_.pad_token_id().value_or(0), torch::kLong);  // (B, L)
  torch::Tensor mask = torch::zeros({batch, length}, torch::kLong);                       // (B, L)
  for (size_t p = begin; p < end; ++p) {  // padded on the left
    const auto n = static_cast<int64_t>(ids[p].size());
    const auto row = static_cast<int64_t>(p - begin);
    input[row].narrow(0, length - n, n).copy_(torch::tensor(ids[p], torch::kLong));
    mask[row].narrow(0, length - n, n).fill_(1);
  }
  CausalLM model = model_;
  const torch::Tensor sequences = generate(
      model, input, mask, config, std::nullopt, {}, {},
      config.stop_strings().empty() ? std::nullopt
                                    : std::optional<Tokenizer>(tokenizer_));  // (B R, L + T)
  const int64_t per_prompt = sequences.size(0) / batch;
  std::vector<std::vector<std::string>> out(end - begin);
  for (int64_t r = 0; r < sequences.size(0); ++r) {
    const torch::Tensor fresh = sequences[r].slice(0, length).contiguous();  // (T)
    const std::vector<int64_t> new_ids(fresh.data_ptr<int64_t>(),
                                       fresh.data_ptr<int64_t>() + fresh.numel());
    const std::string text = tokenizer_.decode(new_ids, options.skip_special_tokens());
    const std::string& prompt = prompts[begin + static_cast<size_t>(r / per_prompt)];
    out[static_cast<size_t>(r / per_prompt)].push_back(options.return_full_text() ? prompt + text
                                                                                  : text);
  }
  return out;
}

}  // namespace mha
