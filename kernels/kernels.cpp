#include "kernels/error.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {

namespace cpu {
extern const KernelTable table;
extern const KernelTable bf16_table;
}

#ifdef NOEIRA_HAVE_CUDA
namespace cuda {
const KernelTable& table();  // checks the device on first use
bool device_present();
void set_allow_tf32(bool allow);
}  // namespace cuda
#endif

const KernelTable& kernels_for(Target target, Precision precision) {
  if (target == Target::Cpu) return precision == Precision::Bf16 ? cpu::bf16_table : cpu::table;
  if (precision == Precision::Bf16) {
    throw Error("precision bf16 on cuda: this build has no bf16 matrix products on the GPU yet "
                "(bf16 runs on the CPU; the GPU runs fp32)");
  }
#ifdef NOEIRA_HAVE_CUDA
  if (!cuda::device_present()) {
    throw Error("target cuda requested, but the CUDA runtime finds no GPU on this machine");
  }
  return cuda::table();
#else
  throw Error("target cuda requested, but this noeira was built without CUDA (NOEIRA_CUDA=OFF)");
#endif
}

void set_allow_tf32([[maybe_unused]] bool allow) {
#ifdef NOEIRA_HAVE_CUDA
  cuda::set_allow_tf32(allow);
#endif
}

bool cuda_available() {
#ifdef NOEIRA_HAVE_CUDA
  return cuda::device_present();
#else
  return false;
#endif
}

}  // namespace noeira
