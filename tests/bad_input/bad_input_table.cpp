// The runner of the module's bad-input rows (bad_input/bad_input_table.h):
// each row's call, its error's kind and message, and the module (or the
// global generator) unchanged after it; and the tables' sizes.

#include "bad_input/bad_input_table.h"

#include <ATen/CPUGeneratorImpl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include "module_state.h"
#include "weights_files.h"

namespace mha {
namespace test {
namespace bad_input {

namespace {

/// Whether `e` is of `kind` (a plain c10::Error: Python's RuntimeError).
bool of_kind(const c10::Error& e, Kind kind) {
  switch (kind) {
    case Kind::kValueError:
      return dynamic_cast<const c10::ValueError*>(&e) != nullptr;
    case Kind::kTypeError:
      return dynamic_cast<const c10::TypeError*>(&e) != nullptr;
    case Kind::kIndexError:
      return dynamic_cast<const c10::IndexError*>(&e) != nullptr;
    default:  // a plain c10::Error: Python's RuntimeError
      return dynamic_cast<const c10::ValueError*>(&e) == nullptr &&
             dynamic_cast<const c10::TypeError*>(&e) == nullptr &&
             dynamic_cast<const c10::IndexError*>(&e) == nullptr;
  }
}

/// Expects `message` to contain every one of `parts`.
void expect_contains_all(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "error message:\n  " << message << "\ndoes not contain:\n  " << part;
  }
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kValueError:
      return "c10::ValueError";
    case Kind::kTypeError:
      return "c10::TypeError";
    case Kind::kIndexError:
      return "c10::IndexError";
    case Kind::kExitStatus2:
      return "exit status 2";
    default:
      return "c10::Error";
  }
}

/// gtest prints a row by its name.
void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

namespace {

/// Runs mha-parity with `args` ("{fixtures}" replaced); returns its exit status
/// and what it wrote to stderr.
std::pair<int, std::string> run_parity_cli(std::vector<std::string> args) {
  std::string command = "'" MHA_PARITY_CLI "'";
  for (auto& arg : args) {
    const auto at = arg.find("{fixtures}");
    if (at != std::string::npos) arg.replace(at, 10, MHA_STATE_DICT_FIXTURES);
    command += " '" + arg + "'";
  }
  command += " 2>&1 >/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  std::string err;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) err.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

}  // namespace

std::optional<std::string> raised_message(const std::function<void()>& call,
                                          Kind kind,
                                          const std::vector<std::string>& parts) {
  try {
    call();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_TRUE(of_kind(e, kind)) << "expected a " << kind_name(kind) << ", got: " << message;
    expect_contains_all(message, parts);
    return message;
  }
  return std::nullopt;
}

TEST_P(BadInputTable, RaisesNamingTheArgumentAndChangesNothing) {
  const Row& row = GetParam();
  if (!row.cli.empty() || row.kind == Kind::kExitStatus2) {
    const auto [status, err] = run_parity_cli(row.cli);
    EXPECT_EQ(status, 2) << "mha-parity's stderr:\n" << err;
    expect_contains_all(err, row.message);
    return;
  }
  MultiheadAttention m{nullptr};
  if (row.call || row.file) m = MultiheadAttention(row.options);
  const Inputs inputs;
  const auto state_before = m ? mha::support::snapshot(*m) : mha::support::ModuleState{};
  const bool training_before = m && m->is_training();
  const Tensor rng_before = at::detail::getDefaultCPUGenerator().get_state();  // after the inputs

  const std::string file =
      row.file ? row.file(mha::test::scratch_dir("bad_input_table/" + row.name)) : "";
  const std::optional<std::string> message = raised_message(
      [&] {
        if (row.file) {
          mha::load_state_dict(m, file, row.load_options);  // the holder overload
        } else if (row.call) {
          row.call(m, inputs);
        } else {
          MultiheadAttention attempt(row.options);
        }
      },
      row.kind, row.message);
  ASSERT_TRUE(message) << "expected a " << kind_name(row.kind) << " containing: " << row.message[0];
  if (row.file) {
    EXPECT_EQ(message->rfind(file + ": ", 0), 0u)
        << "the message does not start with the file:\n  " << *message;
  }

  if (!m) {
    // Forward rows draw their own arguments; a construction row draws nothing.
    EXPECT_TRUE(
        mha::test::bitwise_equal(at::detail::getDefaultCPUGenerator().get_state(), rng_before))
        << "a failed construction moved the global generator";
    return;
  }
  EXPECT_EQ(m->is_training(), training_before);
  const auto state_after = mha::support::snapshot(*m);
  ASSERT_EQ(state_after.size(), state_before.size());
  const auto params = m->named_parameters();
  for (size_t i = 0; i < state_after.size(); ++i) {
    const auto& [name, before] = state_before[i];
    EXPECT_EQ(state_after[i].first, name);
    // A row may change the module's dtype first (QueryFloatOnDoubleModule): compare values.
    EXPECT_TRUE(mha::test::bitwise_equal(state_after[i].second.to(before.scalar_type()), before))
        << name << " changed";
    if (params.contains(name)) {
      EXPECT_TRUE(params[name].requires_grad()) << name;
      EXPECT_FALSE(params[name].grad().defined()) << name << " got a gradient";
    }
  }
}

TEST(BadInputTableSize, HasAtLeastFiftyRowsAcrossEveryKind) {
  std::vector<Row> all;
  for (auto table : {module_call_rows, weights_file_rows, parity_cli_rows}) {
    for (auto& row : table()) all.push_back(std::move(row));
  }
  EXPECT_GE(all.size(), 50u);
  const auto count = [&](auto&& pred) { return std::count_if(all.begin(), all.end(), pred); };
  EXPECT_GE(count([](const Row& r) {
              return !r.call && !r.file && r.cli.empty() && r.kind != Kind::kExitStatus2;
            }),
            10);  // construction
  EXPECT_GE(count([](const Row& r) { return static_cast<bool>(r.call); }),
            40);  // forward, masks, functional
  EXPECT_GE(count([](const Row& r) { return static_cast<bool>(r.file); }), 40);     // loaders
  EXPECT_GE(count([](const Row& r) { return r.kind == Kind::kExitStatus2; }), 15);  // mha-parity
}

}  // namespace bad_input
}  // namespace test
}  // namespace mha
