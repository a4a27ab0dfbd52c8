// mha-parity: runs mha::MultiheadAttention on what Python's
// torch.nn.MultiheadAttention was given and compares the outputs and the time.
//
//   mha-parity BUNDLE                  a file of `scripts/export_reference.py --bundle`
//   mha-parity --weights W --inputs I --num-heads H [options]
//   mha-parity --list W                the attention blocks of a weights file
//
// Exit status: 0 parity, 1 no parity, 2 bad input (arguments or files).

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <mha/attention_blocks.h>
#include <mha/multihead_attention.h>
#include <mha/state_dict.h>
#include <reference_bundle.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare.h"
#include "dtype_names.h"
#include "list_blocks.h"
#include "tolerances.h"

namespace mha {
namespace parity_tool {
namespace {

using torch::Tensor;

constexpr int kParity = 0;
constexpr int kNoParity = 1;
constexpr int kBadInput = 2;

constexpr const char* kUsage = R"(usage:
  mha-parity BUNDLE [--rtol R] [--atol A] [--time-s S]
  mha-parity --weights FILE --inputs FILE --num-heads H [options]
  mha-parity --list FILE|DIR

Runs mha::MultiheadAttention (C++) on what Python's torch.nn.MultiheadAttention
was given and prints, per output, the shape, max abs and max rel error and the
allclose verdict, then the C++ and Python forward times.

BUNDLE: a file written by `scripts/export_reference.py --bundle FILE` (options,
weights, inputs, masks, Python's outputs and median forward time).

--list FILE: prints the attention blocks of a weights file, one row per block
(prefix, naming, embed_dim, kdim, vdim, bias, add_bias_kv, packed, dtype), to
choose --prefix, and the C++ that loads them; num_heads is not stored in a
state_dict. --list DIR, a Hugging Face model directory (config.json and
model.safetensors, its shards or pytorch_model.bin): its model_type, its
attention blocks with the options from config.json, and the C++ that loads it.

Separate files:
  --weights FILE     state_dict: torch.save (OrderedDict or dict), safetensors or
                     TorchScript, detected from the content
  --prefix P         load the weights under this prefix (e.g. encoder.layers.0.self_attn.)
  --vit              timm ViT naming (qkv, proj) via mha::KeyMap::vit()
  --inputs FILE      tensors query, key, value [, key_padding_mask, attn_mask]
                     [, output, weights (Python's outputs)]
  --expected FILE    Python's outputs (output [, weights]) if not in --inputs
  --num-heads H      required; embed_dim, kdim, vdim, bias and add_bias_kv
                     follow from the weights (--embed-dim E to check)
  --batch-first      inputs are (N, L, E)
  --need-weights     also compute and compare the attention weights
  --no-average-attn-weights   per-head weights
  --is-causal        pass is_causal=true (needs attn_mask)
  --save-output FILE write the C++ outputs as safetensors

Common:
  --rtol R, --atol A tolerances (default: the parity suite's for the output's
                     dtype: float32 1e-4/1e-5, float64 0/1e-10, float16
                     1e-3/2^-10, bfloat16 1.6e-2/2^-7)
  --time-s S         time the C++ forward for about S seconds (default 1; 0: skip)
  --threads T        intra-op threads for the C++ forward and its timing
                     (default: the bundle's, the threads Python ran on; with
                     --weights, LibTorch's default, the number of cores).
                     Bitwise equality with Python needs the same thread count
                     on both sides (reductions split differently).
  -h, --help         this text

Exit status: 0 parity, 1 no parity, 2 bad input.
)";

struct Args {
  std::string list;
  std::string bundle;
  std::string weights;
  std::string prefix;
  bool vit = false;
  std::string inputs;
  std::string expected;
  std::string save_output;
  std::optional<int64_t> num_heads;
  std::optional<int64_t> embed_dim;
  bool batch_first = false;
  bool need_weights = false;
  bool average_attn_weights = true;
  bool is_causal = false;
  std::optional<double> rtol;
  std::optional<double> atol;
  double time_s = 1.0;
  std::optional<int64_t> threads;
};

/// Thrown for a bad command line; main prints the usage and exits with 2.
struct UsageError {
  std::string message;
};

/// A tolerance or a time: a finite number >= 0.
double parse_non_negative(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value) && value >= 0) {
      return value;
    }
  } catch (const std::exception&) {
  }
  throw UsageError{fmt::format("{} expects a number >= 0, got '{}'", flag, text)};
}

int64_t parse_int(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value > 0) {
      return value;
    }
  } catch (const std::exception&) {
  }
  throw UsageError{fmt::format("{} expects a positive integer, got '{}'", flag, text)};
}

Args parse_args(int argc, char** argv) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw UsageError{fmt::format("{} needs a value", arg)};
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(kParity);
    } else if (arg == "--list") {
      args.list = value();
    } else if (arg == "--weights") {
      args.weights = value();
    } else if (arg == "--prefix") {
      args.prefix = value();
    } else if (arg == "--vit") {
      args.vit = true;
    } else if (arg == "--inputs") {
      args.inputs = value();
    } else if (arg == "--expected") {
      args.expected = value();
    } else if (arg == "--save-output") {
      args.save_output = value();
    } else if (arg == "--num-heads") {
      args.num_heads = parse_int(arg, value());
    } else if (arg == "--embed-dim") {
      args.embed_dim = parse_int(arg, value());
    } else if (arg == "--batch-first") {
      args.batch_first = true;
    } else if (arg == "--need-weights") {
      args.need_weights = true;
    } else if (arg == "--no-average-attn-weights") {
      args.average_attn_weights = false;
    } else if (arg == "--is-causal") {
      args.is_causal = true;
    } else if (arg == "--rtol") {
      args.rtol = parse_non_negative(arg, value());
    } else if (arg == "--atol") {
      args.atol = parse_non_negative(arg, value());
    } else if (arg == "--time-s") {
      args.time_s = parse_non_negative(arg, value());
    } else if (arg == "--threads") {
      args.threads = parse_int(arg, value());
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}'", arg)};
    } else {
      positional.push_back(arg);
    }
  }
  if (!args.list.empty()) {
    if (!positional.empty() || !args.weights.empty() || !args.inputs.empty()) {
      throw UsageError{"give --list FILE alone, without a bundle, --weights or --inputs"};
    }
    return args;
  }
  if (positional.size() > 1) {
    throw UsageError{fmt::format("give one bundle file, got {}: '{}'", positional.size(),
                                 fmt::join(positional, "' '"))};
  }
  if (positional.size() == 1) {
    args.bundle = positional[0];
    if (!args.weights.empty() || !args.inputs.empty()) {
      throw UsageError{"give a bundle or --weights and --inputs, not both"};
    }
  } else if (args.weights.empty() || args.inputs.empty()) {
    throw UsageError{"give a bundle file, --weights FILE and --inputs FILE, or --list FILE"};
  } else if (!args.num_heads) {
    throw UsageError{"--num-heads is required with --weights"};
  }
  return args;
}

