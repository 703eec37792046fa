// The kernels half of the CUDA plugin's entry (kernels/cuda_plugin.hpp). Only these extern "C"
// functions and the NCCL backend's are exported (cmake/cuda_plugin.map): the plugin's copies of
// everything else stay its own.
#include "kernels/cuda/settings.hpp"
#include "kernels/cuda_plugin.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::cuda {
const KernelTable& table();
const KernelTable& bf16_table();
const char* device_unavailable_reason();
}  // namespace noeira::cuda

extern "C" const char* noeira_cuda_plugin_build_id() { return NOEIRA_BUILD_ID; }

extern "C" const noeira::CudaKernelsEntry* noeira_cuda_kernels() {
  static const noeira::CudaKernelsEntry entry = {
      .table = &noeira::cuda::table,
      .bf16_table = &noeira::cuda::bf16_table,
      .device_unavailable_reason = &noeira::cuda::device_unavailable_reason,
      .set_allow_tf32 = &noeira::cuda::set_allow_tf32,
  };
  return &entry;
}
