#include "tensor_parallel/collectives.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <exception>
#include <utility>
#include <vector>

namespace mha {
namespace detail {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

/// Waits for `work`; a failure becomes a c10::Error with the context.
void wait_for(c10d::Backend& group, c10d::Work& work, const std::string& what) {
  try {
    work.wait();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, fmt::format("mha::TensorParallelMultiheadAttention: {} failed on rank {} "
                                   "of {} (a rank died, hung past the group's timeout, or "
                                   "called another collective): {}",
                                   what, group.getRank(), group.getSize(), e.what()));
  }
}

/// The group, kept by an autograd context for the backward pass.
void save_group(AutogradContext* ctx, const c10::intrusive_ptr<c10d::Backend>& group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(group);
}

c10::intrusive_ptr<c10d::Backend> saved_group(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<c10d::Backend>(ctx->saved_data["group"].toCapsule());
}

/// Megatron's "f": identity forward, all-reduce backward.
struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static Tensor forward(AutogradContext* ctx,
                        const Tensor& x,
                        const c10::intrusive_ptr<c10d::Backend>& group) {
    save_group(ctx, group);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor whole = grads[0].contiguous().clone();  // the sum of the ranks' partial gradients
    all_reduce_sum(*saved_group(ctx), whole, "all-reduce of an input gradient");
    return {whole, Tensor()};
  }
};

/// Megatron's "g": all-reduce forward, identity backward.
struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static Tensor forward(AutogradContext*,
                        const Tensor& partial,
                        const c10::intrusive_ptr<c10d::Backend>& group) {
    Tensor sum = partial.contiguous().clone();
    all_reduce_sum(*group, sum, "all-reduce of the partial outputs");
    return sum;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], Tensor()};
  }
};

/// All-gather along a dimension forward; this rank's slice of the gradient backward.
struct GatherFromTensorParallel : torch::autograd::Function<GatherFromTensorParallel> {
  static Tensor forward(AutogradContext* ctx,
                        const Tensor& local,
                        int64_t dim,
                        const c10::intrusive_ptr<c10d::Backend>& group) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["size"] = local.size(dim);
    ctx->saved_data["start"] = local.size(dim) * group->getRank();
    return all_gather_cat(*group, local, dim, "all-gather of the attention weights");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& saved = ctx->saved_data;
    return {grads[0].narrow(saved.at("dim").toInt(), saved.at("start").toInt(),
                            saved.at("size").toInt()),
            Tensor(), Tensor()};
  }
};

}  // namespace

void all_reduce_sum(c10d::Backend& group, Tensor& tensor, const std::string& what) {
  std::vector<Tensor> tensors{tensor};
  auto work = group.allreduce(tensors);
  wait_for(group, *work, what);
}

std::vector<Tensor> all_gather(c10d::Backend& group,
                               const Tensor& tensor,
                               const std::string& what) {
  std::vector<Tensor> inputs{tensor.contiguous()};
  std::vector<std::vector<Tensor>> outputs(1);
  for (int r = 0; r < group.getSize(); ++r) {
    outputs[0].push_back(at::empty_like(inputs[0]));
  }
  auto work = group.allgather(outputs, inputs);
  wait_for(group, *work, what);
  return std::move(outputs[0]);
}

Tensor all_gather_cat(c10d::Backend& group,
                      const Tensor& tensor,
                      int64_t dim,
                      const std::string& what) {
  return at::cat(all_gather(group, tensor, what), dim);
}

Tensor copy_to_tensor_parallel(const Tensor& x, const c10::intrusive_ptr<c10d::Backend>& group) {
  return CopyToTensorParallel::apply(x, group);
}

Tensor reduce_from_tensor_parallel(const Tensor& partial,
                                   const c10::intrusive_ptr<c10d::Backend>& group) {
  return ReduceFromTensorParallel::apply(partial, group);
}

Tensor gather_from_tensor_parallel(const Tensor& local,
                                   int64_t dim,
                                   const c10::intrusive_ptr<c10d::Backend>& group) {
  return GatherFromTensorParallel::apply(local, dim, group);
}

}  // namespace detail
}  // namespace mha
