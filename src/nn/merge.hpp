#pragma once
// The merge leaves, where branches of a network meet (a ComputeGraph's merge nodes, Parallel's
// concatenation). No parameters; multi-input convention of core/module.hpp: forward(ctx, x0,
// x1, ...), vjp returns dx0 and input_grad(i) dxi, InputGrad::Skip skips them all.
//
//   Add<D, N>        y = x0 + x1 + ... + x(N-1), every input [rows..., D] of the same shape
//   Concat<W0, ...>  y = [x0 | x1 | ...] along the last dimension (x0's columns first); the
//                    inputs [rows..., Wi] have the same rows, y is [rows..., ΣWi]
//
// input_dims lists each input's width, for the ComputeGraph's check of its edges.
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/module.hpp"
#include "nn/input_grads.hpp"

namespace noeira {

namespace detail {
// Column offset of each block in a concatenation of blocks of these widths.
template <std::size_t N>
constexpr std::array<std::int64_t, N> prefix_offsets(const std::array<std::int64_t, N>& widths) {
  std::array<std::int64_t, N> off{};
  std::int64_t at = 0;
  for (std::size_t i = 0; i < N; ++i) {
    off[i] = at;
    at += widths[i];
  }
  return off;
}
}  // namespace detail

template <std::int64_t D, std::size_t N = 2>
class Add {
  static_assert(N >= 2, "Add<D, N>: a sum of at least two inputs");
  static_assert(D > 0, "Add<D, N>: empty rows");

 public:
  static constexpr int arity = static_cast<int>(N);
  static constexpr std::int64_t in_dim = D;
  static constexpr std::int64_t out_dim = D;

  explicit Add(const Init&) {}

  // Summed in input order, so that the sum's rounding is fixed by the inputs alone.
  template <std::same_as<Tensor>... Xs>
    requires(sizeof...(Xs) == N)
  const Tensor& forward(Context& ctx, const Xs&... xs) {
    const std::array<const Tensor*, N> in{&xs...};
    check_input_rows(ctx, *in[0], D, "Add");
    for (std::size_t i = 1; i < N; ++i) {
      if (in[i]->shape() != in[0]->shape() || in[i]->target() != ctx.target) {
        throw InputError(detail::concat("Add: input ", i, " ", shape_string(in[i]->shape()),
                                        " on ", to_string(in[i]->target()), ", input 0 ",
                                        shape_string(in[0]->shape()), " on ",
                                        to_string(ctx.target)));
      }
    }
    y_.resize(in[0]->shape(), ctx.target);
    const std::int64_t n = y_.numel();
    ctx.k->add(ctx.stream, y_.data(), in[0]->data(), in[1]->data(), n);
    for (std::size_t i = 2; i < N; ++i) ctx.k->accumulate(ctx.stream, y_.data(), in[i]->data(), n);
    return y_;
  }

  // Every input's gradient is dy itself: shared, not copied, so it is valid while the caller's dy
  // is (a module's output gradient lives in its consumer's buffer until that consumer's next vjp).
  const Tensor& vjp(Context&, const Tensor& dy, InputGrad input_grad) {
    have_grads_ = input_grad == InputGrad::Compute;
    dx_ = have_grads_ ? dy : Tensor{};
    return dx_;
  }

  const Tensor& input_grad(int i) const {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) -> const Tensor& {
      return pick_input_grad("Add", have_grads_, i, {(static_cast<void>(Is), &dx_)...});
    }(std::make_index_sequence<N>{});
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  bool have_grads_ = false;
  Tensor y_;   // [rows..., D] the sum
  Tensor dx_;  // dy of the last vjp, shared
};

template <std::int64_t... Ws>
class Concat {
  static constexpr std::size_t count = sizeof...(Ws);
  static_assert(count > 0, "Concat needs at least one input");
  static_assert(((Ws > 0) && ...), "Concat: every input needs columns");

 public:
  static constexpr std::array<std::int64_t, count> input_dims = {Ws...};
  static constexpr std::array<std::int64_t, count> offsets = detail::prefix_offsets(input_dims);
  static constexpr int arity = static_cast<int>(count);
  static constexpr std::int64_t in_dim = input_dims[0];
  static constexpr std::int64_t out_dim = (Ws + ...);

  explicit Concat(const Init&) {}

  template <std::same_as<Tensor>... Xs>
    requires(sizeof...(Xs) == count)
  const Tensor& forward(Context& ctx, const Xs&... xs) {
    const std::array<const Tensor*, count> in{&xs...};
    const std::int64_t rows = check_input_rows(ctx, *in[0], in_dim, "Concat");
    for (std::size_t i = 1; i < count; ++i) {
      if (check_input_rows(ctx, *in[i], input_dims[i], "Concat") != rows) {
        throw InputError(detail::concat("Concat: input ", i, " ", shape_string(in[i]->shape()),
                                        " has other rows than input 0 ",
                                        shape_string(in[0]->shape())));
      }
    }
    y_.resize(output_shape(in[0]->shape(), in_dim, out_dim), ctx.target);
    for (std::size_t i = 0; i < count; ++i) {
      ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data() + offsets[i], out_dim,
                          in[i]->data(), input_dims[i], rows, input_dims[i]);
    }
    return y_;
  }

  // Each input's gradient is its block of dy's columns, made dense.
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    have_grads_ = input_grad == InputGrad::Compute;
    if (!have_grads_) return empty_;
    const std::int64_t rows = dy.numel() / out_dim;
    for (std::size_t i = 0; i < count; ++i) {
      dxs_[i].resize(output_shape(dy.shape(), out_dim, input_dims[i]), ctx.target);
      ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, dxs_[i].data(), input_dims[i],
                          dy.data() + offsets[i], out_dim, rows, input_dims[i]);
    }
    return dxs_[0];
  }

  const Tensor& input_grad(int i) const {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) -> const Tensor& {
      return pick_input_grad("Concat", have_grads_, i, {&dxs_[Is]...});
    }(std::make_index_sequence<count>{});
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  bool have_grads_ = false;
  Tensor y_;                       // [rows, out_dim]
  std::array<Tensor, count> dxs_;  // [rows, input_dims[i]] input i's gradient
  Tensor empty_;
};

}  // namespace noeira
