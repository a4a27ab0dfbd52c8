// The checks of MultiheadAttentionImpl::forward_paged (module/paged_call_checks.h):
// the module and tensors, the offsets (copied to the host once per call or
// stack step), the ids, a static cache's memories, the blocks' room, and the
// shared-table rule (a table shared by a stack's layers grows only in a step).

#include "module/paged_call_checks.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "attention/attention_call.h"
#include "attention/input_checks.h"
#include "attention/projector.h"
#include "cache/paged_kv_cache_state.h"
#include "common/shape_format.h"
#include "mha/multihead_attention.h"
#include "mha/paged_kv_cache.h"

namespace mha {

using torch::Tensor;

std::vector<int64_t> detail::checked_host_offsets(const Tensor& offsets,
                                                  const char* name,
                                                  size_t num_seqs,
                                                  int64_t total) {
  TORCH_CHECK(offsets.defined(), "expected ", name, " to be a defined tensor");
  TORCH_CHECK_TYPE(offsets.scalar_type() == at::kInt || offsets.scalar_type() == at::kLong,
                   "expected ", name, " of dtype int32 or int64, but got ",
                   c10::toString(offsets.scalar_type()));
  TORCH_CHECK_VALUE(offsets.dim() == 1 && offsets.size(0) == static_cast<int64_t>(num_seqs) + 1,
                    fmt::format("expected {} of shape torch.Size([{}]) (num_seqs + 1), but got {}",
                                name, num_seqs + 1, detail::torch_size(offsets.sizes())));
  const Tensor host = offsets.to(at::kCPU, at::kLong).contiguous();
  const std::vector<int64_t> result(host.data_ptr<int64_t>(),
                                    host.data_ptr<int64_t>() + host.numel());
  TORCH_CHECK_VALUE(result.front() == 0 && result.back() == total,
                    fmt::format("expected {} to start at 0 and end at {} (the rows), but got {} "
                                "and {}",
                                name, total, result.front(), result.back()));
  for (size_t i = 0; i < num_seqs; ++i) {
    TORCH_CHECK_VALUE(result[i] <= result[i + 1],
                      fmt::format("expected non-decreasing {}, but {}[{}] = {} > {}[{}] = {}", name,
                                  name, i, result[i], name, i + 1, result[i + 1]));
  }
  return result;
}

namespace {

void check_paged_inputs(const MultiheadAttentionImpl& m,
                        const detail::PagedKVCacheState& cache,
                        const detail::AttentionCall& call,
                        const Tensor& cu_seqlens_kv) {
  TORCH_CHECK(!m.is_training(),
              "forward_paged is for inference, but the module is in training mode; call "
              "module->eval()");
  TORCH_CHECK(cache.owner == &m,
              "the cache was made for another module; use one PagedKVCache per module");
  TORCH_CHECK(!m.bias_k.defined() && !m.options.add_zero_attn(),
              "forward_paged supports neither add_bias_kv nor add_zero_attn");
  TORCH_CHECK(call.query.defined(), "expected query to be a defined tensor");
  TORCH_CHECK(call.key.defined() == call.value.defined(),
              "expected key and value both defined or both undefined");
  TORCH_CHECK(call.key.defined() || cache.is_static,
              "expected key and value (the new positions) for a self-attention cache");
  TORCH_CHECK(cache.is_static || !cu_seqlens_kv.defined(),
              "cu_seqlens_kv is for a static_kv cache (a self-attention cache's keys are the "
              "queries' rows)");
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{call.query, "query"},
                                {call.key, "key"},
                                {call.value, "value"}}) {
    TORCH_CHECK_VALUE(!t.defined() || t.dim() == 2,
                      fmt::format("expected {} of shape (rows, features): the sequences' rows one "
                                  "after another, but got {}",
                                  name, detail::torch_size(t.sizes())));
  }
  const int64_t key_rows = cache.is_static ? call.key.size(0) : call.query.size(0);
  TORCH_CHECK_VALUE(
      !call.key.defined() || (call.key.size(0) == key_rows && call.value.size(0) == key_rows),
      fmt::format("expected key and value of {} rows, but got {} and {}", key_rows,
                  call.key.size(0), call.value.size(0)));
  const Tensor& param = detail::Projector::first_weight(m);
  detail::check_dtypes_and_devices(param, call);
  detail::check_feature_sizes(m.options, call.query, call.key, call.value);
  TORCH_CHECK_TYPE(
      cache.keys.scalar_type() == param.scalar_type() && cache.keys.device() == param.device(),
      fmt::format("expected the cache's pool of dtype {} on {} to match the module's {} on {}; "
                  "the module was converted or moved after the cache was made (make a new "
                  "PagedKVCache)",
                  c10::toString(cache.keys.scalar_type()), cache.keys.device().str(),
                  c10::toString(param.scalar_type()), param.device().str()));
}

