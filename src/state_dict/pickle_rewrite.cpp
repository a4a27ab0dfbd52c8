#include "state_dict/pickle_rewrite.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

// Why and how
// -----------
// `torch.save(model.state_dict())` pickles an `OrderedDict`. LibTorch's
// unpickler (torch/csrc/jit/serialization/unpickler.cpp) maps the global
// `collections.OrderedDict` to a function that replaces its arguments by None
// (it only expects one as a tensor's empty backward hooks), so the SETITEMS
// that fills the state_dict fails ("Expected GenericDict but got None",
// pytorch#36577, #100741). Its type resolver cannot help: that global is
// special-cased before the resolver is asked. Rather than writing a second
// unpickler, this file rewrites the pickle's bytes so that LibTorch's own
// unpickler reads it, keeping every other opcode as is:
//
//   * Python pickles an OrderedDict through `OrderedDict.__reduce__` as
//       <push class> EMPTY_TUPLE REDUCE [MARK key value ... SETITEMS]* [state BUILD]
//     where <push class> is `GLOBAL 'collections OrderedDict'` (optionally
//     memoized with BINPUT) or a BINGET of that memo. The class push and
//     `EMPTY_TUPLE REDUCE` become one EMPTY_DICT; the SETITEMS then fill a
//     real dict. (With a version of LibTorch that maps OrderedDict to an empty
//     dict itself, the rewritten pickle reads the same.)
//   * `state BUILD` sets the instance's `__dict__` (a state_dict's
//     `_metadata`). BUILD on a dict is not supported by the unpickler, so a
//     NEWTRUE is inserted before the state's first byte and BUILD becomes
//     SETITEM: the state is stored under the key True and ignored later.
//
// To know where the state starts and whether BUILD applies to an OrderedDict,
// the scan keeps an abstract stack (kind, first output byte, nesting depth)
// of the values the opcodes would build, but no values. The same scan rejects
// what LibTorch's unpickler does not check and would read out of bounds or
// exhaust memory with: odd item counts for DICT/SETITEMS, stack underflows,
// memo indices that skip ahead (LONG_BINPUT 0xffffffff would allocate 4G
// entries), and very deep nesting (recursive destruction).

namespace mha {
namespace detail {
namespace {

enum class Kind : uint8_t {
  kOther,
  kEmptyTuple,
  kOrderedDictClass,  ///< never emitted: always consumed by the rewrite
  kOrderedDict,
};

struct Entry {
  Kind kind = Kind::kOther;
  size_t out_start = 0;  ///< first byte of the output that builds this value
  size_t object = 0;     ///< index into the depths of the objects built so far
};

struct Mark {
  size_t stack_size;
  size_t out_start;
};

// Protocol-2 opcodes that LibTorch's unpickler understands.
constexpr char kMark = '(';
constexpr char kStop = '.';
constexpr char kBinFloat = 'G';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kNone = 'N';
constexpr char kBinPersId = 'Q';
constexpr char kReduce = 'R';
constexpr char kBinUnicode = 'X';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kBuild = 'b';
constexpr char kGlobal = 'c';
constexpr char kDict = 'd';
constexpr char kEmptyDict = '}';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';
constexpr char kList = 'l';
constexpr char kBinPut = 'q';
constexpr char kLongBinPut = 'r';
constexpr char kSetItem = 's';
constexpr char kTuple = 't';
constexpr char kEmptyTuple = ')';
constexpr char kSetItems = 'u';
constexpr char kProto = '\x80';
constexpr char kNewObj = '\x81';
constexpr char kTuple1 = '\x85';
constexpr char kTuple2 = '\x86';
constexpr char kTuple3 = '\x87';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kLong1 = '\x8a';

class Rewriter {
 public:
  explicit Rewriter(std::string_view in) : in_(in) { out_.reserve(in.size() + 16); }

  std::string run() {
    check(take_byte() == kProto, "pickle does not start with the PROTO opcode");
    const auto protocol = static_cast<uint8_t>(take_byte());
    check(protocol == 2,
          fmt::format("pickle protocol {} is not supported (torch.save writes protocol 2)",
                      protocol));
    out_.append(in_.substr(0, 2));
    while (true) {
      const size_t at = pos_;
      const char op = take_byte();
      if (op == kStop) {
        check(marks_.empty() && stack_.size() == 1,
              fmt::format("STOP at offset {} with {} values and {} marks left", at,
                          stack_.size(), marks_.size()));
        out_.push_back(op);
        return std::move(out_);
      }
      step(op, at);
    }
  }

 private:
  // ~~~ input ~~~

