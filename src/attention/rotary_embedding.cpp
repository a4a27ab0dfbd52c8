// mha::RotaryEmbedding and rope_frequencies: transformers 5.23's
// modeling_rope_utils.py (each rope type's init function, `dynamic_rope_update`)
// and models/llama/modeling_llama.py (`compute_default_rope_parameters`,
// `LlamaRotaryEmbedding.forward`, `rotate_half`, `apply_rotary_pos_emb`), op
// for op in float32 as there, so that the frequencies are transformers' bits.
// Python's `1.0 / t` is `t.reciprocal() * 1.0`, hence `reciprocal()` below.

#include <c10/util/Exception.h>
#include <mha/rotary_embedding.h>

#include <algorithm>
#include <cmath>

namespace mha {

using torch::Tensor;

namespace {

constexpr double kPi = 3.14159265358979323846;

/// A parameter the rope type needs: its value, or a `c10::Error` naming it.
template <typename T>
T required(const std::optional<T>& value, const RopeParameters& rope, const char* name) {
  TORCH_CHECK_VALUE(value.has_value(), "RotaryEmbedding: rope_type '", rope.rope_type(),
                    "' needs rope_parameters['", name, "'], which is missing");
  return *value;
}

/// `torch.arange(0, dim, 2, dtype=torch.int64).float() / dim`: (dim / 2) float32.
Tensor exponents(int64_t dim) {
  return torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat32) / dim;
}

/// `1.0 / (base ** exponents(dim))`: the unscaled inverse frequencies.
Tensor inverse_frequencies(const c10::Scalar& base, int64_t dim) {
  return torch::pow(base, exponents(dim)).reciprocal();
}

/// yarn's `get_mscale`.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

/// yarn's `find_correction_dim`.
double correction_dim(double rotations, int64_t dim, double base, double length) {
  return (static_cast<double>(dim) * std::log(length / (rotations * 2 * kPi))) /
         (2 * std::log(base));
}

/// `_compute_yarn_parameters`.
std::pair<Tensor, double> yarn(const RopeParameters& rope, int64_t dim, int64_t max_positions) {
  const auto original = static_cast<double>(
      required(rope.original_max_position_embeddings(), rope, "original_max_position_embeddings"));
  const double factor = rope.factor().value_or(static_cast<double>(max_positions) / original);
  double attention = 0.0;
  if (rope.attention_factor()) {
    attention = *rope.attention_factor();
  } else if (rope.mscale().value_or(0) != 0 && rope.mscale_all_dim().value_or(0) != 0) {
    attention = yarn_mscale(factor, *rope.mscale()) / yarn_mscale(factor, *rope.mscale_all_dim());
  } else {
    attention = yarn_mscale(factor, 1.0);
  }
  const double theta = rope.rope_theta();
  double low = correction_dim(rope.beta_fast().value_or(32), dim, theta, original);
  double high = correction_dim(rope.beta_slow().value_or(1), dim, theta, original);
  if (rope.truncate()) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;                              // linear_ramp_factor's guard
  const Tensor positions = torch::pow(theta, exponents(dim));  // (dim / 2)
  const Tensor extrapolation = positions.reciprocal();
  const Tensor interpolation = (factor * positions).reciprocal();
  const Tensor ramp = ((torch::arange(dim / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);
  const Tensor extrapolation_factor = 1 - ramp;
  return {interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor,
          attention};
}

/// `_compute_longrope_parameters`: the long factors past the pretraining length.
std::pair<Tensor, double> longrope(const RopeParameters& rope,
                                   int64_t dim,
                                   int64_t max_positions,
                                   std::optional<int64_t> seq_len) {
  const int64_t original =
      required(rope.original_max_position_embeddings(), rope, "original_max_position_embeddings");
  const double factor =
      rope.factor().value_or(static_cast<double>(max_positions) / static_cast<double>(original));
  const double attention = rope.attention_factor().value_or(
      factor <= 1.0 ? 1.0
                    : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(original))));
  const std::vector<double>& factors =
      seq_len && *seq_len > original ? rope.long_factor() : rope.short_factor();
  TORCH_CHECK_VALUE(static_cast<int64_t>(factors.size()) == dim / 2, "RotaryEmbedding: longrope's ",
                    seq_len && *seq_len > original ? "long_factor" : "short_factor", ": expected ",
                    dim / 2, " factors (rotary dim / 2), but got ", factors.size());
  const Tensor scale = torch::tensor(factors, torch::kFloat64).to(torch::kFloat32);  // (dim / 2)
  return {(scale * torch::pow(rope.rope_theta(), exponents(dim))).reciprocal(), attention};
}

/// `_compute_llama3_parameters`.
Tensor llama3(const RopeParameters& rope, int64_t dim) {
  const double factor = required(rope.factor(), rope, "factor");
  const double low = required(rope.low_freq_factor(), rope, "low_freq_factor");
  const double high = required(rope.high_freq_factor(), rope, "high_freq_factor");
  const auto original = static_cast<double>(
      required(rope.original_max_position_embeddings(), rope, "original_max_position_embeddings"));
  const Tensor inv_freq = inverse_frequencies(rope.rope_theta(), dim);  // (dim / 2)
  const double low_wavelength = original / low, high_wavelength = original / high;
  const Tensor wavelength = inv_freq.reciprocal() * (2 * kPi);
  const Tensor scaled = torch::where(wavelength > low_wavelength, inv_freq / factor, inv_freq);
  const Tensor smooth = (wavelength.reciprocal() * original - low) / (high - low);
  const Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  const Tensor medium =
      (wavelength < high_wavelength).logical_not() & (wavelength > low_wavelength).logical_not();
  return torch::where(medium, smoothed, scaled);
}

/// dynamic's frequencies when the positions reach `seq_len` (a tensor in
/// transformers' update: float32 steps where the load's are double).
Tensor dynamic_update(const RopeParameters& rope,
                      int64_t dim,
                      int64_t max_positions,
                      int64_t seq_len) {
  const double factor = required(rope.factor(), rope, "factor");
  const Tensor length = torch::tensor(std::max(seq_len, max_positions), torch::kLong);  // ()
  const Tensor scale =
      torch::pow(factor * length / max_positions - (factor - 1),
                 static_cast<double>(dim) / static_cast<double>(dim - 2));  // () float32
  return torch::pow(rope.rope_theta() * scale, exponents(dim)).reciprocal();
}

}  // namespace

