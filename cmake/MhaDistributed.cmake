# MHA_DISTRIBUTED: tensor-parallel attention over c10d (mha/tensor_parallel.h,
# docs/tensor_parallel.md). Needs LibTorch built with c10d's Gloo backend (the
# Torch target defines USE_C10D_GLOO; without it ProcessGroupGloo.hpp compiles
# to nothing) and gloo's headers, which the pip wheel does not ship: Debian's
# libgloo-dev provides them. Only the headers: LibTorch exports its own gloo
# symbols from libtorch_cpu, and linking a second gloo (libgloo.so) would
# interpose them. Default ON when both are found.
get_target_property(_mha_torch_definitions torch_cpu INTERFACE_COMPILE_DEFINITIONS)
find_path(MHA_GLOO_INCLUDE_DIR gloo/config.h DOC "gloo's headers (Debian: libgloo-dev)")
set(_mha_distributed_found OFF)
if("USE_C10D_GLOO" IN_LIST _mha_torch_definitions AND MHA_GLOO_INCLUDE_DIR)
  set(_mha_distributed_found ON)
endif()
option(MHA_DISTRIBUTED "Build tensor-parallel attention over c10d (Gloo)" ${_mha_distributed_found})

if(MHA_DISTRIBUTED)
  if(NOT _mha_distributed_found)
    message(FATAL_ERROR "MHA_DISTRIBUTED needs LibTorch with USE_C10D_GLOO (found: "
      "'${_mha_torch_definitions}') and gloo's headers (gloo/config.h: ${MHA_GLOO_INCLUDE_DIR}; "
      "Debian: apt-get install libgloo-dev)")
  endif()
  target_sources(mha PRIVATE
    src/tensor_parallel/collectives.cpp
    src/tensor_parallel/forward.cpp
    src/tensor_parallel/load.cpp
    src/tensor_parallel/process_group.cpp
    src/tensor_parallel/shard_init.cpp
    src/tensor_parallel/state.cpp
    src/tensor_parallel/tensor_parallel.cpp
  )
  target_include_directories(mha SYSTEM PRIVATE ${MHA_GLOO_INCLUDE_DIR})
  # Consumers (tests, tools) can tell whether mha/tensor_parallel.h is usable.
  target_compile_definitions(mha PUBLIC MHA_DISTRIBUTED=1)
  message(STATUS "mha: tensor parallelism over c10d (Gloo) enabled")
else()
  message(STATUS "mha: tensor parallelism disabled (MHA_DISTRIBUTED=OFF)")
endif()
