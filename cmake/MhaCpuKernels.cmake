# mha's own CPU kernels (the paged decode attention, src/attention/paged_decode/; the
# prefill attention, src/attention/prefill/;
# the panel GEMM, src/linear/panel_gemm/): each an entry, and a body compiled
# once per CPU capability with that capability's flags and ATen's CPU_CAPABILITY
# macros (as ATen builds its own kernels), so at::vec::Vectorized is 8 floats
# wide in the AVX2 objects and 16 in the AVX-512 ones; the entry picks the best
# one the CPU runs (src/common/cpu_capability.h). Those objects take no
# precompiled header and no unity batch: both would mix their flags with the
# library's. Off x86-64 only the scalar objects are built.

target_sources(mha PRIVATE
  src/attention/paged_decode/paged_decode.cpp
  src/attention/prefill/prefill_attention.cpp
  src/linear/panel_gemm/panel_gemm.cpp
)

# Where the sanitizer build compiles mha at -O0 (the test suite's, cmake/MhaSanitizers.cmake),
# these objects take -O1, the level the sanitizers' documentation recommends: the
# tests' served-size GEMMs and attention run in them, and at -O0 no
# at::vec::Vectorized call is inlined (under ASan+UBSan the BERT-shaped stack test
# took 27 s at -O0, 6.5 s at -O1).
set(MHA_KERNEL_OPTIMIZATION "")
if(MHA_SANITIZER_OPTIMIZATION STREQUAL "-O0")
  set(MHA_KERNEL_OPTIMIZATION ";-O1")
endif()

# Adds the kernel object `file` of `capability` (DEFAULT, AVX2, AVX512) with `flags`.
function(mha_capability_object capability file)
  target_sources(mha PRIVATE ${file})
  # -Wno-psabi: GCC's note that passing 32- and 64-byte vectors by value
  # changed ABI in GCC 4.6; these functions are all inside the one object.
  set_source_files_properties(${file} PROPERTIES
    COMPILE_OPTIONS "${ARGN};-Wno-psabi${MHA_KERNEL_OPTIMIZATION}"
    COMPILE_DEFINITIONS "CPU_CAPABILITY=${capability};CPU_CAPABILITY_${capability}"
    SKIP_PRECOMPILE_HEADERS ON
    SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# Adds every kernel's object of `capability` (its file suffix `suffix`) with `flags`.
function(mha_capability_objects capability suffix)
  foreach(kernel attention/paged_decode/paged_decode attention/prefill/prefill_attention
      linear/panel_gemm/panel_gemm)
    mha_capability_object(${capability} src/${kernel}_${suffix}.cpp ${ARGN})
  endforeach()
endfunction()

mha_capability_objects(DEFAULT default)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  target_compile_definitions(mha PRIVATE MHA_CPU_KERNELS_X86=1)
  mha_capability_objects(AVX2 avx2 -mavx2 -mfma -mf16c)
  mha_capability_objects(AVX512 avx512
    -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
    # GCC 12's avx512fintrin.h leaves vectors undefined on purpose (`__Y = __Y`),
    # which -Wmaybe-uninitialized (-Wuninitialized at -O1) reports once inlined
    # (GCC bug 105593).
    -Wno-maybe-uninitialized -Wno-uninitialized)
endif()
