// mha-pipeline: a task model's answers on the command line.
//
//   mha-pipeline TASK DIR [options] < texts
//
// TASK: text-classification, token-classification, sentence-embedding,
// text-generation, summarization, translation or text2text-generation. Reads
// one text per line of stdin and writes one JSON line per text to stdout, as
// transformers' pipeline (or sentence-transformers' encode) answers: a list of
// {"label", "score"}; a list of entities ({"entity", "score", "index", "word",
// "start", "end"}, or with aggregation {"entity_group", ...}); a list of
// numbers; a list of {"generated_text"} ({"summary_text"},
// {"translation_text"}: transformers 4.x's names). A progress line goes to
// stderr for long inputs. Exit status: 0; 2 for a directory or text it cannot answer (the reason on
// stderr); for a usage error, CLI11's, with the usage.

#include <c10/util/Exception.h>
#include <mha/pipelines.h>
#include <mha/sentence_transformer.h>
#include <mha/text2text_pipeline.h>
#include <mha/text_generation_pipeline.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

/// The command line's choices.
struct Arguments {
  std::string task;
  std::string directory;
  int64_t batch_size = 32;
  std::optional<int64_t> top_k = 1;
  bool all_labels = false;
  std::string function = "default";
  std::string aggregation = "none";
  std::optional<int64_t> stride;
  bool truncation = false;
  std::optional<int64_t> max_new_tokens;
  bool greedy = false;
  bool new_text_only = false;
  std::optional<uint64_t> seed;
};

/// Texts read and answered this many at a time (a progress line after each group).
constexpr size_t kGroup = 1024;

json labels_json(const std::vector<mha::LabelScore>& labels) {
  json out = json::array();
  for (const auto& l : labels) out.push_back({{"label", l.label}, {"score", l.score}});
  return out;
}

json entities_json(const std::vector<mha::Entity>& entities, bool grouped) {
  json out = json::array();
  for (const auto& e : entities) {
    json item = {{grouped ? "entity_group" : "entity", e.label}, {"score", e.score}};
    if (!grouped) item["index"] = e.index;
    item["word"] = e.word;
    item["start"] = e.start;
    item["end"] = e.end;
    out.push_back(item);
  }
  return out;
}

/// The task's answers to `texts`, one JSON value each.
using Answer = std::function<std::vector<json>(const std::vector<std::string>&)>;

/// text-generation's answers: each prompt's texts, after `torch::manual_seed(seed + its
/// line's index)` where a seed is given (transformers' texts after the same seeds).
Answer generation_answer(const Arguments& args) {
  auto pipeline = std::make_shared<mha::TextGenerationPipeline>(args.directory);
  auto options = mha::TextGenerationOptions()
                     .max_new_tokens(args.max_new_tokens)
                     .return_full_text(!args.new_text_only);
  if (args.greedy) options.do_sample(false);
  auto next_line = std::make_shared<uint64_t>(0);
  return [pipeline, options, next_line, seed = args.seed](const std::vector<std::string>& texts) {
    std::vector<json> out;
    for (const std::string& prompt : texts) {
      if (seed) torch::manual_seed(*seed + *next_line);
      ++*next_line;
      const auto generated = (*pipeline)({prompt}, options);  // one prompt's texts
      json texts_json = json::array();
      for (const auto& text : generated[0]) texts_json.push_back({{"generated_text", text}});
      out.push_back(texts_json);
    }
    return out;
  };
}

/// The text-to-text tasks' answers: each text's {FIELD: text} list
/// (transformers 4.x's `return_name` + "_text"), after one
/// `torch::manual_seed(seed)` where a seed is given.
Answer text2text_answer(const Arguments& args) {
  static const std::map<std::string, std::string> fields = {
      {"summarization", "summary_text"},
      {"translation", "translation_text"},
      {"text2text-generation", "generated_text"}};
  auto pipeline = std::make_shared<mha::Text2TextGenerationPipeline>(args.directory);
  const auto options = mha::Text2TextOptions()
                           .max_new_tokens(args.max_new_tokens)
                           .batch_size(args.batch_size)
                           .truncation(args.truncation);
  if (args.seed) torch::manual_seed(*args.seed);
  return [pipeline, options, field = fields.at(args.task)](const std::vector<std::string>& texts) {
    std::vector<json> out;
    for (const auto& generated : (*pipeline)(texts, options)) {
      json texts_json = json::array();
      for (const auto& text : generated) texts_json.push_back({{field, text}});
      out.push_back(texts_json);
    }
    return out;
  };
}

