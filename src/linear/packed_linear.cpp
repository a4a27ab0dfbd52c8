#include "linear/packed_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <c10/util/intrusive_ptr.h>

#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mha/kernel_switches.h"

namespace mha {
namespace detail {

using torch::Tensor;

namespace {

using WeakStorage = c10::weak_intrusive_ptr<c10::StorageImpl>;

/// What a packed weight was packed from: the elements of one storage, as
/// viewed (a weight's q, k and v rows are views of one storage: each its own
/// entry), at one version of the storage's tensors.
struct PackedWeight {
  WeakStorage storage;  // keeps the StorageImpl's address from being reused
  int64_t offset;
  std::vector<int64_t> sizes, strides;
  int64_t version;
  Tensor packed;

  /// Whether `weight` is the view this entry was packed from, at any version.
  bool views(const Tensor& weight) const {
    return storage._unsafe_get_target() == weight.storage().unsafeGetStorageImpl() &&
           offset == weight.storage_offset() && weight.sizes().equals(sizes) &&
           weight.strides().equals(strides);
  }
};

/// The packed weights of the process, found by their storage and view.
class PackedWeights {
 public:
  Tensor get(const PackedLinearOps& ops, const Tensor& weight) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const PackedWeight& entry : entries_) {
      if (entry.views(weight) && entry.version == weight._version()) return entry.packed;
    }
    drop_stale(weight);
    entries_.push_back(PackedWeight{weight.storage().getWeakStorageImpl(), weight.storage_offset(),
                                    weight.sizes().vec(), weight.strides().vec(), weight._version(),
                                    ops.pack(weight.contiguous())});
    return entries_.back().packed;
  }

  int64_t count() {
    const std::lock_guard<std::mutex> lock(mutex_);
    drop_stale(Tensor());
    return static_cast<int64_t>(entries_.size());
  }

 private:
  /// Drops entries whose storage is gone, and `weight`'s own at an older
  /// version (an in-place edit).
  void drop_stale(const Tensor& weight) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      const bool stale = it->storage.expired() || (weight.defined() && it->views(weight));
      it = stale ? entries_.erase(it) : std::next(it);
    }
  }

  std::mutex mutex_;
  std::vector<PackedWeight> entries_;  // a few per layer: a linear scan
};

PackedWeights& packed_weights() {
  static auto* const weights = new PackedWeights();  // never destroyed: used until exit
  return *weights;
}

bool is_cpu_float(const Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided &&
         !t.is_nested();
}

bool needs_autograd(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return at::GradMode::is_enabled() &&
         (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
}

}  // namespace

PackedLinearOps::PackedLinearOps(const char* pack_op, const char* linear_op)
    : pack_(c10::Dispatcher::singleton().findSchema({pack_op, ""})),
      linear_(c10::Dispatcher::singleton().findSchema({linear_op, ""})) {}

const PackedLinearOps& PackedLinearOps::onednn() {
  static const PackedLinearOps ops("mkldnn::_reorder_linear_weight", "mkldnn::_linear_pointwise");
  return ops;
}

bool PackedLinearOps::available() const {
  return pack_.has_value() && linear_.has_value() && at::hasMKLDNN();
}

Tensor PackedLinearOps::pack(const Tensor& weight) const {
  // _reorder_linear_weight(Tensor self, int? batch_size=None) -> Tensor
  torch::jit::Stack stack{weight, c10::IValue()};
  pack_->callBoxed(stack);
  return stack.back().toTensor();
}

Tensor PackedLinearOps::multiply(const Tensor& x, const Tensor& packed, const Tensor& bias) const {
  // _linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars,
  // str? algorithm) -> Tensor; attr "none": no fused activation
  torch::jit::Stack stack{x,
                          packed,
                          bias.defined() ? c10::IValue(bias) : c10::IValue(),
                          std::string("none"),
                          c10::List<std::optional<c10::Scalar>>(),
                          c10::IValue()};
  linear_->callBoxed(stack);
  return stack.back().toTensor();
}

bool takes_packed_gemm(const PackedLinearOps& ops,
                       const Tensor& x,
                       const Tensor& weight,
                       const Tensor& bias) {
  if (python_kernels_enabled() || !ops.available() || x.dim() < 2 || x.size(-1) == 0 ||
      weight.dim() != 2 || !is_cpu_float(x) || !is_cpu_float(weight) ||
      (bias.defined() && !is_cpu_float(bias)) || weight.is_inference() ||
      needs_autograd(x, weight, bias)) {
    return false;
  }
  const int64_t rows = x.numel() / x.size(-1);
  const int64_t min_elements =
      rows < kPackedSmallWeightMinRows ? kPackedLargeWeightElements : kPackedMinWeightElements;
  return rows >= kPackedMinRows && rows <= kPackedMaxRows && weight.numel() >= min_elements;
}

namespace {

thread_local int64_t fixed_row_block = 0;  // 0: any row count

/// `packed_linear` in blocks of `block` rows: x (..., in) -> (..., out).
Tensor linear_in_row_blocks(const Tensor& x,
                            const Tensor& weight,
                            const Tensor& bias,
                            const PackedLinearOps& ops,
                            int64_t block) {
  const Tensor rows = x.reshape({-1, x.size(-1)});  // (M, in)
  const int64_t m = rows.size(0), padded = (m + block - 1) / block * block;
  const Tensor input = padded == m ? rows : at::constant_pad_nd(rows, {0, 0, 0, padded - m});
  std::vector<Tensor> outs;
  const FixedRowBlocks unblocked(0);  // each block as one call
  for (int64_t start = 0; start < padded; start += block) {
    outs.push_back(packed_linear(input.narrow(0, start, block), weight, bias, ops));
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return at::cat(outs).narrow(0, 0, m).reshape(sizes);  // (padded, out) -> (..., out)
}

}  // namespace

FixedRowBlocks::FixedRowBlocks(int64_t rows) : previous_(fixed_row_block) {
  fixed_row_block = rows;
}

FixedRowBlocks::~FixedRowBlocks() { fixed_row_block = previous_; }

Tensor packed_linear(const Tensor& x,
                     const Tensor& weight,
                     const Tensor& bias,
                     const PackedLinearOps& ops) {
  if (fixed_row_block > 0 && x.dim() >= 1 && x.numel() > 0) {
    return linear_in_row_blocks(x, weight, bias, ops, fixed_row_block);
  }
  if (!takes_packed_gemm(ops, x, weight, bias)) {
    return at::linear(x, weight, bias);
  }
  const Tensor packed = packed_weights().get(ops, weight);
  // x (..., in) -> (M, in) -> (M, out) -> (..., out)
  const Tensor out = ops.multiply(x.reshape({-1, x.size(-1)}).contiguous(), packed, bias);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return out.view(sizes);
}

int64_t packed_weight_count() { return packed_weights().count(); }

}  // namespace detail
}  // namespace mha
