#pragma once
// The Linear family: y = act(x · Wᵀ + b) as one fused step (GEMM plus a fused epilogue on the CPU,
// a cuBLASLt epilogue on CUDA). Linear is the Identity member; Linear followed by a ReLU leaf is
// two modules, LinearReLU is one.
//
// Its input only products read (x · Wᵀ, and W's gradient), so it takes an activation held in
// bfloat16 as well as fp32 (core/bf16_activation.hpp); with an activation whose derivative reads
// the pre-activation (GELU, SiLU, ...) it can hold its own output in bfloat16 for a consumer that
// only multiplies it.
#include <cstdint>
#include <string>

#include "core/bf16_activation.hpp"
#include "core/module.hpp"

namespace noeira {

template <std::int64_t In, std::int64_t Out, Activation Act = Activation::Identity>
class LinearAct {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In;
  static constexpr std::int64_t out_dim = Out;
  static constexpr Activation activation = Act;
  static constexpr bool input_is_product_operand = true;

  explicit LinearAct(const Init& init)
      : weight_(init.weight("weight", {Out, In}, In, Out)), bias_(init.constant("bias", {Out}, 0.0f)) {}

  // Its vjp reads the pre-activation, never the output: the output may be bits.
  void hold_output_in_bf16()
    requires(activation_needs_input(Act))
  {
    y_.hold();
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, In, "Linear");
    x_ = &x;
    const Shape shape = output_shape(x.shape(), In, Out);
    Tensor& y = y_.resize(ctx, shape);
    float* pre = nullptr;
    if constexpr (activation_needs_input(Act)) {
      pre_.resize(shape, ctx.target);
      pre = pre_.data();
    }
    ctx.k->linear_forward_typed(ctx.stream, Act, activation_data(y), y.dtype(), pre,
                                activation_data(x), x.dtype(), weight_.val.data(),
                                bias_.val.data(), rows, In, Out);
    return y;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / Out;
    float* dpre = nullptr;
    if constexpr (Act != Activation::Identity) {
      dpre_.resize(dy.shape(), ctx.target);
      dpre = dpre_.data();
    }
    float* dx = nullptr;
    if (input_grad == InputGrad::Compute) {
      dx_.resize(x_->shape(), ctx.target);
      dx = dx_.data();
    }
    const float* pre = nullptr;
    if constexpr (activation_needs_input(Act)) pre = pre_.data();
    // Bits out: the derivative reads pre, which stands in for the output it does not read.
    const float* y = y_.bits() ? pre : y_.values().data();
    ctx.k->linear_backward_typed(ctx.stream, Act, ctx.grad_mode, dx, weight_.grd.data(),
                                 bias_.grd.data(), dpre, dy.data(), activation_data(*x_),
                                 x_->dtype(), weight_.val.data(), y, pre, rows, In, Out);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    y_.visit(visit);
    visit(join_name(prefix, "weight"), weight_);
    visit(join_name(prefix, "bias"), bias_);
  }

 private:
  Param weight_;  // [Out, In]
  Param bias_;    // [Out]
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  ProducerOutput y_;  // [..., Out] output (rows = all leading dimensions), fp32 or bits
  Tensor pre_;    // [..., Out] pre-activation, only when the derivative needs it
  Tensor dpre_;   // [..., Out] scratch for dy · act'
  Tensor dx_;     // [..., In] input gradient
  Tensor empty_;
};

template <std::int64_t In, std::int64_t Out>
using Linear = LinearAct<In, Out, Activation::Identity>;
template <std::int64_t In, std::int64_t Out>
using LinearReLU = LinearAct<In, Out, Activation::ReLU>;
template <std::int64_t In, std::int64_t Out>
using LinearTanh = LinearAct<In, Out, Activation::Tanh>;
template <std::int64_t In, std::int64_t Out>
using LinearSigmoid = LinearAct<In, Out, Activation::Sigmoid>;
template <std::int64_t In, std::int64_t Out>
using LinearGELU = LinearAct<In, Out, Activation::GeluTanh>;
template <std::int64_t In, std::int64_t Out>
using LinearSiLU = LinearAct<In, Out, Activation::SiLU>;

}  // namespace noeira
