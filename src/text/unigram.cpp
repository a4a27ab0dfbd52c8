#include "text/unigram.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

/// SentencePiece's penalty of an unknown character below the lowest score.
constexpr double kUnknownPenalty = 10.0;

/// The best path's last piece ending at a byte: its id, its start, its score.
struct BestEnding {
  int64_t id = -1;
  std::optional<size_t> starts_at;
  double score = 0;
};

}  // namespace

Unigram::Unigram(std::vector<std::pair<std::string, double>> pieces,
                 std::optional<int64_t> unk_id,
                 bool byte_fallback)
    : pieces_(std::move(pieces)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
  if (unk_id_) {
    TORCH_CHECK_VALUE(!pieces_.empty(), "Unigram: the vocabulary is empty but unk_id is set");
    TORCH_CHECK_VALUE(*unk_id_ >= 0 && *unk_id_ < size(), "Unigram: unk_id ", *unk_id_,
                      " is outside the vocabulary of ", size(), " pieces");
  }
  min_score_ = std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < pieces_.size(); ++id) {
    ids_.emplace(pieces_[id].first, static_cast<int64_t>(id));  // the first of equal pieces
    min_score_ = std::min(min_score_, pieces_[id].second);
    longest_ = std::max(longest_, pieces_[id].first.size());
  }
}

const std::string* Unigram::id_to_token(int64_t id) const {
  return id >= 0 && id < size() ? &pieces_[id].first : nullptr;
}

std::optional<int64_t> Unigram::token_to_id(const std::string& token) const {
  const auto found = ids_.find(token);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

std::vector<std::pair<size_t, size_t>> Unigram::best_pieces(const std::string& word) const {
  const double unknown_score = min_score_ - kUnknownPenalty;
  std::vector<BestEnding> best(word.size() + 1);
  const auto offer = [&](size_t begin, size_t end, int64_t id, double score) {
    BestEnding& at = best[end];
    const double total = best[begin].score + score;
    if (!at.starts_at || total > at.score) at = {id, begin, total};
  };
  for (size_t begin = 0, length = 0; begin < word.size(); begin += length) {
    code_point_at(word, begin, length);
    bool single = false;  // a piece of exactly this character
    const size_t limit = std::min(longest_, word.size() - begin);
    for (size_t n = 1; n <= limit; ++n) {  // pieces by prefix, shortest first
      const auto found = ids_.find(std::string_view(word).substr(begin, n));
      if (found == ids_.end()) continue;
      offer(begin, begin + n, found->second, pieces_[found->second].second);
      single = single || n == length;
    }
    if (!single) {
      TORCH_CHECK_VALUE(unk_id_.has_value(),
                        "Unigram: the text has a character outside the "
                        "vocabulary and the model has no unk_id");
      offer(begin, begin + length, *unk_id_, unknown_score);
    }
  }
  // Back from the end; consecutive unknown pieces become one.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t end = word.size(); end > 0;) {
    const BestEnding& node = best[end];
    const bool fuse = node.id == unk_id_ && !ranges.empty() && ranges.back().first == end &&
                      best[ranges.back().second].id == unk_id_;
    if (fuse) {
      ranges.back().first = *node.starts_at;
    } else {
      ranges.emplace_back(*node.starts_at, end);
    }
    end = *node.starts_at;
  }
  std::reverse(ranges.begin(), ranges.end());
  return ranges;
}

void Unigram::append_piece(std::string_view text, std::vector<int64_t>& ids) const {
  if (const auto found = ids_.find(text); found != ids_.end()) {
    ids.push_back(found->second);
    return;
  }
  if (byte_fallback_) {
    std::vector<int64_t> bytes;
    for (const char byte : text) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(byte));
      const auto id = ids_.find(name);
      if (id == ids_.end()) break;
      bytes.push_back(id->second);
    }
    if (bytes.size() == text.size()) {
      ids.insert(ids.end(), bytes.begin(), bytes.end());
      return;
    }
  }
  TORCH_CHECK_VALUE(unk_id_.has_value(),
                    "Unigram: a piece is outside the vocabulary and the model has no unk_id");
  ids.push_back(*unk_id_);
}

void Unigram::tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const {
  if (word.empty()) return;
  for (const auto& [begin, end] : best_pieces(word)) {
    const size_t before = ids.size();
    append_piece(std::string_view(word).substr(begin, end - begin), ids);
    // tokenizers: a piece's byte tokens each span the whole piece.
    if (spans != nullptr) {
      spans->insert(spans->end(), ids.size() - before,
                    {static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
    }
  }
}

}  // namespace detail
}  // namespace mha
