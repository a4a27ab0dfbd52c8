#include "state_dict/pickle_reader.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "state_dict/errors.h"
#include "state_dict/pickle_globals.h"

namespace mha {
namespace detail {

void pickle_corrupt(std::string_view what) {
  TORCH_CHECK(false, fmt::format("corrupt pickle: {}", what));
}

void pickle_unsupported(std::string_view what) {
  TORCH_CHECK(false, fmt::format("unsupported: {}", what));
}

void ValueArena::copy_items(Value& to, const std::vector<Value*>& from) {
  if (from.size() > copy_budget_) {
    pickle_unsupported("containers copied so often that their items exceed the pickle's size");
  }
  copy_budget_ -= from.size();
  to.items = from;
}

namespace {

/// Decimal text of a little-endian two's-complement integer (LONG1's bytes).
std::string decimal_of_le_bytes(std::string_view bytes) {
  const bool negative = !bytes.empty() && (static_cast<uint8_t>(bytes.back()) & 0x80) != 0;
  std::vector<uint8_t> magnitude(bytes.rbegin(), bytes.rend());  // big-endian
  if (negative) {  // two's complement: invert and add one
    int carry = 1;
    for (auto it = magnitude.rbegin(); it != magnitude.rend(); ++it) {
      const int sum = static_cast<uint8_t>(~*it) + carry;
      *it = static_cast<uint8_t>(sum);
      carry = sum >> 8;
    }
  }
  std::string digits;
  bool nonzero = true;
  while (nonzero) {  // repeated division by 10
    int remainder = 0;
    nonzero = false;
    for (auto& byte : magnitude) {
      const int current = remainder * 256 + byte;
      byte = static_cast<uint8_t>(current / 10);
      remainder = current % 10;
      nonzero = nonzero || byte != 0;
    }
    digits.insert(digits.begin(), static_cast<char>('0' + remainder));
  }
  return negative ? "-" + digits : digits;
}

/// Every opcode of pickle protocols 0 to 5 (Python's Lib/pickletools.py).
constexpr std::string_view kPickleOpcodes =
    "(.012FIJKLMNPQRSTUVXabcdeghijlopqrstu}])GBC"
    "\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f"
    "\x90\x91\x92\x93\x94\x95\x96\x97\x98";

[[noreturn]] void unknown_opcode(uint8_t op) {
  if (kPickleOpcodes.find(static_cast<char>(op)) != std::string_view::npos) {
    pickle_unsupported(fmt::format(
        "pickle opcode 0x{:02x} ('{}'), which torch.load(weights_only=True) does not read either",
        op, op < 0x80 ? std::string(1, static_cast<char>(op)) : "protocol 2+"));
  }
  pickle_corrupt(fmt::format("byte 0x{:02x} is not a pickle opcode", op));
}

class Parser {
 public:
  Parser(std::string_view in,
         const StorageLoader& load_storage,
         ValueArena& arena,
         PickleDialect dialect)
      : in_(in), load_storage_(load_storage), arena_(arena), dialect_(dialect) {}

  Value* run() {
    try {
      for (;;) {
        op_offset_ = pos_;
        if (Value* result = step(read_byte())) {
          return result;
        }
      }
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, fmt::format("offset {}: {}", op_offset_, e.what_without_backtrace()));
    }
  }

 private:
  /// One opcode's work (pickletools' names); a table of 256, null where
  /// the opcode is not read.
  using OpHandler = void (*)(Parser&);
  using OpTable = std::array<OpHandler, 256>;
  static const OpTable& op_table();

  /// Executes one opcode; returns the result at STOP, else nullptr.
  Value* step(uint8_t op);

