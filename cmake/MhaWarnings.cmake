# Warnings for mha's own code: -Wall -Wextra -Wpedantic on every target of this
# project and its subdirectories, -Werror with MHA_WERROR (CI). LibTorch's
# headers come through an imported target, as system headers, so they are not
# judged. Included from the top-level CMakeLists.txt before any target.

option(MHA_WERROR "Treat warnings in mha's own code as errors" OFF)
add_compile_options(-Wall -Wextra -Wpedantic)
if(MHA_WERROR)
  add_compile_options(-Werror)
endif()
