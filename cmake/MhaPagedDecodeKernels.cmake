# The paged decode kernel (src/attention/paged_decode/): its entry, and its body
# compiled once per CPU capability with that capability's flags and ATen's
# CPU_CAPABILITY macros (as ATen builds its own kernels), so at::vec::Vectorized
# is 8 floats wide in the AVX2 object and 16 in the AVX-512 one; the entry picks
# the best one the CPU runs. Those objects take no precompiled header and no
# unity batch: both would mix their flags with the library's. Off x86-64 only
# the scalar object is built.

target_sources(mha PRIVATE src/attention/paged_decode/paged_decode.cpp)

# Adds the kernel object of `capability` (DEFAULT, AVX2, AVX512) with `flags`.
function(mha_paged_decode_object capability file)
  target_sources(mha PRIVATE ${file})
  # -Wno-psabi: GCC's note that passing 32- and 64-byte vectors by value
  # changed ABI in GCC 4.6; these functions are all inside the one object.
  set_source_files_properties(${file} PROPERTIES
    COMPILE_OPTIONS "${ARGN};-Wno-psabi"
    COMPILE_DEFINITIONS "CPU_CAPABILITY=${capability};CPU_CAPABILITY_${capability}"
    SKIP_PRECOMPILE_HEADERS ON
    SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

mha_paged_decode_object(DEFAULT src/attention/paged_decode/paged_decode_default.cpp)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  target_compile_definitions(mha PRIVATE MHA_PAGED_DECODE_X86=1)
  mha_paged_decode_object(AVX2 src/attention/paged_decode/paged_decode_avx2.cpp
    -mavx2 -mfma -mf16c)
  mha_paged_decode_object(AVX512 src/attention/paged_decode/paged_decode_avx512.cpp
    -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
    # GCC 12's avx512fintrin.h leaves vectors undefined on purpose (`__Y = __Y`),
    # which -Wmaybe-uninitialized reports once inlined (GCC bug 105593).
    -Wno-maybe-uninitialized)
endif()
