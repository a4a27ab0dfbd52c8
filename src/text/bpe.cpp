#include "text/bpe.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

uint64_t merge_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, int64_t> vocab,
         const std::vector<std::pair<std::string, std::string>>& merges,
         BpeOptions options)
    : VocabularyModel(std::move(vocab)), options_(std::move(options)) {
  const size_t prefix = options_.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    // The right token's continuing-subword prefix is not part of the merged one.
    const auto a = vocab_.id(left), b = vocab_.id(right);
    const auto merged =
        right.size() >= prefix ? vocab_.id(left + right.substr(prefix)) : std::nullopt;
    TORCH_CHECK_VALUE(a && b && merged, "BPE: merge ", rank, " ('", left, "', '", right,
                      "') names a token that is not in the vocabulary");
    merges_.emplace(merge_key(*a, *b), Merge{static_cast<int64_t>(rank), *merged});
  }
  if (options_.unk_token) {
    unk_id_ = vocab_.id(*options_.unk_token);
    TORCH_CHECK_VALUE(unk_id_.has_value(), "BPE: unk_token '", *options_.unk_token,
                      "' is not in the vocabulary");
  }
}

const Bpe::Merge* Bpe::merge_of(int64_t left, int64_t right) const {
  const auto found = merges_.find(merge_key(left, right));
  return found == merges_.end() ? nullptr : &found->second;
}

std::vector<int64_t> Bpe::merge_all(std::vector<int64_t> symbols,
                                    std::vector<uint32_t>* lengths) const {
  // Each symbol links to its neighbours; a merge keeps the left one.
  const auto n = static_cast<int64_t>(symbols.size());
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int64_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  // (rank, position, merged id), lowest rank then leftmost first.
  using Candidate = std::tuple<int64_t, int64_t, int64_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int64_t at) {
    if (at < 0 || next[at] < 0) return;
    if (const Merge* m = merge_of(symbols[at], symbols[next[at]]))
      queue.emplace(m->rank, at, m->id);
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const auto [rank, at, id] = queue.top();
    queue.pop();
    if (!alive[at] || next[at] < 0) continue;
    const Merge* m = merge_of(symbols[at], symbols[next[at]]);
    if (m == nullptr || m->id != id) continue;  // stale: a neighbour merged since
    const int64_t right = next[at];
    symbols[at] = id;
    if (lengths != nullptr) (*lengths)[at] += (*lengths)[right];
    alive[right] = false;
    next[at] = next[right];
    if (next[at] >= 0) prev[next[at]] = at;
    push(prev[at]);
    push(at);
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    if (lengths != nullptr) (*lengths)[out.size()] = (*lengths)[i];
    out.push_back(symbols[i]);
  }
  if (lengths != nullptr) lengths->resize(out.size());
  return out;
}

bool Bpe::append_byte_tokens(const std::string& text, std::vector<int64_t>& ids) const {
  std::vector<int64_t> bytes;
  for (const char byte : text) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(byte));
    const auto id = vocab_.id(name);
    if (!id) return false;
    bytes.push_back(*id);
  }
  ids.insert(ids.end(), bytes.begin(), bytes.end());
  return true;
}

std::vector<int64_t> Bpe::initial_symbols(const std::string& word,
                                          std::vector<uint32_t>& lengths) const {
  std::vector<int64_t> symbols;
  // An unknown token not yet written (fuse_unk joins the next) and its bytes.
  std::optional<int64_t> unknown;
  uint32_t unknown_length = 0;
  auto flush_unknown = [&] {
    symbols.push_back(*std::exchange(unknown, std::nullopt));
    lengths.push_back(std::exchange(unknown_length, 0));
  };
  for (size_t at = 0, length = 0; at < word.size(); at += length) {
    code_point_at(word, at, length);
    std::string piece = word.substr(at, length);
    if (at > 0) piece = options_.continuing_subword_prefix + piece;
    if (at + length == word.size()) piece += options_.end_of_word_suffix;
    if (const auto found = vocab_.id(piece)) {
      if (unknown) flush_unknown();
      symbols.push_back(*found);
      lengths.push_back(static_cast<uint32_t>(length));
      continue;
    }
    // tokenizers writes byte tokens (one byte each) before an unknown token still pending.
    if (options_.byte_fallback && append_byte_tokens(piece, symbols)) {
      lengths.resize(symbols.size(), 1);
      continue;
    }
    if (!unk_id_) continue;  // dropped
    if (unknown && !options_.fuse_unk) flush_unknown();
    unknown = unk_id_;
    unknown_length += static_cast<uint32_t>(length);
  }
  if (unknown) flush_unknown();
  return symbols;
}

void Bpe::tokenize(const std::string& word, std::vector<int64_t>& ids, Spans* spans) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto whole = vocab_.id(word)) {
      ids.push_back(*whole);
      if (spans != nullptr) spans->emplace_back(0, static_cast<uint32_t>(word.size()));
      return;
    }
  }
  std::vector<uint32_t> lengths;
  std::vector<int64_t> symbols = initial_symbols(word, lengths);
  symbols = merge_all(std::move(symbols), spans != nullptr ? &lengths : nullptr);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (spans == nullptr) return;
  uint32_t at = 0;
  for (const uint32_t length : lengths) {
    spans->emplace_back(at, at + length);
    at += length;
  }
}

}  // namespace detail
}  // namespace mha
