#pragma once
// ResNets from BasicBlocks (nn/resnet_block.hpp), named as torchvision names them: the stem
// (conv1, bn1; the ImageNet stem also max-pools), stages layer1, layer2, ... of blocks
// layer<i>.<j>.*, and the head (global average pooling, then fc). Units for data-parallel
// sharding: the stem, every block and the head.
//
//   ResNet18<image, classes, stem>: torchvision's resnet18 (stages of 2 blocks, 64-128-256-512
//     channels); ResNetStem::ImageNet is its 7×7 stride-2 convolution and 3×3 max pooling,
//     ResNetStem::Small a 3×3 stride-1 convolution without pooling for 28×28 or 32×32 images.
//   ResNetCifar<image, blocks, classes>: the CIFAR ResNets of He et al. (3 stages of `blocks`
//     blocks, 16-32-64 channels, small stem): blocks = 3 is resnet20.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/module.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/checkpointed.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/resnet_block.hpp"
#include "nn/sequential.hpp"
#include "nn/unit.hpp"

namespace noeira {

enum class ResNetStem : std::uint8_t { Small, ImageNet };

template <ImageShape In, std::int64_t Channels, ResNetStem Kind>
class ResNetStemLayers {
  static constexpr bool imagenet = Kind == ResNetStem::ImageNet;
  using Conv = Conv2D<ConvSpec{In, Channels, imagenet ? 7 : 3, imagenet ? 2 : 1, imagenet ? 3 : 1,
                               1, 1, false}>;
  static constexpr ImageShape conv_image = Conv::out_image;
  using Pool = MaxPool2D<PoolSpec{conv_image, 3, 2, 1}>;

 public:
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image = imagenet ? Pool::out_image : conv_image;
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In.numel();
  static constexpr std::int64_t out_dim = out_image.numel();

  explicit ResNetStemLayers(const Init& init)
      : conv1_(init.named_child("conv1")), bn1_(init.named_child("bn1")), relu_(init),
        pool_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const Tensor& h = relu_.forward(ctx, bn1_.forward(ctx, conv1_.forward(ctx, x)));
    if constexpr (imagenet) return pool_.forward(ctx, h);
    return h;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor* g = &dy;
    if constexpr (imagenet) g = &pool_.vjp(ctx, dy, InputGrad::Compute);
    const Tensor& dconv = bn1_.vjp(ctx, relu_.vjp(ctx, *g, InputGrad::Compute), InputGrad::Compute);
    return conv1_.vjp(ctx, dconv, input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    conv1_.for_each_param(visit, join_name(prefix, "conv1"));
    bn1_.for_each_param(visit, join_name(prefix, "bn1"));
  }

 private:
  Conv conv1_;
  BatchNorm2D<conv_image> bn1_;
  ReLU<conv_image.numel()> relu_;
  Pool pool_;  // used by the ImageNet stem only
};

// Global average pooling, then the classifier "fc".
template <ImageShape In, std::int64_t Classes>
class ResNetHead {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In.numel();
  static constexpr std::int64_t out_dim = Classes;

  explicit ResNetHead(const Init& init) : pool_(init), fc_(init.named_child("fc")) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    return fc_.forward(ctx, pool_.forward(ctx, x));
  }
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return pool_.vjp(ctx, fc_.vjp(ctx, dy, InputGrad::Compute), input_grad);
  }
  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    fc_.for_each_param(visit, join_name(prefix, "fc"));
  }

 private:
  GlobalAvgPool2D<In> pool_;
  Linear<In.channels, Classes> fc_;
};

namespace detail_resnet {
template <class T, std::size_t>
using Repeated = T;
// Sequential<Unit<First>, Unit<Rest>, ...> of 1 + sizeof...(Is) blocks, each a checkpoint site
// (nn/checkpointed.hpp).
template <class First, class Rest, class Indices>
struct StageOf;
template <class First, class Rest, std::size_t... Is>
struct StageOf<First, Rest, std::index_sequence<Is...>> {
  using type = Sequential<Unit<Checkpointed<First>>, Repeated<Unit<Checkpointed<Rest>>, Is>...>;
};
}  // namespace detail_resnet

