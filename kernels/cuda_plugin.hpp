#pragma once
// The CUDA backend lives in a plugin, libnoeira_cuda.so, loaded the first time a run asks for
// the GPU: a CPU run of a CUDA build then maps no CUDA library (cuBLASLt alone is 60 MB of
// resident pages) and starts as fast as a CPU build. The noeira binary and the libraries link
// neither CUDA nor NCCL; the plugin links both, and MPI, which it shares with the binary.
//
// Where the plugin is looked for, in order (the first that loads and comes from this very build
// is used; a plugin from another build is refused, since the tables' layout may differ):
//   - $NOEIRA_CUDA_PLUGIN, when set: that file only;
//   - <directory of the running binary>/../<libdir>/libnoeira_cuda.so (an installed tree, moved
//     or not);
//   - the build tree's copy (tests and benchmarks run from there);
//   - <install prefix>/<libdir>/libnoeira_cuda.so.
// Thread-safe; loaded once, never unloaded (the CUDA runtime registers exit handlers).
#include <string>

namespace noeira {

struct KernelTable;

// What the plugin's kernels half gives the kernels layer (kernels/kernels.cpp).
struct CudaKernelsEntry {
  const KernelTable& (*table)();
  const KernelTable& (*bf16_table)();  // the matrix products with bf16 operands
  // Why no CUDA device can be used, in the runtime's words; empty when one can.
  const char* (*device_unavailable_reason)();
  void (*set_allow_tf32)(bool allow);
};

// The plugin's exported functions, each returning a pointer to its entry struct.
inline constexpr const char* kCudaKernelsEntrySymbol = "noeira_cuda_kernels";
inline constexpr const char* kNcclBackendEntrySymbol = "noeira_nccl_backend";
inline constexpr const char* kCudaPluginBuildIdSymbol = "noeira_cuda_plugin_build_id";

// The address of `symbol` in the plugin, loading it first; nullptr when there is no plugin to
// load (cuda_plugin_error() says why) or it lacks the symbol.
void* cuda_plugin_symbol(const char* symbol);

// Why the plugin could not be loaded: every place tried and what failed there; empty when it
// is loaded or was never asked for.
std::string cuda_plugin_error();

// Whether the plugin has been loaded (never loads it).
bool cuda_plugin_loaded();

// The entry struct that the plugin's function `symbol` returns, loading the plugin first;
// nullptr when it cannot be loaded.
template <class Entry>
const Entry* cuda_plugin_entry(const char* symbol) {
  using Get = const Entry* (*)();
  auto get = reinterpret_cast<Get>(cuda_plugin_symbol(symbol));
  return get == nullptr ? nullptr : get();
}

}  // namespace noeira
