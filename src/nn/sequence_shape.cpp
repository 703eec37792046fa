#include "nn/sequence_shape.hpp"

#include <cstdint>

#include "core/error.hpp"
#include "kernels/error.hpp"

namespace noeira {

namespace {

void check_target(const Context& ctx, const Tensor& t, std::string_view module,
                  std::string_view input) {
  if (t.target() != ctx.target) {
    throw InputError(detail::concat(module, ": the ", input, " is on ", to_string(t.target()),
                                    " but the context runs on ", to_string(ctx.target)));
  }
}

}  // namespace

SeqShape check_sequence_input(const Context& ctx, const Tensor& x, std::int64_t width,
                              std::string_view module, std::string_view input,
                              bool bf16_allowed) {
  const bool dtype_ok = x.dtype() == DType::F32 || (bf16_allowed && x.dtype() == DType::BF16);
  if (!x.defined() || x.rank() != 3 || x.dim(0) <= 0 || x.dim(1) <= 0 || x.dim(2) != width ||
      !dtype_ok) {
    throw InputError(detail::concat(module, ": expected the ", input, " as an f32",
                                    bf16_allowed ? " or bf16" : "", " [batch, seq, ", width,
                                    "] tensor, got shape ",
                                    x.defined() ? shape_string(x.shape()) : "(none)",
                                    x.defined() ? " of " : "",
                                    x.defined() ? to_string(x.dtype()) : ""));
  }
  check_target(ctx, x, module, input);
  return SeqShape{x.dim(0), x.dim(1)};
}

void check_key_lengths(const Context& ctx, const Tensor& lengths, std::int64_t batch,
                       std::int64_t max_len, std::string_view module) {
  if (!lengths.defined() || lengths.rank() != 1 || lengths.dim(0) != batch ||
      lengths.dtype() != DType::I32) {
    throw InputError(detail::concat(module, ": expected the key lengths as an i32 [", batch,
                                    "] tensor, got shape ",
                                    lengths.defined() ? shape_string(lengths.shape()) : "(none)"));
  }
  check_target(ctx, lengths, module, "key lengths");
  if (lengths.target() != Target::Cpu) return;
  const std::int32_t* len = lengths.ids();
  for (std::int64_t b = 0; b < batch; ++b) {
    if (len[b] < 0 || len[b] > max_len) {
      throw InputError(detail::concat(module, ": key length ", len[b], " of sequence ", b,
                                      " is outside [0, ", max_len, "]"));
    }
  }
}

}  // namespace noeira
