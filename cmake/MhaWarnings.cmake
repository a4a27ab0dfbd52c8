# Warnings for mha's own code: -Wall -Wextra -Wpedantic on every target of this
# project and its subdirectories, -Werror with MHA_WERROR (CI). LibTorch's
# headers come through an imported target, as system headers, so they are not
# judged. Included from the top-level CMakeLists.txt before any target.

option(MHA_WERROR "Treat warnings in mha's own code as errors" OFF)
add_compile_options(-Wall -Wextra -Wpedantic)
if(MHA_WERROR)
  add_compile_options(-Werror)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # gcc 12 reports a std::function inside a std::variant (the Transformer
    # activation option) as maybe-uninitialized once sanitizers change the
    # inlining: a known false positive, kept as a warning.
    add_compile_options(-Wno-error=maybe-uninitialized)
  endif()
endif()