std::pair<Tensor, double> rope_frequencies(const RopeParameters& rope,
                                           int64_t head_dim,
                                           int64_t max_position_embeddings,
                                           std::optional<int64_t> seq_len) {
  const auto dim =
      static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor());
  TORCH_CHECK_VALUE(dim >= 2 && dim % 2 == 0 && dim <= head_dim,
                    "RotaryEmbedding: expected an even rotary dim in [2, head_dim ", head_dim,
                    "] (head_dim x partial_rotary_factor ", rope.partial_rotary_factor(),
                    "), but got ", dim);
  const std::string& type = rope.rope_type();
  const double theta = rope.rope_theta();
  if (type == "default") return {inverse_frequencies(theta, dim), 1.0};
  if (type == "linear") {
    return {inverse_frequencies(theta, dim) / required(rope.factor(), rope, "factor"), 1.0};
  }
  if (type == "dynamic") {
    if (seq_len) return {dynamic_update(rope, dim, max_position_embeddings, *seq_len), 1.0};
    // At load: seq_len = max_position_embeddings, in double.
    const double factor = required(rope.factor(), rope, "factor");
    const auto length = static_cast<double>(max_position_embeddings);
    const double base = theta * std::pow(factor * length / length - (factor - 1),
                                         static_cast<double>(dim) / static_cast<double>(dim - 2));
    return {inverse_frequencies(base, dim), 1.0};
  }
  if (type == "yarn") return yarn(rope, dim, max_position_embeddings);
  if (type == "longrope") return longrope(rope, dim, max_position_embeddings, seq_len);
  TORCH_CHECK_VALUE(type == "llama3", "RotaryEmbedding: rope_type '", type,
                    "' is not supported; supported: default, linear, dynamic, yarn, longrope, "
                    "llama3");
  return {llama3(rope, dim), 1.0};
}

