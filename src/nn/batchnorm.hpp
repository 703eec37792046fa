#pragma once
// Batch normalization: each channel normalized by the statistics of the batch in training and by
// running estimates in evaluation, then scaled and shifted. BatchNorm1D<C> normalizes rows of C
// features ([rows, C]); BatchNorm2D<image> the channels of an image batch [rows, C, H, W] over
// rows and pixels. PyTorch's defaults: eps 1e-5, momentum 0.1, the biased variance to normalize
// and the unbiased one for the running estimate (kernels/batchnorm_math.hpp has the formulas).
//
// Parameters "weight" (1) and "bias" (0), neither decayed. Buffers (core/module.hpp): state that
// is not a parameter, named as PyTorch names them: "running_mean" (0), "running_var" (1) and
// "num_batches_tracked" (a count of training batches, kept as a float: exact to 2^24 steps).
//
// Under data parallelism the context decides whose batch: with ctx.batch_stats set (the default,
// --batchnorm sync) the per-channel sums are summed over the ranks in forward (Σx, Σx², the
// count) and in vjp (Σdy, Σdy·xhat): the statistics are the global batch's, so N ranks train the model
// one rank trains (SyncBatchNorm). Without it (one rank, or --batchnorm local) each rank uses its
// own rows, as PyTorch's DDP does; the trainer then gives every rank rank 0's running estimates
// before it evaluates or saves them.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/module.hpp"
#include "kernels/batchnorm_math.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

template <std::int64_t Channels, std::int64_t Pixels>
class BatchNormChannels {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Channels * Pixels;
  static constexpr std::int64_t out_dim = Channels * Pixels;
  static constexpr float eps = 1e-5f;
  static constexpr float momentum = 0.1f;

  explicit BatchNormChannels(const Init& init)
      : weight_(init.constant("weight", {Channels}, 1.0f)),
        bias_(init.constant("bias", {Channels}, 0.0f)),
        running_mean_({Channels}, init.target()),
        running_var_(Tensor::from_host({Channels}, std::vector<float>(Channels, 1.0f),
                                       init.target())),
        batches_tracked_({1}, init.target()),
        moments_({batchnorm::moments_size(Channels)}, init.target(), DType::F64),
        local_sums_({batchnorm::grad_sums_size(Channels)}, init.target(), DType::F64),
        batch_sums_({batchnorm::grad_sums_size(Channels)}, init.target(), DType::F64) {}

  // The output has the input's shape.
  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, "BatchNorm");
    x_ = &x;
    y_.resize(x.shape(), ctx.target);
    mean_.resize({Channels}, ctx.target);
    rstd_.resize({Channels}, ctx.target);
    training_ = ctx.mode == Mode::Train;
    synchronized_ = training_ && ctx.batch_stats != nullptr;
    if (training_) {
      moments_.resize(moments_.shape(), ctx.target);
      // Stand-in rows count nowhere when the statistics are global; on their own they give the
      // output finite statistics but must not move the running estimates.
      const bool counted = !(synchronized_ && ctx.stand_in_rows);
      ctx.k->batchnorm_moments(ctx.stream, moments_.as<double>(), x.data(), counted, rows,
                               Channels, Pixels);
      if (synchronized_) {
        ctx.batch_stats->sum(moments_.as<double>(), static_cast<std::size_t>(moments_.numel()));
      }
      const bool update = (synchronized_ || !ctx.stand_in_rows) && !ctx.recomputing;
      ctx.k->batchnorm_statistics(ctx.stream, BatchNormSource::Batch, mean_.data(), rstd_.data(),
                                  running_mean_.data(), running_var_.data(),
                                  batches_tracked_.data(), moments_.as<double>(), Channels, eps,
                                  momentum, update);
    } else {
      ctx.k->batchnorm_statistics(ctx.stream, BatchNormSource::Running, mean_.data(),
                                  rstd_.data(), running_mean_.data(), running_var_.data(),
                                  batches_tracked_.data(), nullptr, Channels, eps, momentum,
                                  false);
    }
    ctx.k->batchnorm_forward(ctx.stream, y_.data(), x.data(), mean_.data(), rstd_.data(),
                             weight_.val.data(), bias_.val.data(), rows, Channels, Pixels);
    return y_;
  }

  // After a training forward, the gradient through the batch statistics; after an evaluation
  // forward, the statistics are constants (dx = dy · gamma · rstd).
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / in_dim;
    local_sums_.resize(local_sums_.shape(), ctx.target);
    batch_sums_.resize(batch_sums_.shape(), ctx.target);
    ctx.k->batchnorm_grad_sums(ctx.stream, local_sums_.as<double>(), dy.data(), x_->data(),
                               mean_.data(), rstd_.data(), rows, Channels, Pixels);
    const double* batch_sums = local_sums_.as<double>();
    if (!training_) {
      batch_sums_.zero();
      batch_sums = batch_sums_.as<double>();
    } else if (synchronized_) {
      ctx.k->copy(ctx.stream, batch_sums_.as<double>(), local_sums_.as<double>(),
                  static_cast<std::size_t>(batch_sums_.numel()) * sizeof(double));
      ctx.batch_stats->sum(batch_sums_.as<double>(),
                           static_cast<std::size_t>(batch_sums_.numel()));
      batch_sums = batch_sums_.as<double>();
    }
    float* dx = nullptr;
    if (input_grad == InputGrad::Compute) {
      dx_.resize(dy.shape(), ctx.target);
      dx = dx_.data();
    }
    ctx.k->batchnorm_backward(ctx.stream, ctx.grad_mode, dx, weight_.grd.data(), bias_.grd.data(),
                              local_sums_.as<double>(), batch_sums, moments_.as<double>(),
                              dy.data(), x_->data(), mean_.data(), rstd_.data(),
                              weight_.val.data(), rows, Channels, Pixels);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
    visit(join_name(prefix, "bias"), bias_);
    visit_buffer(visit, prefix, "running_mean", running_mean_);
    visit_buffer(visit, prefix, "running_var", running_var_);
    visit_buffer(visit, prefix, "num_batches_tracked", batches_tracked_);
  }

 private:
  Param weight_;  // [C] scale (gamma)
  Param bias_;    // [C] shift (beta)
  Tensor running_mean_;     // [C] buffer
  Tensor running_var_;      // [C] buffer
  Tensor batches_tracked_;  // [1] buffer
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  bool training_ = true;       // of the last forward
  bool synchronized_ = false;  // the last forward's statistics were the global batch's
  Tensor moments_;     // [2C + 1] F64: Σx, Σx², count (summed over ranks when synchronized)
  Tensor local_sums_;  // [2C] F64: Σdy, Σdy·xhat of this rank's rows
  Tensor batch_sums_;  // [2C] F64: the same over the batch of the statistics
  Tensor mean_;        // [C] the statistics the forward used
  Tensor rstd_;        // [C]
  Tensor y_;
  Tensor dx_;
  Tensor empty_;
};

template <std::int64_t C>
class BatchNorm1D : public BatchNormChannels<C, 1> {
 public:
  using BatchNormChannels<C, 1>::BatchNormChannels;
};

template <ImageShape In>
class BatchNorm2D : public BatchNormChannels<In.channels, In.pixels()> {
 public:
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image = In;
  using BatchNormChannels<In.channels, In.pixels()>::BatchNormChannels;
};

}  // namespace noeira
