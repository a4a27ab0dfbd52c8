// Token classification's aggregation, as transformers 5.23's
// pipelines/token_classification.py groups tokens and words.

#include "pipelines/entity_groups.h"

#include <algorithm>
#include <utility>

namespace mha {
namespace detail {
namespace {

/// The first index of the largest value (numpy's argmax).
size_t argmax(const std::vector<float>& values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

/// get_tag: ("B" or "I", the type) of a label; a label without B-/I- is an I- of itself.
std::pair<std::string, std::string> tag_of(const std::string& label) {
  if (label.rfind("B-", 0) == 0) return {"B", label.substr(2)};
  if (label.rfind("I-", 0) == 0) return {"I", label.substr(2)};
  return {"I", label};
}

}  // namespace

std::vector<Entity> EntityGrouping::aggregate(const std::vector<PreEntity>& tokens,
                                              AggregationStrategy strategy) const {
  std::vector<Entity> entities;
  if (strategy == AggregationStrategy::kNone || strategy == AggregationStrategy::kSimple) {
    for (const PreEntity& t : tokens) {
      const size_t best = argmax(t.scores);
      entities.push_back({id2label.at(best), t.scores[best], t.index, t.word, t.start, t.end});
    }
    return strategy == AggregationStrategy::kNone ? entities : group(entities);
  }
  // aggregate_words: a token that is not a subword starts a word.
  std::vector<const PreEntity*> word;
  for (const PreEntity& t : tokens) {
    if (!word.empty() && !t.is_subword) {
      entities.push_back(word_entity(word, strategy));
      word.clear();
    }
    word.push_back(&t);
  }
  if (!word.empty()) entities.push_back(word_entity(word, strategy));
  return group(entities);
}

Entity EntityGrouping::word_entity(const std::vector<const PreEntity*>& word,
                                   AggregationStrategy strategy) const {
  std::vector<std::string> pieces;
  for (const PreEntity* t : word) pieces.push_back(t->word);
  std::vector<float> scores = word.front()->scores;  // kFirst
  if (strategy == AggregationStrategy::kMax) {       // the token whose best score is largest
    const PreEntity* best = word.front();
    for (const PreEntity* t : word) {
      if (t->scores[argmax(t->scores)] > best->scores[argmax(best->scores)]) best = t;
    }
    scores = best->scores;
  } else if (strategy == AggregationStrategy::kAverage) {
    for (size_t c = 0; c < scores.size(); ++c) {
      double sum = 0.0;
      for (const PreEntity* t : word) sum += t->scores[c];
      scores[c] = static_cast<float>(sum / static_cast<double>(word.size()));
    }
  }
  const size_t best = argmax(scores);
  return {id2label.at(best),   scores[best],    -1, tokenizer.convert_tokens_to_string(pieces),
          word.front()->start, word.back()->end};
}

std::vector<Entity> EntityGrouping::group(const std::vector<Entity>& entities) const {
  std::vector<Entity> groups;
  std::vector<const Entity*> members;
  for (const Entity& e : entities) {
    if (!members.empty()) {
      const auto [bi, type] = tag_of(e.label);
      if (type != tag_of(members.back()->label).second || bi == "B") {
        groups.push_back(group_entity(members));
        members.clear();
      }
    }
    members.push_back(&e);
  }
  if (!members.empty()) groups.push_back(group_entity(members));
  return groups;
}

Entity EntityGrouping::group_entity(const std::vector<const Entity*>& members) const {
  const std::string& first = members.front()->label;  // split("-", 1)[-1]
  const size_t dash = first.find('-');
  double sum = 0.0;
  std::vector<std::string> words;
  for (const Entity* e : members) {
    sum += e->score;
    words.push_back(e->word);
  }
  return {dash == std::string::npos ? first : first.substr(dash + 1),
          sum / static_cast<double>(members.size()),
          -1,
          tokenizer.convert_tokens_to_string(words),
          members.front()->start,
          members.back()->end};
}

std::vector<Entity> without_overlaps(std::vector<Entity> entities) {
  if (entities.empty()) return entities;
  std::stable_sort(entities.begin(), entities.end(),
                   [](const Entity& a, const Entity& b) { return a.start < b.start; });
  std::vector<Entity> out;
  size_t kept = 0;  // the entity kept of the current run
  for (size_t i = 0; i < entities.size(); ++i) {
    const Entity& e = entities[i];
    const Entity& previous = entities[kept];
    if (previous.start <= e.start && e.start < previous.end) {
      const int64_t length = e.end - e.start;
      const int64_t previous_length = previous.end - previous.start;
      if (length > previous_length || (length == previous_length && e.score > previous.score)) {
        kept = i;
      }
    } else {
      out.push_back(previous);
      kept = i;
    }
  }
  out.push_back(entities[kept]);
  return out;
}

}  // namespace detail
}  // namespace mha
