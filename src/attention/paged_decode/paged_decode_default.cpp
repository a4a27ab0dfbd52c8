// The paged decode kernel compiled for the default capability
// (cmake/MhaCpuKernels.cmake gives this file its flags and macros).

#include "attention/paged_decode/paged_decode_kernel.h"

MHA_DEFINE_PAGED_DECODE_KERNEL(paged_decode_default)
