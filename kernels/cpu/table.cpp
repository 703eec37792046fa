#include "kernels/cpu/cpu_kernels.hpp"

namespace noeira::cpu {

// Host memory is the CPU target's live memory: upload and download are plain copies.
extern const KernelTable table = {
    .target = Target::Cpu,
#include "kernels/backend_table.inc"
};

// The same kernels, the matrix products with bf16 operands.
extern const KernelTable bf16_table = with_bf16_products(table);

}  // namespace noeira::cpu
