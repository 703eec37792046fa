#pragma once
// The NCCL backend's entry in the CUDA plugin (kernels/cuda_plugin.hpp): the functions of
// nccl_process_group.hpp as the plugin implements them (nccl_process_group.cpp), reached from the
// binary through nccl_backend.cpp, which links neither NCCL nor CUDA.
#ifdef NOEIRA_HAVE_CUDA

#include <mpi.h>

#include <memory>

#include "distributed/process_group.hpp"
#include "kernels/target.hpp"

namespace noeira::dist {

struct NcclBackendEntry {
  int (*visible_devices)();
  int (*select_local_device)(MPI_Comm comm);
  std::unique_ptr<ProcessGroup> (*make_group)(const ProcessGroupOptions& options,
                                              Stream compute_stream, MPI_Comm comm);
};

}  // namespace noeira::dist

#endif  // NOEIRA_HAVE_CUDA
