// The order and the descriptions of attention blocks: natural order, the
// options a block implies, and the one-line summary that groups prefixes
// differing only in their numbers ("encoder.layers.encoder_layer_{0..11}.").

#include "state_dict/block_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <vector>

namespace mha {
namespace detail {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

size_t digits_end(const std::string& s, size_t from) {
  while (from < s.size() && is_digit(s[from])) {
    ++from;
  }
  return from;
}

/// Stands for a run of digits in a skeleton (never part of a key in practice).
constexpr char kSlot = '\x1f';

/// A prefix split at its runs of digits.
struct Shape {
  std::string skeleton;              ///< the prefix, each run of digits replaced by kSlot
  std::vector<std::string> numbers;  ///< the runs, in order
};

Shape shape_of(const std::string& prefix) {
  Shape shape;
  for (size_t i = 0; i < prefix.size();) {
    if (is_digit(prefix[i])) {
      const size_t end = digits_end(prefix, i);
      shape.numbers.push_back(prefix.substr(i, end - i));
      shape.skeleton += kSlot;
      i = end;
    } else {
      shape.skeleton += prefix[i++];
    }
  }
  return shape;
}

struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const { return natural_less(a, b); }
};
using NumberSet = std::set<std::string, NaturalLess>;

/// The value of a run of digits when it is a plain number ("7", not "07").
std::optional<long long> plain_number(const std::string& digits) {
  if (digits.size() > 18 || (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

/// "{0..11}", "{0,2}" or "{0..3,7}": runs of three or more consecutive numbers as a range.
std::string number_set(const NumberSet& values) {
  const std::vector<std::string> sorted(values.begin(), values.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && plain_number(sorted[j]) && plain_number(sorted[j + 1]) &&
           *plain_number(sorted[j + 1]) == *plain_number(sorted[j]) + 1) {
      ++j;
    }
    if (j - i >= 2) {
      parts.push_back(sorted[i] + ".." + sorted[j]);
    } else {
      parts.insert(parts.end(), sorted.begin() + i, sorted.begin() + j + 1);
    }
    i = j + 1;
  }
  return fmt::format("{{{}}}", fmt::join(parts, ","));
}

/// Blocks with one skeleton and one description of options.
struct Group {
  std::string skeleton;
  std::string options;
  std::vector<NumberSet> slots;  ///< the numbers seen in each run of digits
  size_t count = 0;
};

/// The group's prefixes as one pattern: a number that varies becomes its set.
std::string pattern(const Group& group) {
  std::string text;
  size_t slot = 0;
  for (const char c : group.skeleton) {
    if (c != kSlot) {
      text += c;
      continue;
    }
    const NumberSet& values = group.slots[slot++];
    text += values.size() == 1 ? *values.begin() : number_set(values);
  }
  return text;
}

std::vector<Group> group_blocks(const std::vector<AttentionBlock>& blocks) {
  std::vector<Group> groups;
  for (const auto& block : blocks) {
    const Shape shape = shape_of(block.prefix);
    const std::string options = describe_options(block);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.skeleton == shape.skeleton && g.options == options;
    });
    if (group == groups.end()) {
      groups.push_back({shape.skeleton, options, std::vector<NumberSet>(shape.numbers.size()), 0});
      group = groups.end() - 1;
    }
    for (size_t i = 0; i < shape.numbers.size(); ++i) {
      group->slots[i].insert(shape.numbers[i]);
    }
    ++group->count;
  }
  return groups;
}

/// At most this many groups are described; the others are counted.
constexpr size_t kMaxGroups = 6;

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (!is_digit(a[i]) || !is_digit(b[j])) {
      if (a[i] != b[j]) {
        return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      }
      ++i, ++j;
      continue;
    }
    const size_t a_end = digits_end(a, i), b_end = digits_end(b, j);
    size_t a_digit = i, b_digit = j;  // the first significant digits
    while (a_digit + 1 < a_end && a[a_digit] == '0') ++a_digit;
    while (b_digit + 1 < b_end && b[b_digit] == '0') ++b_digit;
    if (a_end - a_digit != b_end - b_digit) {
      return a_end - a_digit < b_end - b_digit;
    }
    if (const int c = a.compare(a_digit, a_end - a_digit, b, b_digit, b_end - b_digit); c != 0) {
      return c < 0;
    }
    if (a_end - i != b_end - j) {
      return a_end - i < b_end - j;  // the same number: fewer leading zeros first
    }
    i = a_end, j = b_end;
  }
  return i == a.size() && j < b.size();
}

std::string describe_options(const AttentionBlock& block) {
  std::string text = fmt::format("embed_dim={}", block.embed_dim);
  if (block.kdim != block.embed_dim || block.vdim != block.embed_dim) {
    text += fmt::format(", kdim={}, vdim={}", block.kdim, block.vdim);
  }
  if (!block.packed) {
    text += ", separate q/k/v";
  }
  if (!block.bias) {
    text += ", no bias";
  }
  if (block.add_bias_kv) {
    text += ", add_bias_kv";
  }
  if (block.naming == AttentionNaming::kQkvProj) {
    text += ", qkv/proj names: KeyMap::vit()";
  }
  return text;
}

std::string options_code(const AttentionBlock& block) {
  std::string code = fmt::format("mha::MultiheadAttentionOptions({}, num_heads)", block.embed_dim);
  if (!block.packed) {
    code += fmt::format(".kdim({}).vdim({})", block.kdim, block.vdim);
  }
  if (!block.bias) {
    code += ".bias(false)";
  }
  if (block.add_bias_kv) {
    code += ".add_bias_kv(true)";
  }
  return code;
}

}  // namespace detail

std::string AttentionBlock::load_code(const std::string& file) const {
  const bool timm = naming == AttentionNaming::kQkvProj;
  return fmt::format(
      "mha::MultiheadAttention attn({}{});\n"
      "mha::load_state_dict(attn, \"{}\", mha::LoadOptions().prefix(\"{}\"){});",
      detail::options_code(*this), timm ? ".batch_first(true)" : "", file, prefix,
      timm ? ".key_map(mha::KeyMap::vit())" : "");
}

std::string summarize_attention_blocks(const std::vector<AttentionBlock>& blocks) {
  if (blocks.empty()) {
    return "no attention blocks";
  }
  const auto groups = detail::group_blocks(blocks);
  auto describe = [&](const detail::Group& group, const std::string& count) {
    const std::string where =
        group.skeleton.empty() ? "with no prefix" : "under " + detail::pattern(group);
    return fmt::format("{} {} ({})", count, where, group.options);
  };
  if (groups.size() == 1) {
    const size_t n = groups[0].count;
    return describe(groups[0], fmt::format("{} attention block{}", n, n == 1 ? "" : "s"));
  }
  std::vector<std::string> parts;
  size_t described = 0;
  for (size_t i = 0; i < groups.size() && i < detail::kMaxGroups; ++i) {
    parts.push_back(describe(groups[i], std::to_string(groups[i].count)));
    described += groups[i].count;
  }
  if (described < blocks.size()) {
    parts.push_back(fmt::format("and {} more", blocks.size() - described));
  }
  return fmt::format("{} attention blocks: {}", blocks.size(), fmt::join(parts, "; "));
}

}  // namespace mha
