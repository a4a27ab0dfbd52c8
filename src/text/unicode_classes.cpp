#include "text/unicode_classes.h"

#include <c10/util/Exception.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "text/utf8.h"

namespace mha {
namespace detail {

namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

bool is_other(char32_t c) {
  const utf8proc_category_t k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
         k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CN;
}

bool is_mark_nonspacing(char32_t c) { return category(c) == UTF8PROC_CATEGORY_MN; }

bool is_punctuation(char32_t c) {
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

void append_lowercase(std::string& out, char32_t c) {
  if (c == 0x130) {      // SpecialCasing.txt: LATIN CAPITAL LETTER I WITH DOT ABOVE
    out += "i\xCC\x87";  // i, COMBINING DOT ABOVE
    return;
  }
  append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

bool is_mark(char32_t c) {
  const utf8proc_category_t k = category(c);
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

bool is_word_char(char32_t c) {
  const utf8proc_category_t k = category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || is_mark(c) ||
         k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC ||
         c == 0x200C || c == 0x200D;
}

bool is_numeric(char32_t c) {
  const utf8proc_category_t k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

std::string unicode_form(const std::string& text, UnicodeForm form) {
  int options = UTF8PROC_STABLE;
  if (form == UnicodeForm::kNFC || form == UnicodeForm::kNFKC) {
    options |= UTF8PROC_COMPOSE;
  } else {
    options |= UTF8PROC_DECOMPOSE;
  }
  if (form == UnicodeForm::kNFKC || form == UnicodeForm::kNFKD) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &mapped, static_cast<utf8proc_option_t>(options));
  TORCH_CHECK(length >= 0,
              "Unicode normalization: utf8proc refused the text: ", utf8proc_errmsg(length));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
}

}  // namespace detail
}  // namespace mha
