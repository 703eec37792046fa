#include "loss/target_loss.hpp"

#include "kernels/error.hpp"

namespace noeira {

TargetLossFactory target_loss_factory(LossChoice choice) {
  if (choice == LossChoice::Auto || choice == LossChoice::Mse) {
    return [] {
      return std::make_unique<RowTargetLoss<MSELoss, 1, true>>("MSELoss");
    };
  }
  if (choice == LossChoice::GaussianNll) {
    return [] {
      return std::make_unique<RowTargetLoss<GaussianNLLLoss, 2, false>>("GaussianNLLLoss");
    };
  }
  throw InputError(detail::concat("--loss ", kLossNames.name_of(choice),
                                  " is no loss of float targets (mse or gaussian-nll)"));
}

}  // namespace noeira
