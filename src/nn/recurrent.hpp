#pragma once
// Recurrent layers over batch-first sequences [B, T, In] -> [B, T, Hidden]: LSTM and GRU with
// PyTorch's equations, gate order, parameter layout and initializer (torch.nn.LSTM / GRU with
// batch_first=True, one layer, one direction, zero initial state), so that a model maps onto
// PyTorch's by names alone (`weight_ih` here is `weight_ih_l0` there). Stack layers with
// Sequential for num_layers > 1.
//
// Work per forward: one GEMM for the input projection of all T steps (linear_forward), then per
// step one [B, H] x [H, G·H] GEMM for the recurrence and one fused pointwise kernel for the cell
// (recurrent_step_forward). The backward runs the steps in reverse — pointwise kernel, then the
// [B, G·H] x [G·H, H] GEMM that carries dh to the step before — and then makes every parameter
// gradient and the input gradient with two linear_backward calls over all B·T rows: the
// recurrence's weights see the previous step's h through a copy of the outputs shifted by one
// step (h_prev_, zero at t = 0), which the forward writes alongside the output.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

template <RecurrentCell Cell, std::int64_t In, std::int64_t Hidden>
class Recurrent {
  static_assert(In > 0 && Hidden > 0, "Recurrent: widths must be positive");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In;
  static constexpr std::int64_t out_dim = Hidden;
  static constexpr std::int64_t gates = Cell == RecurrentCell::Lstm ? 4 : 3;
  static constexpr std::int64_t gate_width = gates * Hidden;
  static constexpr std::string_view name = Cell == RecurrentCell::Lstm ? "LSTM" : "GRU";

