#include "loss/target_loss.hpp"

#include "kernels/error.hpp"

namespace noeira {

TargetLossFactory target_loss_factory(std::string_view name) {
  if (name == "mse") {
    return [] {
      return std::make_unique<RowTargetLoss<MSELoss, 1, true>>("MSELoss");
    };
  }
  if (name == "gaussian-nll") {
    return [] {
      return std::make_unique<RowTargetLoss<GaussianNLLLoss, 2, false>>("GaussianNLLLoss");
    };
  }
  throw InputError(detail::concat("--loss '", name,
                                  "' is no loss of float targets (mse or gaussian-nll)"));
}

}  // namespace noeira
