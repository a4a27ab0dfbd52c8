#include "state_dict/tensor_names.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace mha {
namespace detail {
namespace {

constexpr int kMaxDepth = 1000;

/// The name segment of a dict key: a str as is, an int as decimal text;
/// nullopt for other keys.
std::optional<std::string> key_segment(const Value& key) {
  switch (key.kind) {
    case ValueKind::kStr:
    case ValueKind::kBigInt:
      return key.text;
    case ValueKind::kInt:
      return std::to_string(key.integer);
    default:
      return std::nullopt;
  }
}

/// How a skipped path names a dict key that is not a str or an int.
const char* key_label(const Value& key) {
  switch (key.kind) {
    case ValueKind::kBool:
      return "<bool key>";
    case ValueKind::kFloat:
      return "<float key>";
    case ValueKind::kNone:
      return "<None key>";
    case ValueKind::kBytes:
      return "<bytes key>";
    case ValueKind::kTuple:
      return key.text.empty() ? "<tuple key>" : "<other key>";
    default:
      return "<other key>";
  }
}

std::string join(const std::string& name, const std::string& segment) {
  return name.empty() ? segment : name + "." + segment;
}

/// The indices of the entries of `dict` that Python keeps: for a str or int
/// key given twice, the last value (`d[k] = v` replaces).
std::vector<size_t> kept_entries(const Value& dict) {
  std::unordered_map<std::string, size_t> last;
  const size_t n = dict.items.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    if (const auto segment = key_segment(*dict.items[2 * i])) {
      last[(dict.items[2 * i]->kind == ValueKind::kStr ? "s" : "i") + *segment] = i;
    }
  }
  std::vector<size_t> kept;
  for (size_t i = 0; i < n; ++i) {
    const auto segment = key_segment(*dict.items[2 * i]);
    if (!segment ||
        last[(dict.items[2 * i]->kind == ValueKind::kStr ? "s" : "i") + *segment] == i) {
      kept.push_back(i);
    }
  }
  return kept;
}

class Namer {
 public:
  /// Names may take 64 bytes per byte of pickle, plus 1 MiB.
  Namer(size_t pickle_bytes, ReadResult& out) : budget_(64 * pickle_bytes + (1 << 20)), out_(out) {}

  /// `name`: the dotted name so far; `where`: the Python subscripts, for messages.
  /// Only containers that hold tensors are entered.
  void visit(const Value& value, const std::string& name, const std::string& where, int depth) {
    if (depth > kMaxDepth) {
      pickle_unsupported("containers nested deeper than 1000 levels");
    }
    charge(name.size() + where.size() + 1);
    switch (value.kind) {
      case ValueKind::kTensor:
        add(value, name, where);
        break;
      case ValueKind::kDict:
        enter(value, [&] { visit_dict(value, name, where, depth); });
        break;
      case ValueKind::kList:
      case ValueKind::kTuple:
        enter(value, [&] {
          for (size_t i = 0; i < value.items.size(); ++i) {
            if (holds_tensor(*value.items[i], 0)) {
              visit(*value.items[i], join(name, std::to_string(i)), fmt::format("{}[{}]", where, i),
                    depth + 1);
            }
          }
        });
        break;
      case ValueKind::kSet:
        for (const Value* item : value.items) {
          if (holds_tensor(*item, 0)) {
            skip(join(name, "<set item>"));
          }
        }
        break;
      default:
        break;  // not a tensor, nothing inside
    }
  }

 private:
  template <typename Body>
  void enter(const Value& container, Body&& body) {
    if (!on_path_.insert(&container).second) {
      pickle_unsupported("a container that contains itself");
    }
    body();
    on_path_.erase(&container);
  }

  void visit_dict(const Value& dict, const std::string& name, const std::string& where, int depth) {
    for (const size_t i : kept_entries(dict)) {
      const Value& key = *dict.items[2 * i];
      const Value& value = *dict.items[2 * i + 1];
      const auto segment = key_segment(key);
      if (segment && holds_tensor(value, 0)) {
        const auto subscript = key.kind == ValueKind::kStr ? fmt::format("['{}']", *segment)
                                                           : fmt::format("[{}]", *segment);
        visit(value, join(name, *segment), where + subscript, depth + 1);
      } else if (!segment && (holds_tensor(key, 0) || holds_tensor(value, 0))) {
        skip(join(name, key_label(key)));
      }
    }
  }

  void charge(size_t bytes) {
    spent_ += bytes;
    if (spent_ > budget_) {
      pickle_unsupported("containers shared so often that their names outgrow the pickle");
    }
  }

  void skip(std::string path) {
    charge(path.size());
    out_.skipped.push_back(std::move(path));
  }

  void add(const Value& tensor, const std::string& name, const std::string& where) {
    const auto [found, inserted] = where_by_name_.emplace(name, where);
    if (!inserted) {
      pickle_unsupported(fmt::format("the tensors at {} and {} both get the name '{}'",
                                     found->second.empty() ? "the root" : found->second,
                                     where.empty() ? "the root" : where, name));
    }
    out_.tensors.emplace(name, tensor.tensor);
  }

  /// Whether a tensor is reachable from `value` (memoized; a cycle adds nothing).
  bool holds_tensor(const Value& value, int depth) {
    if (value.kind == ValueKind::kTensor) {
      return true;
    }
    if (value.items.empty()) {
      return false;
    }
    if (depth > kMaxDepth) {
      pickle_unsupported("containers nested deeper than 1000 levels");
    }
    const auto [found, inserted] = holds_.emplace(&value, false);
    if (!inserted) {
      return found->second;
    }
    bool holds = false;
    for (const Value* item : value.items) {
      holds = holds || holds_tensor(*item, depth + 1);
    }
    holds_[&value] = holds;
    return holds;
  }

  size_t spent_ = 0;  ///< bytes of the names and paths built so far
  const size_t budget_;
  ReadResult& out_;
  std::unordered_set<const Value*> on_path_;
  std::unordered_map<const Value*, bool> holds_;
  std::unordered_map<std::string, std::string> where_by_name_;
};

}  // namespace

void name_tensors(const Value& root, size_t pickle_bytes, ReadResult& out) {
  Namer(pickle_bytes, out).visit(root, "", "", 0);
}

}  // namespace detail
}  // namespace mha