/// Everything one run needs, from a bundle or from separate files.
struct Job {
  std::string title;
  MultiheadAttention module{nullptr};
  Tensor query, key, value, key_padding_mask, attn_mask;
  bool need_weights = false;
  bool average_attn_weights = true;
  bool is_causal = false;
  bool training = false;
  bool grad = false;
  int64_t forward_seed = 0;
  std::map<std::string, Tensor> expected;
  std::optional<double> python_median_us;
  std::optional<int64_t> python_threads;
};

Tensor optional_tensor(const std::map<std::string, Tensor>& tensors, const std::string& name) {
  const auto found = tensors.find(name);
  return found == tensors.end() ? Tensor() : found->second;
}

std::string describe(const MultiheadAttentionOptions& o, const Tensor& query) {
  return fmt::format("nn.MultiheadAttention({}, {}{}), query {}", o.embed_dim(), o.num_heads(),
                     o.batch_first() ? ", batch_first=True" : "", fmt::streamed(query.sizes()));
}

Job job_from_bundle(const Args& args) {
  const auto reference = [&] {
    try {
      return support::read_reference_case(args.bundle);
    } catch (const c10::Error& e) {
      const std::string message = e.what_without_backtrace();
      if (message.find(args.bundle) != std::string::npos) {
        throw;
      }
      // torch::pickle_load meets other files (e.g. a torch.save archive of an
      // OrderedDict) with an internal assert, whose text would only confuse.
      const bool internal = message.find("INTERNAL ASSERT") != std::string::npos;
      TORCH_CHECK(false, fmt::format("{}: not a bundle of scripts/export_reference.py --bundle{}",
                                     args.bundle, internal ? "" : ": " + message));
    }
  }();
  Job job;
  // Build the module and load its state_dict by name (strict).
  job.module = MultiheadAttention(reference.options);
  job.module->to(support::dtype_from_name(reference.dtype));
  const std::map<std::string, Tensor> weights(reference.state_dict.begin(),
                                              reference.state_dict.end());
  load_state_dict(*job.module, weights, {}, args.bundle);
  std::tie(job.query, job.key, job.value) =
      support::make_inputs(reference, /*requires_grad=*/false);
  job.key_padding_mask = optional_tensor(reference.inputs, "key_padding_mask");
  job.attn_mask = optional_tensor(reference.inputs, "attn_mask");
  job.need_weights = reference.need_weights;
  job.average_attn_weights = reference.average_attn_weights;
  job.is_causal = reference.is_causal;
  job.training = reference.training;
  job.grad = reference.grad;
  job.forward_seed = reference.forward_seed;
  job.expected = reference.expected;
  job.python_median_us = reference.python_median_us;
  job.python_threads = reference.python_threads;
  job.title = fmt::format("{} ({})", args.bundle, describe(reference.options, job.query));
  TORCH_CHECK(
      !job.expected.empty(),
      fmt::format("{}: the bundle has no expected output (Python raised an error)", args.bundle));
  return job;
}

