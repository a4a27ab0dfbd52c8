// The paged decode kernel compiled for the avx512 capability (CMakeLists.txt
// gives this file its flags and CPU_CAPABILITY macros).

#include "attention/paged_decode/paged_decode_kernel.h"

namespace mha {
namespace detail {

void paged_decode_avx512(const PagedDecodeArgs& args,
                         const DecodeItems& items,
                         int64_t begin,
                         int64_t end,
                         torch::Tensor& out) {
  paged_decode_kernel::run(args, items, begin, end, out);
}

}  // namespace detail
}  // namespace mha