Answer answer_for(const Arguments& args) {
  if (args.task == "text-classification") {
    static const std::map<std::string, mha::ScoreFunction> functions = {
        {"default", mha::ScoreFunction::kDefault},
        {"sigmoid", mha::ScoreFunction::kSigmoid},
        {"softmax", mha::ScoreFunction::kSoftmax},
        {"none", mha::ScoreFunction::kNone}};
    auto pipeline = std::make_shared<mha::TextClassificationPipeline>(args.directory);
    const auto options = mha::TextClassificationOptions()
                             .top_k(args.all_labels ? std::nullopt : args.top_k)
                             .function_to_apply(functions.at(args.function))
                             .batch_size(args.batch_size)
                             .truncation(args.truncation);
    return [pipeline, options](const std::vector<std::string>& texts) {
      std::vector<json> out;
      for (const auto& labels : (*pipeline)(texts, options)) out.push_back(labels_json(labels));
      return out;
    };
  }
  if (args.task == "token-classification") {
    static const std::map<std::string, mha::AggregationStrategy> strategies = {
        {"none", mha::AggregationStrategy::kNone},
        {"simple", mha::AggregationStrategy::kSimple},
        {"first", mha::AggregationStrategy::kFirst},
        {"average", mha::AggregationStrategy::kAverage},
        {"max", mha::AggregationStrategy::kMax}};
    auto pipeline = std::make_shared<mha::TokenClassificationPipeline>(args.directory);
    const auto options = mha::TokenClassificationOptions()
                             .aggregation_strategy(strategies.at(args.aggregation))
                             .batch_size(args.batch_size)
                             .stride(args.stride);
    const bool grouped = args.aggregation != "none";
    return [pipeline, options, grouped](const std::vector<std::string>& texts) {
      std::vector<json> out;
      for (const auto& e : (*pipeline)(texts, options)) out.push_back(entities_json(e, grouped));
      return out;
    };
  }
  if (args.task == "text-generation") return generation_answer(args);
  if (args.task != "sentence-embedding") return text2text_answer(args);
  auto model = std::make_shared<mha::SentenceTransformer>(args.directory);  // sentence-embedding
  const int64_t batch = args.batch_size;
  return [model, batch](const std::vector<std::string>& texts) {
    const torch::Tensor vectors = model->encode(texts, batch).contiguous();  // (N, D)
    std::vector<json> out;
    for (int64_t i = 0; i < vectors.size(0); ++i) {
      const float* row = vectors[i].data_ptr<float>();
      out.emplace_back(std::vector<float>(row, row + vectors.size(1)));
    }
    return out;
  };
}

/// Answers stdin's lines in groups, writing each answer as a JSON line.
void run(const Arguments& args) {
  const Answer answer = answer_for(args);
  size_t done = 0;
  std::vector<std::string> group;
  const auto flush = [&] {
    for (const json& value : answer(group)) std::cout << value.dump() << "\n";
    std::cout.flush();
    done += group.size();
    group.clear();
    if (done >= kGroup) std::cerr << "mha-pipeline: " << done << " texts\n";
  };
  for (std::string line; std::getline(std::cin, line);) {
    group.push_back(line);
    if (group.size() == kGroup) flush();
  }
  if (!group.empty()) flush();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Answers each line of stdin with a task model, one JSON line per text, as "
      "transformers' pipeline(TASK) (sentence-embedding: sentence-transformers' encode)."};
  Arguments args;
  app.add_option("task", args.task, "the task")
      ->required()
      ->check(CLI::IsMember({"text-classification", "token-classification", "sentence-embedding",
                             "text-generation", "summarization", "translation",
                             "text2text-generation"}));
  app.add_option("directory", args.directory, "the model's directory (with its tokenizer)")
      ->required();
  app.add_option("--batch-size", args.batch_size, "texts per model call")
      ->check(CLI::PositiveNumber);
  app.add_option("--top-k", args.top_k, "text-classification: the best K labels")
      ->check(CLI::PositiveNumber);
  app.add_flag("--all-labels", args.all_labels, "text-classification: every label, best first");
  app.add_option("--function", args.function, "text-classification: function_to_apply")
      ->check(CLI::IsMember({"default", "sigmoid", "softmax", "none"}));
  app.add_flag("--truncation", args.truncation,
               "text-classification, text to text: cut texts to the tokenizer's "
               "model_max_length");
  app.add_option("--aggregation", args.aggregation, "token-classification: aggregation_strategy")
      ->check(CLI::IsMember({"none", "simple", "first", "average", "max"}));
  app.add_option("--stride", args.stride,
                 "token-classification: long texts in windows sharing this many tokens")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-new-tokens", args.max_new_tokens,
                 "text-generation, text to text: new tokens at most")
      ->check(CLI::PositiveNumber);
  app.add_flag("--greedy", args.greedy, "text-generation: greedy (do_sample=False)");
  app.add_flag("--new-text-only", args.new_text_only,
               "text-generation: the new text alone (return_full_text=False)");
  app.add_option("--seed", args.seed,
                 "text-generation: torch.manual_seed(SEED + the line's index) before each "
                 "prompt; text to text: torch.manual_seed(SEED) once");
  CLI11_PARSE(app, argc, argv);
  try {
    run(args);
  } catch (const c10::Error& e) {
    std::cerr << "mha-pipeline: " << e.what_without_backtrace() << "\n";
    return 2;
  }
  return 0;
}
