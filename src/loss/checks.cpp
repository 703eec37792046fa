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

void bins(const Tensor& pred, std::string_view loss, std::string_view pred_name) {
  if (pred.dim(1) < 2) {
    throw InputError(detail::concat(loss, ": ", pred_name, " has shape ",
                                    shape_string(pred.shape()),
                                    "; the two-hot target needs at least 2 bins per row"));
  }
}

void scalars(const Context& ctx, const Tensor& target, std::int64_t rows, std::string_view loss,
             std::string_view target_name) {
  if (!target.defined() || target.rank() != 1 || target.dim(0) != rows ||
      target.dtype() != DType::F32) {
    throw InputError(detail::concat(
        loss, ": ", target_name, " must be [", rows, "] f32 (one scalar per row), got shape ",
        target.defined() ? shape_string(target.shape()) : "(undefined)"));
  }
  if (target.target() != ctx.target) {
    throw InputError(detail::concat(loss, ": ", target_name, " lives on ",
                                    to_string(target.target()), " but the context runs on ",
                                    to_string(ctx.target)));
  }
}

void means_variances(const Context& ctx, const Tensor& pred, const Tensor& target,
                     std::string_view loss, std::string_view pred_name,
                     std::string_view target_name) {
  const std::int64_t rows = pred.dim(0), cols = pred.dim(1);
  if (cols % 2 != 0) {
    throw InputError(detail::concat(loss, ": ", pred_name, " has shape ",
                                    shape_string(pred.shape()),
                                    " but must be [rows, 2·d]: d means, then d variances"));
  }
  matrix(ctx, target, loss, target_name);
  if (target.shape() != Shape{rows, cols / 2}) {
    throw InputError(detail::concat(loss, ": ", target_name, " has shape ",
                                    shape_string(target.shape()), " but must be [", rows, ", ",
                                    cols / 2, "] for ", pred_name, " of shape ",
                                    shape_string(pred.shape())));
  }
  if (pred.target() != Target::Cpu) return;
  const std::int64_t d = cols / 2;
  const float* p = pred.data();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      const float v = p[r * cols + d + c];
      if (v < 0.0f) {
        throw InputError(detail::concat(loss, ": variance ", v, " at row ", r, ", column ", c,
                                        " of ", pred_name, " is negative"));
      }
    }
  }
}

}  // namespace noeira::loss_checks
