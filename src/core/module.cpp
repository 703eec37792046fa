#include "core/module.hpp"

#include "kernels/error.hpp"

namespace noeira {

void check_input_rows(const Context& ctx, const Tensor& x, std::int64_t in_dim,
                      std::string_view module) {
  if (!x.defined() || x.rank() == 0 || x.dim(0) <= 0 || x.row_size() != in_dim) {
    throw InputError(detail::concat(module, ": expected an input of [rows, ", in_dim,
                                    "] elements, got shape ", shape_string(x.shape())));
  }
  if (x.target() != ctx.target) {
    throw InputError(detail::concat(module, ": the input is on ", to_string(x.target()),
                                    " but the context runs on ", to_string(ctx.target)));
  }
}

}  // namespace noeira
