#include "loss/checks.hpp"

#include "kernels/error.hpp"

namespace noeira::loss_checks {

void matrix(const Context& ctx, const Tensor& t, std::string_view loss, std::string_view what) {
  if (!t.defined() || t.rank() != 2 || t.dim(0) <= 0 || t.dim(1) <= 0 ||
      t.dtype() != DType::F32) {
    throw InputError(detail::concat(loss, ": ", what,
                                    " must be a non-empty [rows, cols] f32 tensor, got shape ",
                                    t.defined() ? shape_string(t.shape()) : "(undefined)"));
  }
  if (t.target() != ctx.target) {
    throw InputError(detail::concat(loss, ": ", what, " lives on ", to_string(t.target()),
                                    " but the context runs on ", to_string(ctx.target)));
  }
}

void same_shape(const Context& ctx, const Tensor& pred, const Tensor& target,
                std::string_view loss, std::string_view pred_name, std::string_view target_name) {
  matrix(ctx, pred, loss, pred_name);
  matrix(ctx, target, loss, target_name);
  if (target.shape() != pred.shape()) {
    throw InputError(detail::concat(loss, ": ", target_name, " has shape ",
                                    shape_string(target.shape()), " but ", pred_name,
                                    " has shape ", shape_string(pred.shape())));
  }
}

void labels(const Context& ctx, const Tensor& labels, std::int64_t rows, std::int64_t classes,
            std::int64_t ignore_index, std::string_view loss) {
  if (!labels.defined() || labels.rank() != 1 || labels.dim(0) != rows ||
      labels.dtype() != DType::I32) {
    throw InputError(detail::concat(
        loss, ": labels must be [", rows, "] i32, got shape ",
        labels.defined() ? shape_string(labels.shape()) : "(undefined)"));
  }
  if (labels.target() != ctx.target) {
    throw InputError(detail::concat(loss, ": labels live on ", to_string(labels.target()),
                                    " but the context runs on ", to_string(ctx.target)));
  }
  // Device labels are not read back: that would make the host wait for the device every call.
  if (labels.target() != Target::Cpu) return;
  const std::int32_t* host = labels.ids();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (host[r] != ignore_index && (host[r] < 0 || host[r] >= classes)) {
      throw InputError(detail::concat(loss, ": label ", host[r], " at row ", r,
                                      " is outside [0, ", classes, ")"));
    }
  }
}

}  // namespace noeira::loss_checks