  void check(bool ok, const std::string& what) const {
    TORCH_CHECK(ok, "malformed pickle: ", what);
  }
  void need(size_t n) const {
    check(in_.size() - pos_ >= n,
          fmt::format("truncated at offset {} (needs {} more bytes, {} left)", pos_, n,
                      in_.size() - pos_));
  }
  char take_byte() {
    need(1);
    return in_[pos_++];
  }
  template <typename T>
  T take_le() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, in_.data() + pos_, sizeof(T));  // little-endian hosts only
    pos_ += sizeof(T);
    return value;
  }
  /// A newline-terminated module or class name of GLOBAL.
  std::string_view take_line() {
    const size_t end = in_.find('\n', pos_);
    check(end != std::string_view::npos, fmt::format("unterminated GLOBAL name at {}", pos_));
    const auto line = in_.substr(pos_, end - pos_);
    for (const char c : line) {
      const bool ok = c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                      (c >= 'A' && c <= 'Z');
      check(ok, fmt::format("GLOBAL name at offset {} is not a Python identifier", pos_));
    }
    pos_ = end + 1;
    return line;
  }

  // ~~~ abstract stack ~~~

  size_t frame_base() const { return marks_.empty() ? 0 : marks_.back().stack_size; }
  void need_values(size_t n, size_t at, const char* op) const {
    check(stack_.size() - frame_base() >= n,
          fmt::format("{} at offset {} needs {} values above the mark", op, at, n));
  }
  /// Pushes a new object of nesting `depth`.
  void push(Kind kind, size_t out_start, int depth = 0) {
    check(depth <= kMaxPickleDepth,
          fmt::format("nesting deeper than {} levels", kMaxPickleDepth));
    stack_.push_back({kind, out_start, depths_.size()});
    depths_.push_back(depth);
  }
  int depth_of(const Entry& entry) const { return depths_[entry.object]; }
  /// Replaces the top `n` values by one built from them.
  void combine(size_t n, Kind kind, int extra_depth) {
    const size_t first = stack_.size() - n;
    int depth = 0;
    for (size_t i = first; i < stack_.size(); ++i) {
      depth = std::max(depth, depth_of(stack_[i]));
    }
    const size_t out_start = stack_[first].out_start;
    stack_.resize(first);
    push(kind, out_start, depth + extra_depth);
  }
  /// Pops the values down to the last MARK; returns (count, their max depth).
  std::pair<size_t, int> pop_to_mark(size_t at, const char* op) {
    check(!marks_.empty(), fmt::format("{} at offset {} without a MARK", op, at));
    const Mark mark = marks_.back();
    marks_.pop_back();
    int depth = 0;
    for (size_t i = mark.stack_size; i < stack_.size(); ++i) {
      depth = std::max(depth, depth_of(stack_[i]));
    }
    const size_t count = stack_.size() - mark.stack_size;
    stack_.resize(mark.stack_size);
    return {count, depth};
  }
  /// Raises the depth of the container on top of the stack after items went
  /// in (mutations reach the object however it is referenced: stack or memo).
  void deepen_top(int item_depth) {
    int& depth = depths_[stack_.back().object];
    depth = std::max(depth, item_depth + 1);
    check(depth <= kMaxPickleDepth,
          fmt::format("nesting deeper than {} levels", kMaxPickleDepth));
  }

  // ~~~ memo ~~~

  void memo_put(size_t id, size_t at) {
    check(!stack_.empty() && stack_.size() > frame_base(),
          fmt::format("BINPUT at offset {} with nothing to memoize", at));
    // Python numbers memo entries 0, 1, 2, ...: an index may reuse a slot or
    // take the next one, never skip ahead.
    check(id <= memo_.size(), fmt::format("memo index {} at offset {} skips ahead of {}", id, at,
                                          memo_.size()));
    if (id == memo_.size()) {
      memo_.push_back(stack_.back());
    } else {
      memo_[id] = stack_.back();
    }
  }
  const Entry& memo_get(size_t id, size_t at) const {
    check(id < memo_.size(),
          fmt::format("memo index {} at offset {} was never stored", id, at));
    return memo_[id];
  }

  // ~~~ rewriting ~~~

  /// After the class `collections.OrderedDict` was pushed (not emitted):
  /// accepts `[BINPUT n] EMPTY_TUPLE REDUCE` and emits EMPTY_DICT instead.
  void ordered_dict_call(size_t at) {
    if (pos_ < in_.size() && (in_[pos_] == kBinPut || in_[pos_] == kLongBinPut)) {
      const size_t put_at = pos_;
      const char op = take_byte();
      const size_t id = op == kBinPut ? static_cast<uint8_t>(take_byte()) : take_le<uint32_t>();
      push(Kind::kOrderedDictClass, out_.size());
      memo_put(id, put_at);  // remembered as the class, never emitted
      stack_.pop_back();
    }
    const bool call = in_.size() - pos_ >= 2 && in_[pos_] == kEmptyTuple && in_[pos_ + 1] == kReduce;
    check(call, fmt::format("unsupported use of collections.OrderedDict at offset {} (only "
                            "OrderedDict() with no arguments is supported)",
                            at));
    pos_ += 2;
    push(Kind::kOrderedDict, out_.size());
    out_.push_back(kEmptyDict);
  }

