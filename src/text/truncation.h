#pragma once

// Private: tokenizers' truncation of a sequence or a pair to a length
// (tokenizers/src/utils/truncation.rs, `truncate_encodings`), which
// transformers' `truncation=` runs.

#include <mha/tokenizer.h>

#include <cstdint>
#include <vector>

namespace mha {
namespace detail {

/// Cuts `a` (and `b`, a pair, or null) to `max_length` ids together, as
/// `strategy` says, keeping their start (or, `from_left`, their end).
/// Throws `c10::Error` with tokenizers' message when the sequence
/// `strategy` names is too short to lose enough ids, or is missing.
void truncate_sequences(std::vector<int64_t>& a,
                        std::vector<int64_t>* b,
                        int64_t max_length,
                        Truncation strategy,
                        bool from_left);

/// Each side's windows: the first is what `truncate_sequences` keeps, the
/// others what it cuts, in windows of that length sharing `stride` ids with
/// the one before (tokenizers' `Encoding::truncate` with a stride). `c10::Error`
/// with tokenizers' message where a cut side's length is not above `stride`.
struct SequenceWindows {
  std::vector<std::vector<int64_t>> a, b;  ///< `b` empty without a pair
};
SequenceWindows truncation_windows(const std::vector<int64_t>& a,
                                   const std::vector<int64_t>* b,
                                   int64_t max_length,
                                   Truncation strategy,
                                   bool from_left,
                                   int64_t stride);

}  // namespace detail
}  // namespace mha
