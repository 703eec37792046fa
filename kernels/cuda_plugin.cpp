// The loader of the CUDA plugin (cuda_plugin.hpp). Compiled to nothing in CPU builds, which have
// no plugin; CMakeLists.txt gives it the build id and the places to look.
#ifdef NOEIRA_HAVE_CUDA

#include "kernels/cuda_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace noeira {

namespace {

struct PluginState {
  std::mutex mutex;  // guards all but `loaded`
  bool attempted = false;
  void* handle = nullptr;
  std::string error;
  std::atomic<bool> loaded{false};
};

PluginState& state() {
  static PluginState s;
  return s;
}

std::string running_binary_directory() {
  char path[PATH_MAX] = {};
  const ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return {};
  std::string p(path, static_cast<std::size_t>(length));
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

// The file NOEIRA_CUDA_PLUGIN names; empty when it is unset or empty.
std::string chosen_plugin() {
  const char* chosen = std::getenv("NOEIRA_CUDA_PLUGIN");
  return chosen == nullptr ? std::string() : std::string(chosen);
}

std::vector<std::string> candidates(const std::string& chosen) {
  if (!chosen.empty()) return {chosen};
  std::vector<std::string> paths;
  if (const std::string here = running_binary_directory(); !here.empty()) {
    paths.push_back(here + "/../" NOEIRA_CUDA_PLUGIN_LIBDIR "/" NOEIRA_CUDA_PLUGIN_NAME);
  }
  paths.push_back(NOEIRA_CUDA_PLUGIN_BUILD_PATH);
  paths.push_back(NOEIRA_CUDA_PLUGIN_INSTALL_PATH);
  return paths;
}

// A loaded plugin's handle when it comes from this build; else nullptr and why in `why`. A
// refused plugin stays mapped: unloading the CUDA libraries it pulled in is not safe.
void* open_plugin(const std::string& path, std::string& why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    why = text != nullptr ? text : "dlopen failed";
    return nullptr;
  }
  using BuildId = const char* (*)();
  auto build_id = reinterpret_cast<BuildId>(dlsym(handle, kCudaPluginBuildIdSymbol));
  if (build_id == nullptr) {
    why = std::string("not a noeira CUDA plugin (no ") + kCudaPluginBuildIdSymbol + ")";
    return nullptr;
  }
  if (std::strcmp(build_id(), NOEIRA_BUILD_ID) != 0) {
    why = std::string("from another build of noeira (build ") + build_id() + ", this binary's " +
          NOEIRA_BUILD_ID + ")";
    return nullptr;
  }
  return handle;
}

void load(PluginState& s) {
  s.attempted = true;
  const std::string chosen = chosen_plugin();
  std::string tried;
  for (const std::string& path : candidates(chosen)) {
    std::string why;
    if (void* handle = open_plugin(path, why)) {
      s.handle = handle;
      s.loaded.store(true, std::memory_order_release);
      return;
    }
    // dlerror() names the file itself.
    if (why.compare(0, path.size(), path) != 0) why = path + ": " + why;
    tried += (tried.empty() ? "" : "; ") + why;
  }
  s.error = "the CUDA backend " NOEIRA_CUDA_PLUGIN_NAME " could not be loaded: " + tried +
            (!chosen.empty() ? " (the file NOEIRA_CUDA_PLUGIN names)"
                    : " (NOEIRA_CUDA_PLUGIN may name where it is)");
}

}  // namespace

void* cuda_plugin_symbol(const char* symbol) {
  PluginState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.attempted) load(s);
  return s.handle == nullptr ? nullptr : dlsym(s.handle, symbol);
}

std::string cuda_plugin_error() {
  PluginState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return s.error;
}

bool cuda_plugin_loaded() { return state().loaded.load(std::memory_order_acquire); }

}  // namespace noeira

#endif  // NOEIRA_HAVE_CUDA
