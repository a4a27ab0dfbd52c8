// The paged decode kernel compiled for the avx512 capability (CMakeLists.txt
// gives this file its flags and CPU_CAPABILITY macros).

#include "attention/paged_decode/paged_decode_kernel.h"

namespace mha {
namespace detail {

void paged_decode_avx512(const PagedDecodeArgs& args, torch::Tensor& out) {
  paged_decode_kernel::run(args, out);
}

}  // namespace detail
}  // namespace mha