/// A static cache's memories: given once per sequence, before its queries.
/// `lengths`: the sequences' lengths before the call (before a stack step).
void check_paged_memories(const std::vector<int64_t>& seq_ids,
                          const std::vector<int64_t>& lengths,
                          const detail::PagedOffsets& offsets) {
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const bool holds = lengths[i] > 0;
    const bool given = offsets.keys[i + 1] > offsets.keys[i];
    TORCH_CHECK_VALUE(
        !(holds && given),
        fmt::format("sequence {} already holds its memory; give it 0 key rows", seq_ids[i]));
    TORCH_CHECK_VALUE(
        holds || given || offsets.queries[i + 1] == offsets.queries[i],
        fmt::format("sequence {} has no memory yet: give it as key/value rows", seq_ids[i]));
  }
}

/// The offsets of a call: the queries', and the new keys'.
detail::PagedOffsets checked_paged_offsets(const detail::PagedKVCacheState& cache,
                                           const detail::PagedCall& call) {
  const size_t num_seqs = call.seq_ids.size();
  detail::PagedOffsets offsets;
  offsets.queries =
      detail::checked_host_offsets(call.cu_seqlens, "cu_seqlens", num_seqs, call.query.size(0));
  if (!cache.is_static) {
    offsets.keys = offsets.queries;
  } else if (call.key.defined()) {
    offsets.keys = detail::checked_host_offsets(call.cu_seqlens_kv, "cu_seqlens_kv", num_seqs,
                                                call.key.size(0));
  } else {
    offsets.keys.assign(num_seqs + 1, 0);
  }
  return offsets;
}

/// The sequences' lengths before the call: before the stack step in progress.
std::vector<int64_t> lengths_before(const detail::PagedKVCacheState& cache,
                                    const std::vector<int64_t>& seq_ids) {
  if (const detail::PagedStepRecord* step = cache.blocks->step()) return step->lengths_before;
  std::vector<int64_t> lengths;
  for (const int64_t id : seq_ids) lengths.push_back(cache.blocks->sequence(id).length());
  return lengths;
}

}  // namespace

detail::PagedOffsets detail::check_paged_layer(const MultiheadAttentionImpl& module,
                                               PagedKVCache& cache,
                                               const PagedCall& call,
                                               const PagedOffsets* known) {
  // One event per call checked: profiles (and a test) count the checks of a step.
  RECORD_FUNCTION("mha::check_paged_call", std::vector<c10::IValue>());
  const PagedKVCacheState& state = paged_kv_cache_state(cache);
  const Tensor none;
  const AttentionCall tensors{call.query, call.key, call.value, none, none, /*need_weights=*/false,
                              true,       false};
  check_paged_inputs(module, state, tensors, call.cu_seqlens_kv);
  PagedOffsets offsets = known != nullptr ? *known : checked_paged_offsets(state, call);
  TORCH_INTERNAL_ASSERT(offsets.queries.size() == call.seq_ids.size() + 1 &&
                            offsets.queries.back() == call.query.size(0),
                        "a stack step's offsets for another call");
  // Known and distinct ids (no new positions: no room needed).
  state.blocks->check_room(call.seq_ids, std::vector<int64_t>(call.seq_ids.size(), 0));
  if (state.is_static) {
    check_paged_memories(call.seq_ids, lengths_before(state, call.seq_ids), offsets);
  }
  return offsets;
}

detail::PagedOffsets detail::check_paged_call(const MultiheadAttentionImpl& module,
                                              PagedKVCache& cache,
                                              const PagedCall& call) {
  const PagedKVCacheState& state = paged_kv_cache_state(cache);
  if (const PagedStepRecord* step = state.blocks->step()) {
    TORCH_CHECK(call.seq_ids == step->ids,
                fmt::format("expected the sequence ids of the stack step in progress, {}, but got "
                            "{}",
                            step->ids, call.seq_ids));
    return check_paged_layer(module, cache, call, &step->offsets);
  }
  const PagedOffsets offsets = check_paged_layer(module, cache, call);
  const std::vector<int64_t> new_positions = new_key_positions(offsets);
  TORCH_CHECK(!state.shares_blocks() || std::all_of(new_positions.begin(), new_positions.end(),
                                                    [](int64_t n) { return n == 0; }),
              "forward_paged: this cache shares its block table with other layers' caches "
              "(a PagedStackCache's layers), which grows only in a stack step: call the stack's "
              "forward_paged (TransformerEncoder, TransformerDecoder) or ContinuousBatch::step, "
              "which grow the table once for every layer");
  state.blocks->check_room(call.seq_ids, new_positions);
  return offsets;
}

detail::PagedOffsets detail::validated_paged_offsets(PagedKVCache& cache, const PagedCall& call) {
  const PagedKVCacheState& state = paged_kv_cache_state(cache);
  if (const PagedStepRecord* step = state.blocks->step()) return step->offsets;
  return checked_paged_offsets(state, call);
}

}  // namespace mha
