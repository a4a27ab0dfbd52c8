#include "state_dict/errors.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <exception>

namespace mha {
namespace detail {

void fail_file(const std::string& path, const std::string& what) {
  TORCH_CHECK(false, fmt::format("{}: {}", path, what));
}

std::string current_exception_message() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace detail
}  // namespace mha