  // Reading the input.
  uint8_t read_byte() { return static_cast<uint8_t>(read_bytes(1)[0]); }
  uint16_t read_u16() {
    const auto bytes = read_bytes(2);
    return static_cast<uint16_t>(static_cast<uint8_t>(bytes[0]) |
                                 (static_cast<uint8_t>(bytes[1]) << 8));
  }
  uint32_t read_u32() {
    const auto bytes = read_bytes(4);
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) {  // little-endian
      v = (v << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    }
    return v;
  }
  std::string_view read_bytes(size_t n) {
    if (n > in_.size() - pos_) {
      pickle_corrupt(fmt::format("truncated: {} bytes needed, {} left", n, in_.size() - pos_));
    }
    const auto out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view read_line() {
    const auto end = in_.find('\n', pos_);
    if (end == std::string_view::npos) {
      pickle_corrupt("truncated: GLOBAL without its newline");
    }
    const auto out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  // The stack: values above the innermost MARK are those an opcode may take.
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value* value) { stack_.push_back(value); }
  Value* make(ValueKind kind) { return arena_.make(kind); }
  Value* pop() {
    Value* out = top();
    stack_.pop_back();
    return out;
  }
  Value* top() {
    if (stack_.size() <= base()) {
      pickle_corrupt("stack underflow");
    }
    return stack_.back();
  }
  std::vector<Value*> pop_mark() {
    if (marks_.empty()) {
      pickle_corrupt("no MARK to pop to");
    }
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()),
                              stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value* top_of_kind(ValueKind kind, const char* op) {
    Value* target = top();
    if (target->kind != kind) {
      pickle_corrupt(fmt::format("{} on a value of the wrong type", op));
    }
    return target;
  }

  // Opcode handlers.
  void push_int(int64_t value) {
    Value* v = make(ValueKind::kInt);
    v->integer = value;
    push(v);
  }
  void push_text(ValueKind kind, std::string_view text) {
    Value* v = make(kind);
    v->text = std::string(text);
    push(v);
  }
  void push_bool(bool value) {
    Value* v = make(ValueKind::kBool);
    v->integer = value ? 1 : 0;
    push(v);
  }
  void long1();
  void tuple_of_mark();
  void append();
  void appends();
  void setitem();
  void reduce();
  void newobj();
  void build();
  void binfloat();
  void global();
  void tuple_of_top(size_t n);
  void setitems(std::vector<Value*> items);
  void memo_get(uint32_t index);
  void memo_put(uint32_t index) { memo_[index] = top(); }
  void persistent_load();
  Value* storage(const Value& pid);

  std::string_view in_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  const StorageLoader& load_storage_;
  ValueArena& arena_;
  PickleDialect dialect_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, Value*> memo_;
  std::unordered_map<std::string, Value*> storages_;  ///< persistent_load by key
};

const Parser::OpTable& Parser::op_table() {
  static const OpTable table = [] {
    const std::pair<uint8_t, OpHandler> handlers[] = {
        {0x80, [](Parser& p) { p.read_byte(); }},                                  // PROTO
        {'(', [](Parser& p) { p.marks_.push_back(p.stack_.size()); }},             // MARK
        {'N', [](Parser& p) { p.push(p.make(ValueKind::kNone)); }},                // NONE
        {0x88, [](Parser& p) { p.push_bool(true); }},                              // NEWTRUE
        {0x89, [](Parser& p) { p.push_bool(false); }},                             // NEWFALSE
        {')', [](Parser& p) { p.push(p.make(ValueKind::kTuple)); }},               // EMPTY_TUPLE
        {']', [](Parser& p) { p.push(p.make(ValueKind::kList)); }},                // EMPTY_LIST
        {'}', [](Parser& p) { p.push(p.make(ValueKind::kDict)); }},                // EMPTY_DICT
        {0x8f, [](Parser& p) { p.push(p.make(ValueKind::kSet)); }},                // EMPTY_SET
        {'J', [](Parser& p) { p.push_int(static_cast<int32_t>(p.read_u32())); }},  // BININT
        {'K', [](Parser& p) { p.push_int(p.read_byte()); }},                       // BININT1
        {'M', [](Parser& p) { p.push_int(p.read_u16()); }},                        // BININT2
        {0x8a, [](Parser& p) { p.long1(); }},                                      // LONG1
        {'G', [](Parser& p) { p.binfloat(); }},                                    // BINFLOAT
        {'X',
         [](Parser& p) {
           p.push_text(ValueKind::kStr, p.read_bytes(p.read_u32()));
         }},  // BINUNICODE
        {'U',
         [](Parser& p) {
           p.push_text(ValueKind::kStr, p.read_bytes(p.read_byte()));
         }},  // SHORT_BINSTRING, decoded as torch.load does (UTF-8)
        {'h', [](Parser& p) { p.memo_get(p.read_byte()); }},  // BINGET
        {'j', [](Parser& p) { p.memo_get(p.read_u32()); }},   // LONG_BINGET
        {'q', [](Parser& p) { p.memo_put(p.read_byte()); }},  // BINPUT
        {'r', [](Parser& p) { p.memo_put(p.read_u32()); }},   // LONG_BINPUT
        {'c', [](Parser& p) { p.global(); }},                 // GLOBAL
        {'t', [](Parser& p) { p.tuple_of_mark(); }},          // TUPLE
        {0x85, [](Parser& p) { p.tuple_of_top(1); }},         // TUPLE1
        {0x86, [](Parser& p) { p.tuple_of_top(2); }},         // TUPLE2
        {0x87, [](Parser& p) { p.tuple_of_top(3); }},         // TUPLE3
        {'a', [](Parser& p) { p.append(); }},                 // APPEND
        {'e', [](Parser& p) { p.appends(); }},                // APPENDS
        {'s', [](Parser& p) { p.setitem(); }},                // SETITEM
        {'u', [](Parser& p) { p.setitems(p.pop_mark()); }},   // SETITEMS
        {'Q', [](Parser& p) { p.persistent_load(); }},        // BINPERSID
        {'R', [](Parser& p) { p.reduce(); }},                 // REDUCE
        {0x81, [](Parser& p) { p.newobj(); }},                // NEWOBJ
        {'b', [](Parser& p) { p.build(); }},                  // BUILD
    };
    OpTable t{};
    for (const auto& [op, handler] : handlers) {
      t[op] = handler;
    }
    return t;
  }();
  return table;
}

Value* Parser::step(uint8_t op) {
  if (op == '.') {
    return pop();  // STOP
  }
  const OpHandler handler = op_table()[op];
  if (handler == nullptr) {
    unknown_opcode(op);
  }
  handler(*this);
  return nullptr;
}

void Parser::tuple_of_mark() {
  Value* tuple = make(ValueKind::kTuple);
  tuple->items = pop_mark();
  push(tuple);
}

void Parser::append() {
  Value* item = pop();
  top_of_kind(ValueKind::kList, "APPEND")->items.push_back(item);
}

void Parser::appends() {
  const auto items = pop_mark();
  auto& list = top_of_kind(ValueKind::kList, "APPENDS")->items;
  list.insert(list.end(), items.begin(), items.end());
}

void Parser::setitem() {
  Value* value = pop();
  Value* key = pop();
  setitems({key, value});
}

void Parser::reduce() {
  Value* args = pop();
  Value* func = top();
  stack_.back() = apply_reduce(*func, *args, arena_);
}

void Parser::newobj() {
  Value* args = pop();
  Value* cls = pop();
  push(apply_newobj(*cls, *args, arena_));
}

void Parser::build() {
  Value* state = pop();
  apply_build(*top(), *state);
}

void Parser::long1() {
  const auto bytes = read_bytes(read_byte());
  if (bytes.size() <= 8) {
    uint64_t bits = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      bits |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    }
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80) != 0) {
      bits |= ~uint64_t{0} << (8 * bytes.size());  // sign extension
    }
    push_int(static_cast<int64_t>(bits));
    return;
  }
  push_text(ValueKind::kBigInt, decimal_of_le_bytes(bytes));
}

