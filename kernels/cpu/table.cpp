#include "kernels/cpu/cpu_kernels.hpp"

namespace noeira::cpu {

// Host memory is the CPU target's live memory: upload and download are plain copies.
extern const KernelTable table = {
    .target = Target::Cpu,
#include "kernels/backend_table.inc"
};

}  // namespace noeira::cpu
