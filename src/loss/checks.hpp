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

// labels is [rows] I32 on the context's target. Labels in host memory (Target::Cpu) must also
// each be in [0, classes) or equal ignore_index; device labels are left to the kernels, which
// never read out of bounds with a bad one (kernel_table.hpp).
void labels(const Context& ctx, const Tensor& labels, std::int64_t rows, std::int64_t classes,
            std::int64_t ignore_index, std::string_view loss);

// pred [rows, bins] has at least two bins (the two-hot target needs a pair of neighbours).
void bins(const Tensor& pred, std::string_view loss, std::string_view pred_name);

// target is [rows] F32 on the context's target: one scalar per row.
void scalars(const Context& ctx, const Tensor& target, std::int64_t rows, std::string_view loss,
             std::string_view target_name);

// pred [rows, 2·d] holds d means then d variances, target is [rows, d]. Variances in host memory
// (Target::Cpu) must not be negative, as torch.nn.GaussianNLLLoss requires; device ones are not
// read back (the host would wait every call), and a negative one is clamped to the floor there.
void means_variances(const Context& ctx, const Tensor& pred, const Tensor& target,
                     std::string_view loss, std::string_view pred_name,
                     std::string_view target_name);

}  // namespace noeira::loss_checks
