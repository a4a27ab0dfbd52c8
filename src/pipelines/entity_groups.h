#pragma once

// Private: token classification's aggregation (transformers 5.23,
// pipelines/token_classification.py: aggregate, aggregate_word(s),
// group_sub_entities, group_entities, aggregate_overlapping_entities).

#include <mha/pipelines.h>
#include <mha/tokenizer.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mha {
namespace detail {

/// A token before aggregation: transformers' `pre_entity`.
struct PreEntity {
  std::string word;           ///< the token (or, for the unknown token, its text)
  std::vector<float> scores;  ///< each label's probability
  int64_t start = 0;          ///< its characters [start, end) in the text
  int64_t end = 0;
  int64_t index = 0;  ///< its position in the ids
  bool is_subword = false;
};

/// Joins tokens into entities with the model's labels and the tokenizer's decoder.
struct EntityGrouping {
  const Tokenizer& tokenizer;
  const std::vector<std::string>& id2label;

  /// `aggregate`: each token (kNone), or the tokens (kSimple) or words (the
  /// others) grouped into entities.
  std::vector<Entity> aggregate(const std::vector<PreEntity>& tokens,
                                AggregationStrategy strategy) const;

 private:
  /// A word's tokens as one entity, labelled as `strategy` says.
  Entity word_entity(const std::vector<const PreEntity*>& word, AggregationStrategy strategy) const;
  /// Adjacent entities of one type (B-X, I-X, ...) as groups.
  std::vector<Entity> group(const std::vector<Entity>& entities) const;
  /// One group: its type, mean score, text and characters.
  Entity group_entity(const std::vector<const Entity*>& members) const;
};

/// `aggregate_overlapping_entities`: the entities of overlapping windows in
/// text order, of each run of overlapping ones (an entity starting inside
/// the one kept) the longest, at equal length the better scored.
std::vector<Entity> without_overlaps(std::vector<Entity> entities);

}  // namespace detail
}  // namespace mha
