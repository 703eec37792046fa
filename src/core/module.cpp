#include "core/module.hpp"

#include "kernels/error.hpp"

namespace noeira {

InputRows input_rows(const Shape& shape, std::int64_t in_dim) {
  std::int64_t row = 1;
  int k = static_cast<int>(shape.size());
  while (row < in_dim && k > 0) row *= shape[static_cast<std::size_t>(--k)];
  if (row != in_dim || k == 0) return {};
  std::int64_t rows = 1;
  for (int i = 0; i < k; ++i) rows *= shape[static_cast<std::size_t>(i)];
  return {rows, k};
}

std::int64_t check_input_rows(const Context& ctx, const Tensor& x, std::int64_t in_dim,
                              std::string_view module) {
  const InputRows r = x.defined() ? input_rows(x.shape(), in_dim) : InputRows{};
  if (r.leading < 0 || r.rows <= 0) {
    throw InputError(detail::concat(module, ": expected an input of [rows..., ", in_dim,
                                    "] elements, got shape ",
                                    x.defined() ? shape_string(x.shape()) : "(none)"));
  }
  if (x.target() != ctx.target) {
    throw InputError(detail::concat(module, ": the input is on ", to_string(x.target()),
                                    " but the context runs on ", to_string(ctx.target)));
  }
  return r.rows;
}

Shape output_shape(const Shape& in, std::int64_t in_dim, std::int64_t out_dim) {
  const InputRows r = input_rows(in, in_dim);
  NOEIRA_CHECK(r.leading >= 0, "output_shape: ", shape_string(in), " has no rows of ", in_dim);
  Shape out(in.begin(), in.begin() + r.leading);
  out.push_back(out_dim);
  return out;
}

}  // namespace noeira
