// Whether a CUDA device can be used at all, and if not, why. Asked once: without a driver
// cudaGetDeviceCount fails cleanly (no exception, no abort), and the answer cannot change during
// a run. The runtime's own words are kept: a driver older than the runtime must not read as "no
// GPU".
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/error.hpp"

namespace noeira::cuda {

const char* device_unavailable_reason() {
  static const std::string reason = []() -> std::string {
    constexpr const char* kHint = "; check nvidia-smi and CUDA_VISIBLE_DEVICES";
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // Clear the error so that it does not surface from an unrelated later call.
      (void)cudaGetLastError();
      return detail::concat("the CUDA runtime finds no GPU it can use: cudaGetDeviceCount ",
                            "failed: ", cudaGetErrorString(status), " (",
                            cudaGetErrorName(status), ")", kHint);
    }
    if (count == 0) return detail::concat("the CUDA runtime finds no GPU on this machine", kHint);
    return {};
  }();
  return reason.c_str();
}

}  // namespace noeira::cuda