  // U(±1/sqrt(Hidden)) for every weight and bias, PyTorch's reset_parameters; biases not decayed.
  explicit Recurrent(const Init& init)
      : weight_ih_(init.uniform("weight_ih", {gate_width, In}, bound(), Decay::Apply)),
        weight_hh_(init.uniform("weight_hh", {gate_width, Hidden}, bound(), Decay::Apply)),
        bias_ih_(init.uniform("bias_ih", {gate_width}, bound(), Decay::Skip)),
        bias_hh_(init.uniform("bias_hh", {gate_width}, bound(), Decay::Skip)) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const SeqShape s = check_sequence_input(ctx, x, In, name);
    x_ = &x;
    shape_ = s;
    const std::int64_t rows = s.batch * s.seq;
    gates_.resize({s.batch, s.seq, gate_width}, ctx.target);
    y_.resize({s.batch, s.seq, Hidden}, ctx.target);
    h_prev_.resize({s.batch, s.seq, Hidden}, ctx.target);
    // Step 0's h_prev is the zero state; the steps write every other slot.
    ctx.k->fill(ctx.stream, h_prev_.data(), 0.0f, h_prev_.numel());
    if constexpr (Cell == RecurrentCell::Lstm) {
      c_.resize({s.batch, s.seq, Hidden}, ctx.target);
    } else {
      hidden_gates_.resize({s.batch, s.seq, gate_width}, ctx.target);
    }
    ctx.k->linear_forward(ctx.stream, Activation::Identity, gates_.data(), nullptr, x.data(),
                          weight_ih_.val.data(), bias_ih_.val.data(), rows, In, gate_width);
    for (std::int64_t t = 0; t < s.seq; ++t) {
      const RecurrentStep step = at_step(t);
      if (t > 0) {
        // LSTM: gates += h_prev · W_hhᵀ; GRU: hidden_gates = h_prev · W_hhᵀ (kept apart: its n
        // part is gated by r).
        constexpr bool lstm = Cell == RecurrentCell::Lstm;
        product(ctx, true, gate_width, Hidden, lstm ? 1.0f : 0.0f,
                {step.h_prev, s.seq * Hidden}, {weight_hh_.val.data(), Hidden},
                {lstm ? step.gates : step.hidden_gates, s.seq * gate_width});
      }
      ctx.k->recurrent_step_forward(ctx.stream, step);
    }
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const SeqShape s = shape_;
    if (dy.numel() != s.batch * s.seq * Hidden) {
      throw InputError(detail::concat(name, ": the output gradient has shape ",
                                      shape_string(dy.shape()), ", the output [", s.batch, ", ",
                                      s.seq, ", ", Hidden, "]"));
    }
    const std::int64_t rows = s.batch * s.seq;
    dgates_.resize({s.batch, s.seq, gate_width}, ctx.target);
    if constexpr (Cell == RecurrentCell::Gru) {
      dhidden_gates_.resize({s.batch, s.seq, gate_width}, ctx.target);
    }
    // The recurrence's weight sees dgates for the LSTM, its own gradient for the GRU.
    Tensor& dhidden = Cell == RecurrentCell::Lstm ? dgates_ : dhidden_gates_;
    dh_.resize({s.batch, Hidden}, ctx.target);
    ctx.k->fill(ctx.stream, dh_.data(), 0.0f, dh_.numel());
    if constexpr (Cell == RecurrentCell::Lstm) {
      dc_.resize({s.batch, Hidden}, ctx.target);
      ctx.k->fill(ctx.stream, dc_.data(), 0.0f, dc_.numel());
    }
    for (std::int64_t t = s.seq - 1; t >= 0; --t) {
      RecurrentStep step = at_step(t);
      step.dy = dy.data() + t * Hidden;
      step.dh = dh_.data();
      step.dc = Cell == RecurrentCell::Lstm ? dc_.data() : nullptr;
      step.dgates = dgates_.data() + t * gate_width;
      step.dhidden_gates =
          Cell == RecurrentCell::Gru ? dhidden_gates_.data() + t * gate_width : nullptr;
      ctx.k->recurrent_step_backward(ctx.stream, step);
      // dh_{t-1} += d(h_prev · W_hhᵀ) · W_hh; nothing flows before step 0 (the zero state).
      if (t > 0) {
        product(ctx, false, Hidden, gate_width, 1.0f,
                {dhidden.data() + t * gate_width, s.seq * gate_width},
                {weight_hh_.val.data(), Hidden}, {dh_.data(), Hidden});
      }
    }
    // Parameter gradients, then the input gradient, over all B·T rows at once.
    ctx.k->linear_backward(ctx.stream, Activation::Identity, ctx.grad_mode, nullptr,
                           weight_hh_.grd.data(), bias_hh_.grd.data(), nullptr, dhidden.data(),
                           h_prev_.data(), weight_hh_.val.data(), nullptr, nullptr, rows, Hidden,
                           gate_width);
    float* dx = nullptr;
    if (input_grad == InputGrad::Compute) {
      dx_.resize(x_->shape(), ctx.target);
      dx = dx_.data();
    }
    ctx.k->linear_backward(ctx.stream, Activation::Identity, ctx.grad_mode, dx,
                           weight_ih_.grd.data(), bias_ih_.grd.data(), nullptr, dgates_.data(),
                           x_->data(), weight_ih_.val.data(), nullptr, nullptr, rows, In,
                           gate_width);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight_ih"), weight_ih_);
    visit(join_name(prefix, "weight_hh"), weight_hh_);
    visit(join_name(prefix, "bias_ih"), bias_ih_);
    visit(join_name(prefix, "bias_hh"), bias_hh_);
  }

 private:
  static float bound() { return 1.0f / std::sqrt(static_cast<float>(Hidden)); }

  // The step-t slices of the forward's tensors; at t = 0 the previous state and the recurrent
  // product are null, the zero initial state (RecurrentStep).
  RecurrentStep at_step(std::int64_t t) {
    RecurrentStep step;
    step.cell = Cell;
    step.batch = shape_.batch;
    step.steps = shape_.seq;
    step.hidden = Hidden;
    step.gates = gates_.data() + t * gate_width;
    step.bias_hh = bias_hh_.val.data();
    step.h = y_.data() + t * Hidden;
    step.h_next_prev = t + 1 < shape_.seq ? h_prev_.data() + (t + 1) * Hidden : nullptr;
    step.h_prev = t > 0 ? h_prev_.data() + t * Hidden : nullptr;
    if constexpr (Cell == RecurrentCell::Lstm) {
      step.c = c_.data() + t * Hidden;
      step.c_prev = t > 0 ? c_.data() + (t - 1) * Hidden : nullptr;
    } else {
      step.hidden_gates = t > 0 ? hidden_gates_.data() + t * gate_width : nullptr;
    }
    return step;
  }

  struct Operand {
    const float* data;
    std::int64_t ld;
  };
  struct Output {
    float* data;
    std::int64_t ld;
  };
  // C [batch, n] = A [batch, k] · op(B) + beta · C: one matrix product of a step's rows.
  void product(Context& ctx, bool trans_b, std::int64_t n, std::int64_t k, float beta, Operand a,
               Operand b, Output c) const {
    ctx.k->batched_matmul(ctx.stream, {.trans_a = false,
                                       .trans_b = trans_b,
                                       .m = shape_.batch,
                                       .n = n,
                                       .k = k,
                                       .alpha = 1.0f,
                                       .beta = beta,
                                       .a = {a.data, a.ld, 0, 0},
                                       .b = {b.data, b.ld, 0, 0},
                                       .c = {c.data, c.ld, 0, 0}});
  }

  Param weight_ih_;  // [G·Hidden, In]
  Param weight_hh_;  // [G·Hidden, Hidden]
  Param bias_ih_;    // [G·Hidden]
  Param bias_hh_;    // [G·Hidden]
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  SeqShape shape_;
  Tensor gates_;          // [B, T, G·H] activated gates
  Tensor hidden_gates_;   // GRU [B, T, 3H] h_prev · W_hhᵀ, its n part + b_hn after the step
  Tensor c_;              // LSTM [B, T, H] cell states
  Tensor y_;              // [B, T, H] outputs h_t
  Tensor h_prev_;         // [B, T, H] h_{t-1}: zero, then y_ shifted by one step
  Tensor dgates_;         // [B, T, G·H]
  Tensor dhidden_gates_;  // GRU [B, T, 3H]
  Tensor dh_, dc_;        // [B, H] carries through time
  Tensor dx_;
  Tensor empty_;
};

template <std::int64_t In, std::int64_t Hidden>
using LSTM = Recurrent<RecurrentCell::Lstm, In, Hidden>;
template <std::int64_t In, std::int64_t Hidden>
using GRU = Recurrent<RecurrentCell::Gru, In, Hidden>;

}  // namespace noeira
