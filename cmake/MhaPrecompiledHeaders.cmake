# MHA_PRECOMPILE_HEADERS: LibTorch's <torch/torch.h> precompiled once per build
# tree instead of parsed again by every source file, which is most of a
# source file's compile time here. Two precompiled headers, because gcc uses one
# only with the code-generation flags it was made with: the library's own
# (position-independent, with its private definitions), and one that every
# other target of this project reuses. Default ON for the top-level project
# only, so a consumer's add_subdirectory build compiles every header as
# written (no CI build does: a missing include shows only there). With clang only
# the library's is used: clang rejects a precompiled header when any
# command-line macro differs, and the tests' macros do.

option(MHA_PRECOMPILE_HEADERS "Precompile LibTorch's headers (faster builds)" ${PROJECT_IS_TOP_LEVEL})

# MHA_UNITY_BUILD: each target's sources compiled in batches of 16 (CMake's
# unity build), so the code every source file generates from LibTorch's
# inline functions and templates is compiled once per batch instead of once
# per file: measured here, a whole build in 6 min instead of 13. Default ON
# for the top-level project only; a consumer's add_subdirectory build
# compiles each file alone (the compile_alone test checks that every file
# compiles so).
option(MHA_UNITY_BUILD "Compile sources in batches (faster builds)" ${PROJECT_IS_TOP_LEVEL})
if(MHA_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()

# Gives `target` (the library) its own precompiled <torch/torch.h>.
function(mha_precompile_library_headers target)
  if(MHA_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  endif()
endfunction()

# The targets created in `dir` and in its subdirectories.
function(_mha_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _mha_targets_below(${subdir} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called last in the top-level CMakeLists.txt: every executable and static
# library below `dir` that links `library` (as mha::mha; not
# position-independent, like the shared header's own object library) reuses one
# precompiled <torch/torch.h>. Others (a GoogleTest built from sources) have no
# LibTorch headers to precompile.
function(mha_reuse_precompiled_headers dir library)
  if(NOT MHA_PRECOMPILE_HEADERS OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  _mha_targets_below(${dir} targets)
  set(reusing "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    get_target_property(links ${target} LINK_LIBRARIES)
    if(NOT target STREQUAL library AND NOT pic AND "${library}::${library}" IN_LIST links
       AND (type STREQUAL "EXECUTABLE" OR type STREQUAL "STATIC_LIBRARY"))
      list(APPEND reusing ${target})
    endif()
  endforeach()
  if(NOT reusing)
    return()  # the library alone (e.g. under add_subdirectory)
  endif()
  file(WRITE ${PROJECT_BINARY_DIR}/mha_pch.cpp "// The precompiled header's carrier.\n")
  add_library(mha_pch OBJECT ${PROJECT_BINARY_DIR}/mha_pch.cpp)
  target_link_libraries(mha_pch PRIVATE ${library})
  target_precompile_headers(mha_pch PRIVATE <torch/torch.h>)
  foreach(target IN LISTS reusing)
    target_precompile_headers(${target} REUSE_FROM mha_pch)
  endforeach()
endfunction()
