#pragma once
// A library handle per device, made on first use: cuBLAS's and cuDNN's handles each belong to the
// device current when they were created ("one cuBLAS handle needs to be created for each
// device"), so a thread that works on two devices needs one of each. Host-only.
#include <cuda_runtime_api.h>

#include <map>

#include "kernels/cuda/check.hpp"

namespace noeira::cuda {

inline int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// handles[device], made by create(&handle) (which throws on failure, leaving no entry) the
// first time this device asks.
template <class Handle, class Create>
Handle handle_for(std::map<int, Handle>& handles, int device, Create create) {
  auto [it, inserted] = handles.try_emplace(device, nullptr);
  if (inserted) {
    try {
      create(&it->second);
    } catch (...) {
      handles.erase(it);
      throw;
    }
  }
  return it->second;
}

}  // namespace noeira::cuda
