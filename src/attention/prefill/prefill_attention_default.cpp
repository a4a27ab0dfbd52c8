// The prefill attention compiled for the default capability
// (cmake/MhaCpuKernels.cmake gives this file its flags and macros).

#include "attention/prefill/prefill_attention_kernel.h"

MHA_DEFINE_PREFILL_ATTENTION_KERNEL(prefill_attention_default)
