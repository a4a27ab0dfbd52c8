#pragma once

// decode_step_profile --hf DIR: one greedy decoder step of a Hugging Face
// seq2seq model (mha::Seq2SeqLM from mha::load_hf_model, as loaded).

#include <string>

namespace hf_decode_step {

/// For N = 1 and 16 at 1 and 2 threads: prints one table row per cell (step
/// time, ATen ops, the weights' bytes a step reads against a read sweep of
/// the same size) and one line of the top-level ops by time. `form`:
/// "float" (loaded with `prepack(false)`) or "prepack" (as loaded).
void profile(const std::string& directory, const std::string& form);

/// For N = 1 and 16, greedy and 4 beams, 1 and 2 threads: one table row per
/// cell (the wall time of `mha::generate`, 64 new tokens from 32-token
/// sources, the model as loaded) and one line of its top-level ops by time.
void profile_generate(const std::string& directory);

}  // namespace hf_decode_step
