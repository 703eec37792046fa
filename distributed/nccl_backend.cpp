// nccl_process_group.hpp's functions, forwarded to the CUDA plugin that implements them.
#ifdef NOEIRA_HAVE_CUDA

#include "distributed/nccl_backend.hpp"

#include "distributed/nccl_process_group.hpp"
#include "kernels/cuda_plugin.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {

// The plugin's NCCL entry; nullptr when the plugin cannot be loaded.
const NcclBackendEntry* nccl_backend() {
  static const NcclBackendEntry* const entry =
      cuda_plugin_entry<NcclBackendEntry>(kNcclBackendEntrySymbol);
  return entry;
}

const NcclBackendEntry& loaded_nccl_backend() {
  const NcclBackendEntry* entry = nccl_backend();
  if (entry == nullptr) throw LibraryError("NCCL process group: " + cuda_plugin_error());
  return *entry;
}

}  // namespace

int visible_cuda_devices() {
  const NcclBackendEntry* entry = nccl_backend();
  return entry == nullptr ? 0 : entry->visible_devices();
}

int select_local_device(MPI_Comm comm) { return loaded_nccl_backend().select_local_device(comm); }

std::unique_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options,
                                                      Stream compute_stream, MPI_Comm comm) {
  return loaded_nccl_backend().make_group(options, compute_stream, comm);
}

}  // namespace noeira::dist

#endif  // NOEIRA_HAVE_CUDA
