#pragma once

// The int8 recipes (`mha::quantize_dynamic`'s `QuantizeOptions::recipe`),
// apart from the conversion so that the int8 GEMMs below it can name them.

namespace mha {

/// How weights and activations are quantized. Both weights are symmetric
/// qint8 (zero point 0); activations are quint8, quantized per call from their
/// min and max, as FBGEMM's `quantized::linear_dynamic` does.
enum class QuantizeRecipe {
  /// Weights per output channel, scale = max|w_row| / 127 (double; at least
  /// float32's epsilon for a row of zeros), activations over the full
  /// 0..255 range (`reduce_range=false`). mha's default.
  kPerChannel,
  /// `torch.ao.quantization.quantize_dynamic`'s default (`default_dynamic_qconfig`):
  /// one scale per weight, max|w| / 127.5 in float32 (`MinMaxObserver`,
  /// `per_tensor_symmetric`), activations over 0..127 (`reduce_range=true`).
  kTorchAoDefault,
};

}  // namespace mha
