#pragma once
// PatchEmbed<In, Patch, Width>: images [rows, C·H·W] (or [rows, C, H, W]) to tokens
// [rows, N, Width], one per P×P patch, N = (H/P)·(W/P) in row-major patch order. It computes what
// PyTorch's Conv2d(C, Width, kernel_size=P, stride=P) followed by flatten(2).transpose(1, 2)
// computes (timm's PatchEmbed, the ViT's first layer), with the parameters in that layout:
// proj.weight [Width, C, P, P] (drawn with fan_in C·P·P, fan_out Width·P·P, decayed) and
// proj.bias [Width] (0).
//
// A convolution whose stride is its kernel reads every pixel exactly once, so it is a
// rearrangement followed by a matrix product:
//   patches [rows · N, C·P·P]   each patch's pixels in (c, ky, kx) order, which is the order of a
//                               row of proj.weight, so the weight is the Linear kernel's
//                               [Width, C·P·P] matrix as it lies in memory
//   tokens = patches · proj.weightᵀ + proj.bias
// The rearrangement moves runs of P pixels (one kernel row of one channel): gather_rows over the
// images viewed as rows of P floats, with an index built on the host. Because it is a
// permutation of those runs, the vjp gathers the patches' gradient back with the inverse index
// (no scatter, no atomics, nothing to zero).
//
// The index of rows images is a prefix of the index of more (image b's runs follow image b-1's),
// so it is built for the largest batch seen and a smaller one (the last batch, an evaluation
// batch, a rank's share) uses its prefix.
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "core/module.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

template <ImageShape In, std::int64_t Patch, std::int64_t Width>
class PatchEmbed {
  static_assert(Patch > 0 && Width > 0, "PatchEmbed: empty patches or tokens");
  static_assert(In.height % Patch == 0 && In.width % Patch == 0,
                "PatchEmbed: the patch size must divide the image's height and width");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In.numel();
  static constexpr std::int64_t out_dim = Width;
  static constexpr ImageShape in_image = In;  // the output is tokens, not an image
  static constexpr std::int64_t patches_down = In.height / Patch;
  static constexpr std::int64_t patches_across = In.width / Patch;
  static constexpr std::int64_t patches = patches_down * patches_across;  // N
  static constexpr std::int64_t patch_dim = In.channels * Patch * Patch;   // C·P·P

  explicit PatchEmbed(const Init& init)
      : weight_(init.named_child("proj").weight("weight", {Width, In.channels, Patch, Patch},
                                                patch_dim, Width * Patch * Patch)),
        bias_(init.named_child("proj").constant("bias", {Width}, 0.0f)) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, "PatchEmbed");
    ensure_index(ctx, rows);
    x_shape_ = x.shape();
    rows_ = rows;
    patches_.resize({rows * patches, patch_dim}, ctx.target);
    ctx.k->gather_rows(ctx.stream, patches_.data(), to_patches_.ids(), x.data(),
                       rows * kRunsPerImage, Patch, rows * kRunsPerImage);
    y_.resize({rows, patches, Width}, ctx.target);
    ctx.k->linear_forward(ctx.stream, Activation::Identity, y_.data(), nullptr, patches_.data(),
                          weight_.val.data(), bias_.val.data(), rows * patches, patch_dim, Width);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    float* dpatches = nullptr;
    if (input_grad == InputGrad::Compute) {
      dpatches_.resize(patches_.shape(), ctx.target);
      dpatches = dpatches_.data();
    }
    ctx.k->linear_backward(ctx.stream, Activation::Identity, ctx.grad_mode, dpatches,
                           weight_.grd.data(), bias_.grd.data(), nullptr, dy.data(),
                           patches_.data(), weight_.val.data(), y_.data(), nullptr,
                           rows_ * patches, patch_dim, Width);
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(x_shape_, ctx.target);
    ctx.k->gather_rows(ctx.stream, dx_.data(), from_patches_.ids(), dpatches_.data(),
                       rows_ * kRunsPerImage, Patch, rows_ * kRunsPerImage);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "proj.weight"), weight_);
    visit(join_name(prefix, "proj.bias"), bias_);
  }

 private:
  static constexpr std::int64_t kRunsPerImage = in_dim / Patch;  // runs of P pixels

  // to_patches_[patch run] = image run and from_patches_ the inverse, for at least `rows` images.
  // Patch run (n, c, ky) of image b is the ky-th kernel row of channel c of patch n = (py, px);
  // it lies in image run (c, py·P + ky, px) of the [C, H, W / P] runs.
  void ensure_index(const Context& ctx, std::int64_t rows) {
    if (indexed_rows_ >= rows && to_patches_.target() == ctx.target) return;
    if (rows > std::numeric_limits<std::int32_t>::max() / kRunsPerImage) {
      throw InputError(detail::concat("PatchEmbed: a batch of ", rows, " images of ",
                                      In.numel(), " pixels is past the int32 gather index"));
    }
    const std::int64_t runs = rows * kRunsPerImage;
    std::vector<std::int32_t> to(static_cast<std::size_t>(runs)), from(to.size());
    for (std::int64_t b = 0; b < rows; ++b) {
      for (std::int64_t py = 0; py < patches_down; ++py) {
        for (std::int64_t px = 0; px < patches_across; ++px) {
          for (std::int64_t c = 0; c < In.channels; ++c) {
            for (std::int64_t ky = 0; ky < Patch; ++ky) {
              const std::int64_t n = py * patches_across + px;
              const std::int64_t patch_run = b * kRunsPerImage + (n * In.channels + c) * Patch + ky;
              const std::int64_t image_run =
                  b * kRunsPerImage + (c * In.height + py * Patch + ky) * patches_across + px;
              to[static_cast<std::size_t>(patch_run)] = static_cast<std::int32_t>(image_run);
              from[static_cast<std::size_t>(image_run)] = static_cast<std::int32_t>(patch_run);
            }
          }
        }
      }
    }
    to_patches_ = Tensor::from_host_ids({runs}, to, ctx.target);
    from_patches_ = Tensor::from_host_ids({runs}, from, ctx.target);
    indexed_rows_ = rows;
  }

  Param weight_;  // [Width, C, P, P]: the [Width, C·P·P] matrix of the product
  Param bias_;    // [Width]
  Tensor to_patches_;    // [indexed_rows_ · runs per image] I32: image run of each patch run
  Tensor from_patches_;  // [indexed_rows_ · runs per image] I32: the inverse permutation
  std::int64_t indexed_rows_ = 0;
  Shape x_shape_;        // of the last forward's input
  std::int64_t rows_ = 0;
  Tensor patches_;   // [rows · N, C·P·P] rearranged input, read by the vjp
  Tensor y_;         // [rows, N, Width] tokens
  Tensor dpatches_;  // [rows · N, C·P·P] gradient of the patches
  Tensor dx_;        // like the input
  Tensor empty_;
};

}  // namespace noeira
