#pragma once

// Errors of the weights readers and writers: a c10::Error whose message starts
// with the file it is about.

#include <string>

namespace mha {
namespace detail {

/// Throws `c10::Error` with the message "<path>: <what>".
[[noreturn]] void fail_file(const std::string& path, const std::string& what);

/// The message of the exception being handled, without a C++ backtrace.
std::string current_exception_message();

/// Runs `body` (a call into LibTorch's readers); whatever it throws is rethrown
/// as a `c10::Error` "<path>: <context>: <message>".
template <typename Body>
auto with_file_context(const std::string& path, const std::string& context, Body&& body)
    -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    fail_file(path, context + ": " + current_exception_message());
  }
}

}  // namespace detail
}  // namespace mha
