#pragma once

// Private: tokenizers' general decoders (tokenizers/src/decoders/): byte
// tokens back to text, fusing, stripping, replacing, SentencePiece's
// Metaspace, BPE's word suffix, and a sequence of them. ByteLevel's and
// WordPiece's have files of their own.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "text/pattern.h"
#include "text/pipeline_parts.h"
#include "text/pre_tokenizers.h"

namespace mha {
namespace detail {

/// The byte of a `<0xXX>` token (either case of hex digit), or -1.
int fallback_byte(const std::string& token);

/// `ByteFallback`: runs of `<0xXX>` tokens as their bytes' text, or one
/// U+FFFD per byte where the run is not UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;
};

/// `Fuse`: all tokens joined into one.
class FuseDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;
};

/// `Strip`: up to `start` leading and `stop` trailing `content` characters
/// removed from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;

 private:
  char32_t content_;
  size_t start_, stop_;
};

/// `Replace`: each match of a pattern in each token replaced by `content`.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;

 private:
  Pattern pattern_;
  std::string content_;
};

/// `Metaspace`: `replacement` back to spaces, except in the first token
/// when a scheme prepended one (there it is dropped, as tokenizers does).
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, PrependScheme scheme)
      : replacement_(replacement), scheme_(scheme) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;

 private:
  char32_t replacement_;
  PrependScheme scheme_;
};

/// `BPEDecoder`: the end-of-word `suffix` a space, none after the last token.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;

 private:
  std::string suffix_;
};

/// `Sequence`: each decoder's chain fed to the next.
class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<const Decoder>> steps)
      : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override;
  void parts(std::vector<const Decoder*>& out) const override;

 private:
  std::vector<std::unique_ptr<const Decoder>> steps_;
};

}  // namespace detail
}  // namespace mha
