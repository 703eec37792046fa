#pragma once
// The loss of a regression: the model's outputs against float targets [rows, d]. The built-in ones
// are the mean squared error (--loss mse, the default for float targets) and the Gaussian negative
// log-likelihood (--loss gaussian-nll: d means, then d variances). A program's own loss derives
// from TargetLoss and is named with its model (train/model_entry.hpp, docs/library.md).
//
// The contract, which the trainer relies on:
//   - forward_backward ADDS the sum over rows of the per-row loss to *loss_sum, one double in
//     ctx.target's memory, and writes grad() = grad_scale · d(sum)/d(pred), [rows, outputs];
//     the trainer passes grad_scale = 1/global rows, so the step's loss is the batch mean;
//   - forward adds the same sum without a gradient (evaluation);
//   - a row's loss depends on that row alone (ranks split a batch by rows);
//   - the first d of a row's outputs are the prediction, which the test RMSE and R² score.
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

#include "core/context.hpp"
#include "core/names.hpp"
#include "core/tensor.hpp"
#include "loss/gaussian_nll.hpp"
#include "loss/mse.hpp"

namespace noeira {

class TargetLoss {
 public:
  virtual ~TargetLoss() = default;

  // For messages and the run header: "MSELoss".
  virtual std::string_view name() const = 0;
  // The model's outputs per target: 1 (a prediction), 2 (a prediction and its variance).
  virtual std::int64_t outputs_per_target() const { return 1; }
  // Whether the loss is the squared error of the prediction itself (its sum then gives the RMSE
  // and R² without another look at the outputs).
  virtual bool is_squared_error() const { return false; }

  virtual void forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                                float grad_scale, double* loss_sum) = 0;
  virtual void forward(Context& ctx, const Tensor& pred, const Tensor& target,
                       double* loss_sum) = 0;
  virtual const Tensor& grad() const = 0;
};

// A row loss (loss/row_loss.hpp) as a TargetLoss.
template <class L, std::int64_t OutputsPerTarget, bool SquaredError>
class RowTargetLoss final : public TargetLoss {
 public:
  explicit RowTargetLoss(std::string_view name) : name_(name) {}

  std::string_view name() const override { return name_; }
  std::int64_t outputs_per_target() const override { return OutputsPerTarget; }
  bool is_squared_error() const override { return SquaredError; }
  void forward_backward(Context& ctx, const Tensor& pred, const Tensor& target, float grad_scale,
                        double* loss_sum) override {
    loss_.forward_backward(ctx, pred, target, grad_scale, loss_sum);
  }
  void forward(Context& ctx, const Tensor& pred, const Tensor& target, double* loss_sum) override {
    loss_.forward(ctx, pred, target, loss_sum);
  }
  const Tensor& grad() const override { return loss_.grad(); }

 private:
  std::string_view name_;
  L loss_;
};

// The loss a run is told to use (--loss): the targets' own (auto: cross-entropy for class labels,
// MSE for float targets), or one named.
enum class LossChoice : std::uint8_t { Auto, CrossEntropy, Mse, GaussianNll };
inline constexpr NameTable<LossChoice, 4> kLossNames{{{{LossChoice::Auto, "auto"},
                                                       {LossChoice::CrossEntropy, "cross-entropy"},
                                                       {LossChoice::Mse, "mse"},
                                                       {LossChoice::GaussianNll, "gaussian-nll"}}},
                                                     "--loss"};

// Makes one loss per use (each rank and each evaluation its own buffers).
using TargetLossFactory = std::function<std::unique_ptr<TargetLoss>()>;

// The built-in losses of float targets: Mse or GaussianNll (Auto: Mse); CrossEntropy, which takes
// class labels, is an InputError.
TargetLossFactory target_loss_factory(LossChoice choice);

// A program's own loss type L (default-constructible, derived from TargetLoss); none for void.
template <class L>
TargetLossFactory own_loss_factory() {
  if constexpr (std::is_void_v<L>) {
    return {};
  } else {
    static_assert(std::is_base_of_v<TargetLoss, L> && std::is_default_constructible_v<L>,
                  "a model's own loss derives from noeira::TargetLoss and is default-constructible");
    return [] { return std::unique_ptr<TargetLoss>(std::make_unique<L>()); };
  }
}

}  // namespace noeira
