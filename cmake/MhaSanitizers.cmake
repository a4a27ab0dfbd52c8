# Sanitizers and fuzzing instrumentation for mha's own targets (the library,
# its tests, tools and examples). LibTorch is a prebuilt library and is not
# instrumented; tests/sanitizers/ holds the suppressions for reports inside it.
#
#   MHA_SANITIZE=asan   AddressSanitizer + UndefinedBehaviorSanitizer (gcc or clang)
#   MHA_SANITIZE=tsan   ThreadSanitizer
#   MHA_BUILD_FUZZERS   libFuzzer targets (clang only); implies asan when MHA_SANITIZE is empty
#
# Included from the top-level CMakeLists.txt before any target is created, so
# the flags reach every target of this project and of its subdirectories.

set(MHA_SANITIZE "" CACHE STRING "Sanitize mha's own code: asan (ASan+UBSan), tsan, or empty")
set_property(CACHE MHA_SANITIZE PROPERTY STRINGS "" asan tsan)
option(MHA_BUILD_FUZZERS "Build the libFuzzer targets under tests/fuzz (clang only)" OFF)

if(MHA_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR
      "MHA_BUILD_FUZZERS needs clang (libFuzzer), but the C++ compiler is "
      "${CMAKE_CXX_COMPILER_ID}; configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(MHA_SANITIZE STREQUAL "")
    set(MHA_SANITIZE asan CACHE STRING "" FORCE)
  endif()
endif()

set(MHA_SANITIZER_FLAGS "")
if(MHA_SANITIZE STREQUAL "asan")
  # UBSan checks recover (report and go on) so that its suppressions work;
  # UBSAN_OPTIONS=halt_on_error=1 (scripts/test.sh) makes any report fatal.
  list(APPEND MHA_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer)
elseif(MHA_SANITIZE STREQUAL "tsan")
  list(APPEND MHA_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT MHA_SANITIZE STREQUAL "")
  message(FATAL_ERROR "MHA_SANITIZE must be asan, tsan or empty, got '${MHA_SANITIZE}'")
endif()

if(MHA_SANITIZER_FLAGS)
  message(STATUS "mha: sanitizing mha's own targets with ${MHA_SANITIZER_FLAGS}")
  # After the build type's -O3, so they win: -g1 (line tables: enough for the
  # reports' stack traces), and -O1 for the fuzzers (executions per second
  # matter there; the level the sanitizers' documentation recommends) but -O0
  # for the test suite, whose heavy work runs in LibTorch, which is not
  # instrumented, or in mha's CPU kernels, which take -O1 (cmake/MhaCpuKernels.cmake):
  # compiling is most of CI's sanitizer phase, and -O0 compiles fastest
  # (docs/hardening.md, "CI").
  if(MHA_BUILD_FUZZERS)
    set(MHA_SANITIZER_OPTIMIZATION -O1)
  else()
    set(MHA_SANITIZER_OPTIMIZATION -O0)
  endif()
  add_compile_options(${MHA_SANITIZER_FLAGS} ${MHA_SANITIZER_OPTIMIZATION} -g1)
  add_link_options(${MHA_SANITIZER_FLAGS})
endif()
if(MHA_BUILD_FUZZERS)
  # Coverage feedback from mha's code; the fuzz targets add -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# Runs `target` with the flags above when linked into a project that does not
# set them (a consumer of the installed, instrumented libmha.a).
function(mha_sanitizer_usage_requirements target)
  if(MHA_SANITIZER_FLAGS)
    target_link_options(${target} INTERFACE ${MHA_SANITIZER_FLAGS})
  endif()
endfunction()