  void emit_from(size_t at) { out_.append(in_.substr(at, pos_ - at)); }

  /// An opcode that pushes a scalar read from its next `n` bytes.
  void skip_argument(size_t n) {
    need(n);
    pos_ += n;
    push(Kind::kOther, out_.size());
  }

  void step(char op, size_t at) {
    switch (op) {
      case kMark:
        marks_.push_back({stack_.size(), out_.size()});
        break;
      case kEmptyTuple:
        push(Kind::kEmptyTuple, out_.size());
        break;
      case kEmptyList:
      case kEmptyDict:
      case kNone:
      case kNewTrue:
      case kNewFalse:
        push(Kind::kOther, out_.size());
        break;
      case kBinInt1:
        skip_argument(1);
        break;
      case kBinInt2:
        skip_argument(2);
        break;
      case kBinInt:
        skip_argument(4);
        break;
      case kBinFloat:
        skip_argument(8);
        break;
      case kLong1:
        skip_argument(static_cast<uint8_t>(take_byte()));
        break;
      case kBinUnicode:
        skip_argument(take_le<uint32_t>());
        break;
      case kBinPut:
      case kLongBinPut: {
        const size_t id = op == kBinPut ? static_cast<uint8_t>(take_byte()) : take_le<uint32_t>();
        memo_put(id, at);
      } break;
      case kBinGet:
      case kLongBinGet: {
        const size_t id = op == kBinGet ? static_cast<uint8_t>(take_byte()) : take_le<uint32_t>();
        const Entry entry = memo_get(id, at);
        if (entry.kind == Kind::kOrderedDictClass) {
          ordered_dict_call(at);
          return;
        }
        stack_.push_back({entry.kind, out_.size(), entry.object});
      } break;
      case kGlobal: {
        const auto module = take_line();
        const auto name = take_line();
        if (module == "collections" && name == "OrderedDict") {
          ordered_dict_call(at);
          return;
        }
        push(Kind::kOther, out_.size());
      } break;
      case kTuple:
      case kList: {
        const size_t mark_out = marks_.empty() ? out_.size() : marks_.back().out_start;
        const auto [count, depth] = pop_to_mark(at, op == kTuple ? "TUPLE" : "LIST");
        (void)count;
        push(Kind::kOther, mark_out, depth + 1);
      } break;
      case kDict: {
        const size_t mark_out = marks_.empty() ? out_.size() : marks_.back().out_start;
        const auto [count, depth] = pop_to_mark(at, "DICT");
        check(count % 2 == 0, fmt::format("DICT at offset {} with an odd item count", at));
        push(Kind::kOther, mark_out, depth + 1);
      } break;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = static_cast<size_t>(static_cast<uint8_t>(op) - 0x84);
        need_values(n, at, "TUPLEn");
        combine(n, Kind::kOther, 1);
      } break;
      case kAppends:
      case kSetItems: {
        const bool items = op == kSetItems;
        const auto [count, depth] = pop_to_mark(at, items ? "SETITEMS" : "APPENDS");
        check(!stack_.empty() && stack_.size() > frame_base(),
              fmt::format("{} at offset {} without a container", items ? "SETITEMS" : "APPENDS",
                          at));
        check(!items || count % 2 == 0,
              fmt::format("SETITEMS at offset {} with an odd item count", at));
        deepen_top(depth);
      } break;
      case kSetItem: {
        need_values(3, at, "SETITEM");
        const int depth = std::max(depth_of(stack_.end()[-1]), depth_of(stack_.end()[-2]));
        stack_.resize(stack_.size() - 2);
        deepen_top(depth);
      } break;
      case kBinPersId:
        need_values(1, at, "BINPERSID");
        stack_.back().kind = Kind::kOther;
        break;
      case kReduce:
      case kNewObj:
        need_values(2, at, op == kReduce ? "REDUCE" : "NEWOBJ");
        combine(2, Kind::kOther, 1);
        break;
      case kBuild: {
        need_values(2, at, "BUILD");
        const Entry state = stack_.back();
        if (stack_.end()[-2].kind == Kind::kOrderedDict) {
          // obj state BUILD  ->  obj True state SETITEM
          out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(state.out_start), kNewTrue);
          stack_.pop_back();
          deepen_top(depth_of(state));
          out_.push_back(kSetItem);
          return;
        }
        stack_.pop_back();
        deepen_top(depth_of(state));
      } break;
      default:
        check(false, fmt::format("unsupported opcode 0x{:02x} at offset {}",
                                 static_cast<uint8_t>(op), at));
    }
    emit_from(at);
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
  std::vector<Entry> stack_;
  std::vector<Mark> marks_;
  std::vector<Entry> memo_;
  std::vector<int> depths_;  ///< nesting depth of each object, by Entry::object
};

}  // namespace

std::string rewrite_ordered_dicts(std::string_view pickle) {
  return Rewriter(pickle).run();
}

}  // namespace detail
}  // namespace mha