/// The attention block the selected (prefix-stripped, renamed) weights
/// `named` hold at their top level; else an error that says where the file's are.
AttentionBlock block_under_prefix(const Args& args,
                                  const std::map<std::string, Tensor>& weights,
                                  const std::map<std::string, Tensor>& named) {
  const auto blocks = find_attention_blocks(named);
  const auto found = std::find_if(blocks.begin(), blocks.end(),
                                  [](const AttentionBlock& b) { return b.prefix.empty(); });
  TORCH_CHECK(
      found == blocks.end() || found->naming == AttentionNaming::kMultiheadAttention,
      fmt::format("{}: the attention under prefix '{}' has timm's qkv/proj names: add --vit",
                  args.weights, args.prefix));
  TORCH_CHECK(
      found != blocks.end(),
      fmt::format("{}: no attention block under prefix '{}'; the file has {} (mha-parity "
                  "--list {} shows each block)",
                  args.weights, args.prefix,
                  summarize_attention_blocks(find_attention_blocks(weights)), args.weights));
  return *found;
}

Job job_from_files(const Args& args) {
  auto weights = read_state_dict(args.weights);
  // Options from the selected, renamed weights, as Python's constructor made them.
  LoadOptions load;
  load.prefix(args.prefix);
  if (args.vit) {
    load.key_map(KeyMap::vit());
  }
  const auto block =
      block_under_prefix(args, weights, select_state_dict(weights, load, args.weights));
  TORCH_CHECK(!args.embed_dim || *args.embed_dim == block.embed_dim,
              fmt::format("--embed-dim {} but the weights have embed_dim {}", *args.embed_dim,
                          block.embed_dim));
  MultiheadAttentionOptions options = block.options(*args.num_heads);
  options.batch_first(args.batch_first);
  Job job;
  job.module = MultiheadAttention(options);
  job.module->to(block.dtype);
  load_state_dict(*job.module, weights, load, args.weights);

  const auto inputs = read_state_dict(args.inputs);
  for (const char* name : {"query", "key", "value"}) {
    TORCH_CHECK(inputs.count(name),
                fmt::format("{}: no tensor '{}' (expected query, key, value)", args.inputs, name));
  }
  job.query = inputs.at("query");
  job.key = inputs.at("key");
  job.value = inputs.at("value");
  job.key_padding_mask = optional_tensor(inputs, "key_padding_mask");
  job.attn_mask = optional_tensor(inputs, "attn_mask");
  job.need_weights = args.need_weights;
  job.average_attn_weights = args.average_attn_weights;
  job.is_causal = args.is_causal;
  const auto expected = args.expected.empty() ? inputs : read_state_dict(args.expected);
  for (const char* name : {"output", "weights"}) {
    if (expected.count(name) && (std::string(name) == "output" || args.need_weights)) {
      job.expected.emplace(name, expected.at(name));
    }
  }
  job.title = fmt::format("{} + {} ({})", args.weights, args.inputs, describe(options, job.query));
  return job;
}

