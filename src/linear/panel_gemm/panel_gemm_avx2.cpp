// The panel GEMM compiled for the avx2 capability
// (cmake/MhaCpuKernels.cmake gives this file its flags and macros).

#include "linear/panel_gemm/panel_gemm_kernel.h"

MHA_DEFINE_PANEL_GEMM_KERNEL(panel_gemm_avx2)
