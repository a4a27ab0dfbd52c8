#include "text/token_texts.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "text/byte_level.h"
#include "text/decoders.h"

namespace mha {
namespace detail {

namespace {

/// transformers' matching modes: how a token's bytes are read.
enum class Mode { kText, kByteLevel, kByteFallback };

/// transformers' `_get_stop_string_matching_mode`: a ByteLevel decoder, else
/// any ByteFallback in the decoder, else any ByteLevel.
Mode matching_mode(const Decoder& decoder) {
  std::vector<const Decoder*> parts;
  decoder.parts(parts);
  const auto any = [&](auto is) { return std::any_of(parts.begin(), parts.end(), is); };
  const auto byte_level = [](const Decoder* d) {
    return dynamic_cast<const ByteLevelDecoder*>(d) != nullptr;
  };
  if (byte_level(&decoder)) return Mode::kByteLevel;
  if (any([](const Decoder* d) { return dynamic_cast<const ByteFallbackDecoder*>(d) != nullptr; }))
    return Mode::kByteFallback;
  return any(byte_level) ? Mode::kByteLevel : Mode::kText;
}

}  // namespace

TokenTexts token_texts(const TokenizerPipeline& p) {
  const Mode mode = matching_mode(*p.decoder);
  const std::string prefix = "abcdef";
  std::vector<std::string> base;  // the tokens of the prefix
  for (const int64_t id : p.encode_plain(prefix)) base.push_back(*p.token_of(id));
  TokenTexts texts;
  texts.counts_bytes = mode != Mode::kText;
  texts.by_id.resize(static_cast<size_t>(p.size()));
  for (int64_t id = 0; id < p.size(); ++id) {
    const std::string* token = p.token_of(id);
    if (token == nullptr) continue;
    if (mode == Mode::kByteLevel) {
      if (auto bytes = byte_level_bytes(*token)) {
        texts.by_id[id] = std::move(bytes);
        continue;
      }
    }
    if (mode == Mode::kByteFallback) {
      if (const int byte = fallback_byte(*token); byte >= 0) {
        texts.by_id[id] = std::string(1, static_cast<char>(byte));
        continue;
      }
    }
    std::vector<std::string> tokens = base;
    tokens.push_back(*token);
    const std::string text = p.decoder->decode(std::move(tokens));
    const size_t at = text.find(prefix);
    TORCH_CHECK_VALUE(at != std::string::npos, "StopStringCriteria: the decoded text of token ", id,
                      " ('", *token, "') after \"", prefix, "\" lost the prefix: '", text, "'");
    texts.by_id[id] = text.substr(at + prefix.size());
  }
  return texts;
}

}  // namespace detail
}  // namespace mha
