#include <atomic>

#include "kernels/cuda_plugin.hpp"
#include "kernels/error.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {

namespace cpu {
extern const KernelTable table;
extern const KernelTable bf16_table;
}

namespace {

#ifdef NOEIRA_HAVE_CUDA
// What set_allow_tf32 last asked for, applied when the plugin loads: asking on a CPU run (off,
// the default) must not load it.
std::atomic<bool> g_requested_tf32{false};

// The plugin's kernels, loading it on first use; nullptr when it cannot be loaded.
const CudaKernelsEntry* cuda_kernels() {
  static const CudaKernelsEntry* const entry = [] {
    const auto* e = cuda_plugin_entry<CudaKernelsEntry>(kCudaKernelsEntrySymbol);
    if (e != nullptr) e->set_allow_tf32(g_requested_tf32.load());
    return e;
  }();
  return entry;
}
#endif

}  // namespace

std::string cuda_unavailable_reason() {
#ifdef NOEIRA_HAVE_CUDA
  const CudaKernelsEntry* cuda = cuda_kernels();
  if (cuda == nullptr) return cuda_plugin_error();
  return cuda->device_unavailable_reason();
#else
  return "this noeira was built without CUDA (nvcc was not found at configure time, or "
         "-DNOEIRA_CUDA=OFF)";
#endif
}

bool cuda_available() { return cuda_unavailable_reason().empty(); }

const KernelTable& kernels_for(Target target, Precision precision) {
  if (target == Target::Cpu) return precision == Precision::Bf16 ? cpu::bf16_table : cpu::table;
#ifdef NOEIRA_HAVE_CUDA
  const CudaKernelsEntry* cuda = cuda_kernels();
  if (cuda != nullptr && *cuda->device_unavailable_reason() == '\0') {
    return precision == Precision::Bf16 ? cuda->bf16_table() : cuda->table();
  }
#endif
  throw Error("target cuda requested, but " + cuda_unavailable_reason());
}

void set_allow_tf32([[maybe_unused]] bool allow) {
#ifdef NOEIRA_HAVE_CUDA
  g_requested_tf32.store(allow);
  if (allow || cuda_plugin_loaded()) {
    if (const CudaKernelsEntry* cuda = cuda_kernels()) cuda->set_allow_tf32(allow);
  }
#endif
}

}  // namespace noeira
