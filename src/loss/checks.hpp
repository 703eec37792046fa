#pragma once
// Argument checks shared by the losses: every failure is an InputError naming the loss and the
// tensor at fault.
#include <cstdint>
#include <string_view>

#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira::loss_checks {

// A [rows > 0, cols > 0] F32 tensor on the context's target; returns nothing, throws otherwise.
void matrix(const Context& ctx, const Tensor& t, std::string_view loss, std::string_view what);

// target has exactly the shape of pred (and is F32 on the same target).
void same_shape(const Context& ctx, const Tensor& pred, const Tensor& target,
                std::string_view loss, std::string_view pred_name, std::string_view target_name);

// labels is [rows] I32 on the context's target, every label in [0, classes). Reads the labels on
// the host: a few bytes per row, and a bad label must never reach a kernel that indexes with it.
void labels(const Context& ctx, const Tensor& labels, std::int64_t rows, std::int64_t classes,
            std::string_view loss);

}  // namespace noeira::loss_checks
