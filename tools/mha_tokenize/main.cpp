// mha-tokenize: shows a Hugging Face directory's tokenizer as mha reads it,
// and tokenizes lines with it.
//
//   mha-tokenize DIR           the tokenizer, then each line of stdin
//   mha-tokenize DIR TEXT...   the tokenizer, then each TEXT
//
// For each line: its ids (with the special tokens transformers adds) and the
// text they decode to. Exit status: 0, or 2 for a directory mha cannot read
// (the error says why).

#include <c10/util/Exception.h>
#include <mha/tokenizer.h>

#include <iostream>
#include <string>
#include <vector>

namespace {

/// Prints `line`'s ids and their decoded text.
void tokenize(const mha::Tokenizer& tokenizer, const std::string& line) {
  const std::vector<int64_t> ids = tokenizer.encode(line);
  std::cout << "ids:";
  for (const int64_t id : ids) std::cout << " " << id;
  std::cout << "\ndecoded: " << tokenizer.decode(ids, /*skip_special_tokens=*/true) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " DIR [TEXT...]  (without TEXT: each line of stdin)\n";
    return 2;
  }
  try {
    const mha::Tokenizer tokenizer = mha::load_hf_tokenizer(argv[1]);
    const auto pad = tokenizer.pad_token_id();
    std::cout << "class " << tokenizer.tokenizer_class() << ", " << tokenizer.size()
              << " tokens, pad token " << (pad ? std::to_string(*pad) : "none") << "\n";
    if (argc > 2) {
      for (int i = 2; i < argc; ++i) tokenize(tokenizer, argv[i]);
    } else {
      for (std::string line; std::getline(std::cin, line);) tokenize(tokenizer, line);
    }
  } catch (const c10::Error& e) {
    std::cerr << "mha-tokenize: " << e.what_without_backtrace() << "\n";
    return 2;
  }
  return 0;
}
