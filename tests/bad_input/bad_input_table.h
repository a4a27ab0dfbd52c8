#pragma once

// The bad-input tables' rows and their runner's pieces: every invalid
// construction or call raises c10::Error (of the stated kind) whose message
// names the argument and gives the expected and the actual value (Python's
// wording where Python has one), and nothing is lost: the module's parameters
// and buffers are bitwise unchanged (names, values, requires_grad, no
// gradient) and so is its mode; a failed construction leaves the global
// random generator where it was. One table per feature, each in its own file
// (module_call_rows_test.cpp, weights_file_rows_test.cpp,
// parity_cli_rows_test.cpp, transformer_rows_test.cpp); bad_input_table.cpp
// runs the module's rows.

#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "support.h"

namespace mha {
namespace test {
namespace bad_input {

using mha::MultiheadAttention;
using mha::MultiheadAttentionOptions;
using torch::Tensor;

/// Inputs every forward row starts from: L=4, S=6, N=3, E=8 (H=2), sequence-first.
struct Inputs {
  Tensor q = torch::randn({4, 3, 8});  // (L, N, E)
  Tensor k = torch::randn({6, 3, 8});  // (S, N, E)
  Tensor v = torch::randn({6, 3, 8});  // (S, N, E)
};

enum class Kind { kError, kValueError, kTypeError, kIndexError, kExitStatus2 };

struct Row {
  std::string name;
  std::vector<std::string> message;  ///< substrings: the argument, expected, actual
  Kind kind = Kind::kError;
  MultiheadAttentionOptions options{8, 2};  ///< the module built (or attempted)
  /// Called on the module built from `options`; unset: the construction is the row.
  std::function<void(MultiheadAttention&, const Inputs&)> call;
  /// Loader rows: writes the row's file into the given folder and returns its
  /// path, which `mha::load_state_dict` then loads into the module.
  std::function<std::string(const std::string& dir)> file{};
  mha::LoadOptions load_options{};
  /// `mha-parity` rows: its arguments (`{fixtures}` stands for the checkpoints' folder).
  std::vector<std::string> cli{};
};

inline Row construction(std::string name,
                        MultiheadAttentionOptions options,
                        std::vector<std::string> message) {
  return Row{std::move(name), std::move(message), Kind::kValueError, std::move(options), {}};
}

inline Row forward(std::string name,
                   std::function<void(MultiheadAttention&, const Inputs&)> call,
                   std::vector<std::string> message,
                   Kind kind = Kind::kError,
                   MultiheadAttentionOptions options = MultiheadAttentionOptions(8, 2)) {
  return Row{std::move(name), std::move(message), kind, std::move(options), std::move(call)};
}

/// The module of the checkpoints of scripts/export_test_checkpoints.py.
constexpr int64_t kFixtureEmbedDim = 16, kFixtureHeads = 4;

inline Row loader(std::string name,
                  std::function<std::string(const std::string&)> file,
                  std::vector<std::string> message,
                  mha::LoadOptions load_options = {},
                  MultiheadAttentionOptions options = MultiheadAttentionOptions(kFixtureEmbedDim,
                                                                                kFixtureHeads)) {
  Row row{std::move(name), std::move(message), Kind::kError, std::move(options), {}};
  row.file = std::move(file);
  row.load_options = std::move(load_options);
  return row;
}

inline Row parity_cli(std::string name,
                      std::vector<std::string> args,
                      std::vector<std::string> message) {
  Row row{
      std::move(name), std::move(message), Kind::kExitStatus2, MultiheadAttentionOptions(8, 2), {}};
  row.cli = std::move(args);
  return row;
}

/// Construction rows' options.
inline MultiheadAttentionOptions opts(int64_t embed_dim, int64_t num_heads) {
  return MultiheadAttentionOptions(embed_dim, num_heads);
}

/// A bool mask of `shape`, all false.
inline Tensor bools(std::vector<int64_t> shape) { return torch::zeros(shape, torch::kBool); }

/// The exception type `kind` stands for, for messages.
const char* kind_name(Kind kind);
/// Runs `call`; when it raises a c10::Error, expects it of `kind` (a plain
/// c10::Error: Python's RuntimeError, none of its subclasses) and its message
/// to contain every one of `parts`, and returns the message; nullopt when
/// nothing was raised.
std::optional<std::string> raised_message(const std::function<void()>& call,
                                          Kind kind,
                                          const std::vector<std::string>& parts);
/// gtest prints a row by its name.
void PrintTo(const Row& row, std::ostream* os);

/// The module's rows, run by one TEST_P (bad_input_table.cpp); each table's
/// file instantiates it with its rows.
struct BadInputTable : SeedingFixture, ::testing::WithParamInterface<Row> {};

/// A row's test name: its own.
inline std::string row_name(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

/// The tables of the module's rows, one per feature.
std::vector<Row> module_call_rows();   ///< construction, forward, masks, the functional form
std::vector<Row> weights_file_rows();  ///< the loaders: bad files and mismatched modules
std::vector<Row> parity_cli_rows();    ///< mha-parity's arguments

}  // namespace bad_input
}  // namespace test
}  // namespace mha