/// The median time of one inference forward (eval, InferenceMode), in
/// microseconds, over about `seconds`, after a warm-up; nullopt if seconds <= 0.
std::optional<std::pair<double, int>> time_forward(Job& job, double seconds) {
  if (seconds <= 0) {
    return std::nullopt;
  }
  using Clock = std::chrono::steady_clock;
  const bool was_training = job.module->is_training();
  job.module->eval();
  torch::InferenceMode inference;
  auto run = [&] {
    job.module->forward(job.query, job.key, job.value, job.key_padding_mask, job.need_weights,
                        job.attn_mask, job.average_attn_weights, job.is_causal);
  };
  for (int i = 0; i < 3; ++i) {
    run();
  }
  std::vector<double> times;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (times.size() < 5 || (Clock::now() < deadline && times.size() < 100000)) {
    const auto start = Clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  job.module->train(was_training);
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return std::make_pair(times[times.size() / 2], static_cast<int>(times.size()));
}

/// Prints the C++ time next to Python's, with the thread count of each side;
/// a ratio only when both ran on the same number of threads.
void print_times(const std::pair<double, int>& cpp, const Job& job) {
  const int threads = torch::get_num_threads();
  auto plural = [](int64_t n) { return n == 1 ? "thread" : "threads"; };
  fmt::print("  time     C++ {:.1f} us (median of {} forwards, {} {})", cpp.first, cpp.second,
             threads, plural(threads));
  if (!job.python_median_us) {
    fmt::print(", Python: not measured\n");
    return;
  }
  const int64_t python_threads = job.python_threads.value_or(1);
  fmt::print(", Python {:.1f} us ({} {})", *job.python_median_us, python_threads,
             plural(python_threads));
  if (python_threads == threads) {
    fmt::print(": C++ takes {:.2f}x Python's time\n", cpp.first / *job.python_median_us);
  } else {
    fmt::print(": not comparable (different thread counts)\n");
  }
}

int run(const Args& args) {
  if (!args.list.empty()) {
    list_attention_blocks(args.list);
    return kParity;
  }
  Job job = args.bundle.empty() ? job_from_files(args) : job_from_bundle(args);
  if (args.threads || job.python_threads) {
    torch::set_num_threads(static_cast<int>(args.threads ? *args.threads : *job.python_threads));
  }
  job.module->train(job.training);
  Tensor output, weights;
  {
    torch::AutoGradMode grad_mode(job.grad);
    torch::manual_seed(job.forward_seed);
    std::tie(output, weights) =
        job.module->forward(job.query, job.key, job.value, job.key_padding_mask, job.need_weights,
                            job.attn_mask, job.average_attn_weights, job.is_causal);
  }
  const support::Tolerance tolerance = support::parity_tolerance(output.scalar_type());
  const double rtol = args.rtol.value_or(tolerance.rtol);
  const double atol = args.atol.value_or(tolerance.atol);

  fmt::print("mha-parity: {}\n", job.title);
  fmt::print("  threads  C++ {}, Python {} (bitwise equality needs the same count)\n",
             torch::get_num_threads(),
             job.python_threads ? std::to_string(*job.python_threads) : std::string("unknown"));
  bool parity = true;
  std::map<std::string, Tensor> actual{{"output", output}};
  if (weights.defined()) {
    actual.emplace("weights", weights);
  }
  if (job.expected.empty()) {
    fmt::print(
        "  no Python outputs to compare with (put 'output' in --inputs or use --expected)\n");
  }
  for (const auto& [name, expected] : job.expected) {
    const auto found = actual.find(name);
    if (found == actual.end()) {
      fmt::print("  {:<8} Python returned it, C++ did not: FAIL\n", name);
      parity = false;
      continue;
    }
    const auto comparison = compare(name, found->second, expected, rtol, atol);
    fmt::print("{}\n", format_comparison(comparison));
    parity = parity && comparison.allclose;
  }
  if (!args.save_output.empty()) {
    torch::nn::Module holder;
    for (const auto& [name, tensor] : actual) {
      holder.register_buffer(name, tensor.detach());
    }
    save_state_dict(holder, args.save_output);
    fmt::print("  C++ outputs written to {}\n", args.save_output);
  }

  if (const auto cpp = time_forward(job, args.time_s)) {
    print_times(*cpp, job);
  }
  if (job.expected.empty()) {
    fmt::print("parity: not checked\n");
    return kParity;
  }
  fmt::print("parity: {}\n", parity ? "PASS" : "FAIL");
  return parity ? kParity : kNoParity;
}

}  // namespace
}  // namespace parity_tool
}  // namespace mha

int main(int argc, char** argv) {
  using namespace mha::parity_tool;
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "mha-parity: {}\n\n{}", e.message, kUsage);
    return kBadInput;
  }
  try {
    return run(args);
  } catch (const c10::Error& e) {
    fmt::print(stderr, "mha-parity: bad input: {}\n", e.what_without_backtrace());
    return kBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mha-parity: bad input: {}\n", e.what());
    return kBadInput;
  }
}
