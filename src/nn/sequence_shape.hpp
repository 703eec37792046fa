#pragma once
// Shape checks of the modules that need the sequence structure of their input (attention, RoPE):
// a [batch, seq, width] tensor on the context's target. Each error names the module and the input.
#include <cstdint>
#include <string_view>

#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

struct SeqShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
};

// Checks a rank-3 F32 [batch, seq, width] input with batch, seq >= 1; returns batch and seq.
// bf16_allowed: BF16 too (a module whose input only products read: core/bf16_activation.hpp).
SeqShape check_sequence_input(const Context& ctx, const Tensor& x, std::int64_t width,
                              std::string_view module, std::string_view input = "input",
                              bool bf16_allowed = false);

// Checks padding lengths: I32 [batch] on the context's target. On the CPU (host memory, so the
// check is free) every length must lie in [0, max_len]; on CUDA the kernels clamp to that range.
void check_key_lengths(const Context& ctx, const Tensor& lengths, std::int64_t batch,
                       std::int64_t max_len, std::string_view module);

}  // namespace noeira
