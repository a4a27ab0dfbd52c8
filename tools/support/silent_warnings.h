#pragma once

// Warning handlers for code that drives mha with many inputs (fuzzers) or that
// checks what it warns (tests).

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace mha {
namespace support {

/// Swallows TORCH_WARN output (install with c10::WarningUtils::set_warning_handler).
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& /*warning*/) override {}
};

/// Keeps the text of every warning (install with c10::WarningUtils::WarningHandlerGuard).
class CollectedWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { messages.push_back(warning.msg()); }
  std::vector<std::string> messages;
};

}  // namespace support
}  // namespace mha
