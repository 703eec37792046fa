// Whether a CUDA device can be used at all. Asked once: without a driver cudaGetDeviceCount
// fails cleanly (no exception, no abort), and the answer cannot change during a run.
#include <cuda_runtime_api.h>

namespace noeira::cuda {

bool device_present() {
  static const bool present = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // Clear the error so that it does not surface from an unrelated later call.
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return present;
}

}  // namespace noeira::cuda