// A stage of K blocks of `Channels`: the first with `Stride` (and a projection where needed).
// (A class, not an alias template: GCC 12 crashes substituting a class-type template argument
// that depends on another template's into such an alias.)
template <ImageShape In, std::int64_t Channels, std::int64_t Stride, std::size_t K>
struct ResNetStageOf {
  static constexpr ImageShape out_image = conv3x3_output(In, Channels, Stride);
  using type = typename detail_resnet::StageOf<BasicBlock<In, Channels, Stride>,
                                               BasicBlock<out_image, Channels, 1>,
                                               std::make_index_sequence<K - 1>>::type;
};

// Stem, stages named layer1, layer2, ..., head; the dims chain at compile time.
template <class Stem, class Head, class... Stages>
class ResNet {
  using StageTuple = std::tuple<Stages...>;
  static constexpr std::size_t kStages = sizeof...(Stages);

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Stem::in_dim;
  static constexpr std::int64_t out_dim = Head::out_dim;
  static constexpr ImageShape in_image = Stem::in_image;

  explicit ResNet(const Init& init)
      : stem_(init), stages_(build(init, std::make_index_sequence<kStages>{})), head_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const Tensor* h = &stem_.forward(ctx, x);
    std::apply([&](auto&... stage) { ((h = &stage.forward(ctx, *h)), ...); }, stages_);
    return head_.forward(ctx, *h);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor* g = &head_.vjp(ctx, dy, InputGrad::Compute);
    vjp_stages<kStages>(ctx, g);
    return stem_.vjp(ctx, *g, input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    stem_.for_each_param(visit, prefix);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (std::get<Is>(stages_).for_each_param(visit, join_name(prefix, stage_name(Is))), ...);
    }(std::make_index_sequence<kStages>{});
    head_.for_each_param(visit, prefix);
  }

 private:
  static std::string stage_name(std::size_t i) { return "layer" + std::to_string(i + 1); }

  template <std::size_t... Is>
  static StageTuple build(const Init& init, std::index_sequence<Is...>) {
    return StageTuple(std::tuple_element_t<Is, StageTuple>(init.named_child(stage_name(Is)))...);
  }

  template <std::size_t I>
  void vjp_stages(Context& ctx, const Tensor*& g) {
    if constexpr (I > 0) {
      g = &std::get<I - 1>(stages_).vjp(ctx, *g, InputGrad::Compute);
      vjp_stages<I - 1>(ctx, g);
    }
  }

  Unit<Stem> stem_;
  StageTuple stages_;
  Unit<Head> head_;
};

template <ImageShape In, std::int64_t Blocks, std::int64_t Classes>
struct ResNetCifarTypes {
  using Stem = ResNetStemLayers<In, 16, ResNetStem::Small>;
  static constexpr ImageShape s0 = Stem::out_image;
  static constexpr auto k = static_cast<std::size_t>(Blocks);
  using Layer1 = ResNetStageOf<s0, 16, 1, k>;
  using Layer2 = ResNetStageOf<Layer1::out_image, 32, 2, k>;
  using Layer3 = ResNetStageOf<Layer2::out_image, 64, 2, k>;
  using Model = ResNet<Stem, ResNetHead<Layer3::out_image, Classes>, typename Layer1::type,
                       typename Layer2::type, typename Layer3::type>;
};

template <ImageShape In, std::int64_t Blocks, std::int64_t Classes>
using ResNetCifar = typename ResNetCifarTypes<In, Blocks, Classes>::Model;

template <ImageShape In, std::int64_t Classes, ResNetStem Kind>
struct ResNet18Types {
  using Stem = ResNetStemLayers<In, 64, Kind>;
  static constexpr ImageShape s0 = Stem::out_image;
  using Layer1 = ResNetStageOf<s0, 64, 1, 2>;
  using Layer2 = ResNetStageOf<Layer1::out_image, 128, 2, 2>;
  using Layer3 = ResNetStageOf<Layer2::out_image, 256, 2, 2>;
  using Layer4 = ResNetStageOf<Layer3::out_image, 512, 2, 2>;
  using Model = ResNet<Stem, ResNetHead<Layer4::out_image, Classes>, typename Layer1::type,
                       typename Layer2::type, typename Layer3::type, typename Layer4::type>;
};

template <ImageShape In, std::int64_t Classes, ResNetStem Kind = ResNetStem::ImageNet>
using ResNet18 = typename ResNet18Types<In, Classes, Kind>::Model;

}  // namespace noeira
