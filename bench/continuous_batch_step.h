#pragma once

// decode_step_profile --continuous-batch: one step of a mha::ContinuousBatch
// serving N requests of a seq2seq Transformer, one token each per step.

#include <cstdint>
#include <string>
#include <vector>

namespace continuous_batch_step {

/// For each N of `counts`, at `threads` threads: prints one table row (step
/// time, ATen ops, the shares of GEMMs, SDPA, the other ops and the time
/// outside ops) and one line of the top-level ops by time. `form`: "float",
/// "prepack" or "int8", the model's weights.
void profile(const std::vector<int64_t>& counts, int threads, const std::string& form);

}  // namespace continuous_batch_step