void Parser::binfloat() {
  const auto bytes = read_bytes(8);
  uint64_t bits = 0;
  for (const char byte : bytes) {  // big-endian
    bits = (bits << 8) | static_cast<uint8_t>(byte);
  }
  Value* v = make(ValueKind::kFloat);
  std::memcpy(&v->real, &bits, 8);
  push(v);
}

void Parser::global() {
  std::string module(read_line());
  const std::string name(read_line());
  if (module == "__builtin__") {
    module = "builtins";  // Python 2's name (torch._utils.IMPORT_MAPPING)
  }
  const std::string full_name = module + "." + name;
  Value* value = resolve_global(full_name, arena_);
  if (value == nullptr && dialect_ == PickleDialect::kTorchScriptScan) {
    value = make(ValueKind::kGlobal);
    value->text = full_name;
    value->role = GlobalRole::kScriptClass;
  } else if (value == nullptr) {
    reject_global(full_name, in_);
  }
  push(value);
}

void Parser::tuple_of_top(size_t n) {
  if (stack_.size() < base() + n) {
    pickle_corrupt("stack underflow");
  }
  Value* tuple = make(ValueKind::kTuple);
  tuple->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
  stack_.resize(stack_.size() - n);
  push(tuple);
}

void Parser::setitems(std::vector<Value*> items) {
  auto& dict = top_of_kind(ValueKind::kDict, "SETITEM(S)")->items;
  if (items.size() % 2 != 0) {
    pickle_corrupt(
        fmt::format("SETITEMS with an odd number ({}) of keys and values", items.size()));
  }
  dict.insert(dict.end(), items.begin(), items.end());
}

void Parser::memo_get(uint32_t index) {
  const auto found = memo_.find(index);
  if (found == memo_.end()) {
    pickle_corrupt(fmt::format("memo entry {} was never stored", index));
  }
  push(found->second);
}

void Parser::persistent_load() {
  const Value* pid = pop();
  if (pid->kind != ValueKind::kTuple || pid->items.size() != 5 ||
      pid->items[0]->kind != ValueKind::kStr || pid->items[0]->text != "storage") {
    pickle_unsupported("a persistent id that is not ('storage', type, key, location, numel)");
  }
  push(storage(*pid));
}

Value* Parser::storage(const Value& pid) {
  const Value& type = *pid.items[1];
  const Value& key = *pid.items[2];
  const Value& numel = *pid.items[4];
  if (type.kind != ValueKind::kGlobal || type.role != GlobalRole::kStorageType ||
      key.kind != ValueKind::kStr || pid.items[3]->kind != ValueKind::kStr ||
      numel.kind != ValueKind::kInt || numel.integer < 0) {
    pickle_corrupt("a storage id whose type, key, location or size has the wrong type");
  }
  if (type.dtype == c10::ScalarType::Undefined) {
    pickle_unsupported(fmt::format("a storage of type {}", type.text));
  }
  auto [found, inserted] = storages_.emplace(key.text, nullptr);
  // As Python: the first load of a key decides its dtype; LibTorch's unpickler
  // (the TorchScript scan) reads each id's record again.
  if (inserted || dialect_ == PickleDialect::kTorchScriptScan) {
    Value* out = make(ValueKind::kStorage);
    out->dtype = type.dtype;
    out->storage = load_storage_(key.text, type.dtype, numel.integer);
    found->second = out;
  }
  return found->second;
}

}  // namespace

Value* read_weights_pickle(std::string_view pickle,
                           const StorageLoader& load_storage,
                           ValueArena& arena,
                           PickleDialect dialect) {
  return Parser(pickle, load_storage, arena, dialect).run();
}

}  // namespace detail
}  // namespace mha