void RotaryEmbeddingImpl::reset() {
  auto [frequencies, scaling] =
      rope_frequencies(options.rope(), options.head_dim(), options.max_position_embeddings());
  inv_freq = register_buffer("inv_freq", frequencies);
  attention_scaling = scaling;
  original_inv_freq_ = frequencies.clone();
  long_inv_freq_ = Tensor();
  max_seq_len_cached_ = options.max_position_embeddings();
}

void RotaryEmbeddingImpl::update_frequencies(int64_t seq_len) {
  const RopeParameters& rope = options.rope();
  const int64_t max_positions = options.max_position_embeddings();
  if (rope.rope_type() == "longrope") {
    const int64_t original = rope.original_max_position_embeddings().value_or(max_positions);
    if (!long_inv_freq_.defined()) {
      long_inv_freq_ =
          rope_frequencies(rope, options.head_dim(), max_positions, original + 1).first;
    }
    inv_freq.copy_(seq_len > original ? long_inv_freq_ : original_inv_freq_);
    return;
  }
  if (seq_len > max_seq_len_cached_) {  // growth
    inv_freq.copy_(rope_frequencies(rope, options.head_dim(), max_positions, seq_len).first);
    max_seq_len_cached_ = seq_len;
  }
  if (seq_len < max_positions && max_seq_len_cached_ > max_positions) {  // back to the loaded ones
    inv_freq.copy_(original_inv_freq_);
    max_seq_len_cached_ = max_positions;
  }
}

std::pair<Tensor, Tensor> RotaryEmbeddingImpl::forward(const Tensor& position_ids) {
  TORCH_CHECK_VALUE(position_ids.dim() == 2 && position_ids.scalar_type() == torch::kLong,
                    "RotaryEmbedding: expected position_ids of shape (batch, length) and dtype "
                    "int64, but got ",
                    position_ids.sizes(), " ", position_ids.scalar_type());
  const std::string& type = options.rope().rope_type();
  if ((type == "dynamic" || type == "longrope") && position_ids.numel() > 0) {
    torch::NoGradGuard no_grad;
    update_frequencies(position_ids.max().item<int64_t>() + 1);
  }
  const Tensor frequencies =
      position_ids.unsqueeze(-1).to(torch::kFloat32) * inv_freq.to(torch::kFloat32);  // (N, L, d/2)
  const Tensor angles = torch::cat({frequencies, frequencies}, -1);                   // (N, L, d)
  return {angles.cos() * attention_scaling, angles.sin() * attention_scaling};
}

void RotaryEmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "mha::RotaryEmbedding(rope_type=" << options.rope().rope_type()
         << ", head_dim=" << options.head_dim() << ")";
}

Tensor apply_rotary_pos_emb(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  TORCH_CHECK_VALUE(x.dim() == 4 && cos.dim() == 3 && cos.sizes() == sin.sizes() &&
                        cos.size(-1) <= x.size(-1) && cos.size(-1) % 2 == 0,
                    "apply_rotary_pos_emb: expected x (N, H, L, D) and cos, sin (N, L, d) with "
                    "an even d <= D, but got x ",
                    x.sizes(), ", cos ", cos.sizes(), ", sin ", sin.sizes());
  const int64_t d = cos.size(-1);
  const Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);  // (N, 1, L, d)
  const Tensor rotated = x.narrow(-1, 0, d);                // (N, H, L, d)
  const Tensor half = torch::cat({-rotated.narrow(-1, d / 2, d / 2), rotated.narrow(-1, 0, d / 2)},
                                 -1);  // rotate_half
  const Tensor out = rotated * c + half * s;
  return d == x.size(-1) ? out : torch::cat({out, x.narrow(-1, d, x.size(-1) - d)}, -1);
}

}  // namespace mha
