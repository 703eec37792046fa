// Convolutions on CUDA through cuDNN's convolution API: forward, backward data (also the
// transposed convolution's forward), backward filter and backward bias, the bias itself added by
// cudnnAddTensor. Host code only.
//
// A plan per geometry — descriptors and the algorithm of each direction — is made on first use
// and kept per host thread (cuDNN's descriptors are host objects; the handle is the thread's).
// Algorithms come from cuDNN's heuristics (no timing runs), and only deterministic ones are
// taken, so that a step gives the same bits every time; without TF32 (settings.hpp) only FMA
// kernels, so that the results match the fp32 CPU reference within fp32 tolerance. Each call's
// workspace is stream-ordered scratch (scratch.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/cuda/bf16_operand.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/cudnn_handle.hpp"
#include "kernels/cuda/scratch.hpp"
#include "kernels/cuda/settings.hpp"
#include "kernels/error.hpp"

namespace noeira::cuda {

namespace {

int as_cudnn_int(std::int64_t v) {
  NOEIRA_CHECK(v >= 0 && v <= INT32_MAX, "cuDNN convolution: size ", v, " does not fit an int");
  return static_cast<int>(v);
}

cudnnTensorDescriptor_t tensor_descriptor(std::int64_t n, std::int64_t c, std::int64_t h,
                                          std::int64_t w) {
  cudnnTensorDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  try {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                           as_cudnn_int(n), as_cudnn_int(c), as_cudnn_int(h),
                                           as_cudnn_int(w)));
  } catch (...) {
    (void)cudnnDestroyTensorDescriptor(d);
    throw;
  }
  return d;
}

// The convolution as a reader names it, for errors: "conv 3x3 64->64 stride 1 padding 1
// dilation 1 groups 1 on 32x32 images".
std::string describe(const ConvGeometry& g) {
  return detail::concat("conv ", g.kernel, "x", g.kernel, " ", g.in_channels, "->",
                        g.out_channels, " stride ", g.stride, " padding ", g.padding, " dilation ",
                        g.dilation, " groups ", g.groups, " on ", g.in_height, "x", g.in_width,
                        " images");
}

// Why an algorithm that cuDNN's heuristics list cannot be taken; empty when it can.
template <class Perf>
std::string refusal(const Perf& perf, bool tf32, std::size_t free_bytes) {
  if (perf.status != CUDNN_STATUS_SUCCESS) return cudnnGetErrorString(perf.status);
  if (perf.determinism != CUDNN_DETERMINISTIC) return "not deterministic";
  const bool tensor_cores = perf.mathType == CUDNN_TENSOR_OP_MATH ||
                            perf.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  if (tensor_cores && !tf32) return "tensor-core math (TF32 is off)";
  if (perf.memory > free_bytes) return detail::concat(perf.memory >> 20, " MiB of workspace");
  return {};
}

// The first algorithm cuDNN's heuristics rank that is deterministic (so that a step gives the same
// bits every time), of the math the run allows, and whose workspace fits in the device's free
// memory: the heuristics do not weigh memory, and an FFT algorithm may ask for more than there
// is, which would fail at every call instead of falling back to the next candidate. When none
// is, the one-line error names the direction, the convolution and why each offer was refused.
template <class Perf>
const Perf& pick_algorithm(const Perf* perf, int count, bool tf32, std::size_t free_bytes,
                           const char* direction, const ConvGeometry& g) {
  std::string offered;
  for (int i = 0; i < count; ++i) {
    const std::string why_not = refusal(perf[i], tf32, free_bytes);
    if (why_not.empty()) return perf[i];
    offered += detail::concat(offered.empty() ? "" : "; ", "algorithm ",
                              static_cast<int>(perf[i].algo), ": ", why_not);
  }
  throw LibraryError(detail::concat(
      "cuDNN offers no deterministic ", tf32 ? "fp32 or TF32" : "fp32 (TF32 off)",
      " algorithm for ", direction, " of ", describe(g), " with ", free_bytes >> 20,
      " MiB of device memory free (it offered: ", offered.empty() ? "nothing" : offered, ")"));
}

// What a workspace can take: the device's free memory, and what the stream-ordered pool the
// workspace comes from (kernels/cuda/scratch.hpp) holds without using it.
std::size_t free_device_bytes() {
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t reserved = 0, used = 0;
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return free_bytes + static_cast<std::size_t>(reserved > used ? reserved - used : 0);
}

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t out_bias = nullptr, in_bias = nullptr;  // [1, C, 1, 1]
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  std::size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;

  ConvPlan(cudnnHandle_t handle, const ConvGeometry& g, bool tf32) {
    // A constructor that throws runs no destructor: release what was made before rethrowing.
    try {
      build(handle, g, tf32);
    } catch (...) {
      release();
      throw;
    }
  }
  ~ConvPlan() { release(); }
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

 private:
  void build(cudnnHandle_t handle, const ConvGeometry& g, bool tf32) {
    x = tensor_descriptor(g.images, g.in_channels, g.in_height, g.in_width);
    y = tensor_descriptor(g.images, g.out_channels, g.out_height, g.out_width);
    out_bias = tensor_descriptor(1, g.out_channels, 1, 1);
    in_bias = tensor_descriptor(1, g.in_channels, 1, 1);
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                           as_cudnn_int(g.out_channels),
                                           as_cudnn_int(g.in_channels / g.groups),
                                           as_cudnn_int(g.kernel), as_cudnn_int(g.kernel)));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    const int pad = as_cudnn_int(g.padding), stride = as_cudnn_int(g.stride);
    const int dilation = as_cudnn_int(g.dilation);
    // CROSS_CORRELATION: what deep learning (and PyTorch) calls convolution.
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, pad, pad, stride, stride, dilation, dilation,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, as_cudnn_int(g.groups)));
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    choose_algorithms(handle, g, tf32);
  }

  void release() {
    // Destroying host descriptors cannot fail in a way worth reporting at thread exit.
    for (cudnnTensorDescriptor_t d : {x, y, out_bias, in_bias}) {
      if (d != nullptr) (void)cudnnDestroyTensorDescriptor(d);
    }
    if (w != nullptr) (void)cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) (void)cudnnDestroyConvolutionDescriptor(conv);
  }

  void choose_algorithms(cudnnHandle_t handle, const ConvGeometry& g, bool tf32) {
    const std::size_t free_bytes = free_device_bytes();
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd));
    forward_algo = pick_algorithm(fwd, count, tf32, free_bytes, "forward", g).algo;
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, forward_algo,
                                                        &forward_bytes));
    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, w, y, conv, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, data));
    data_algo = pick_algorithm(data, count, tf32, free_bytes, "backward data", g).algo;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, data_algo,
                                                             &data_bytes));
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, x, y, conv, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, filter));
    filter_algo = pick_algorithm(filter, count, tf32, free_bytes, "backward filter", g).algo;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w, filter_algo,
                                                               &filter_bytes));
  }
};

struct PlanKey {
  int device;
  bool tf32;
  ConvGeometry geometry;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    const ConvGeometry& g = k.geometry;
    std::size_t h = std::hash<int>{}(k.device * 2 + (k.tf32 ? 1 : 0));
    for (std::int64_t v : {g.images, g.in_channels, g.in_height, g.in_width, g.out_channels,
                           g.out_height, g.out_width, g.kernel, g.stride, g.padding, g.dilation,
                           g.groups}) {
      h = h * 1000003u ^ std::hash<std::int64_t>{}(v);
    }
    return h;
  }
};

const ConvPlan& plan_for(cudnnHandle_t handle, const ConvGeometry& g) {
  thread_local std::unordered_map<PlanKey, std::unique_ptr<ConvPlan>, PlanKeyHash> plans;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const PlanKey key{device, allow_tf32(), g};
  auto it = plans.find(key);
  if (it == plans.end()) {
    it = plans.emplace(key, std::make_unique<ConvPlan>(handle, g, key.tf32)).first;
  }
  return *it->second;
}

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

std::int64_t conv2d_workspace(const ConvGeometry&) { return 0; }

// At bf16 each direction reads its two operands rounded (kernels/cuda/bf16_operand.hpp); the
// bias is not a product's operand and stays as it is.
template <Precision P>
void conv2d_forward_at(Stream s, float* y, const float* x, const float* w, const float* b,
                       const ConvGeometry& g, float*) {
  if (g.images <= 0) return;
  cudnnHandle_t handle = cudnn_handle(s);
  const ConvPlan& p = plan_for(handle, g);
  const ProductOperand<P> xs(s, x, g.images * g.in_image_floats());
  const ProductOperand<P> ws(s, w, g.weight_floats());
  Scratch<std::byte> workspace(s, p.forward_bytes);
  CUDNN_CHECK(cudnnConvolutionForward(handle, &kOne, p.x, xs.get(), p.w, ws.get(), p.conv,
                                      p.forward_algo, workspace.data(), p.forward_bytes, &kZero,
                                      p.y, y));
  if (b != nullptr) CUDNN_CHECK(cudnnAddTensor(handle, &kOne, p.out_bias, b, &kOne, p.y, y));
}

template <Precision P>
void conv2d_backward_data_at(Stream s, float* dx, const float* dy, const float* w,
                             const float* b, const ConvGeometry& g, float*) {
  if (g.images <= 0) return;
  cudnnHandle_t handle = cudnn_handle(s);
  const ConvPlan& p = plan_for(handle, g);
  const ProductOperand<P> dys(s, dy, g.images * g.out_image_floats());
  const ProductOperand<P> ws(s, w, g.weight_floats());
  Scratch<std::byte> workspace(s, p.data_bytes);
  CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &kOne, p.w, ws.get(), p.y, dys.get(), p.conv,
                                           p.data_algo, workspace.data(), p.data_bytes, &kZero,
                                           p.x, dx));
  if (b != nullptr) CUDNN_CHECK(cudnnAddTensor(handle, &kOne, p.in_bias, b, &kOne, p.x, dx));
}

template <Precision P>
void conv2d_backward_filter_at(Stream s, GradMode mode, float* dw, const float* dy,
                               const float* x, const ConvGeometry& g, float*) {
  if (g.images <= 0) {
    if (mode == GradMode::Overwrite) {
      CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * g.weight_floats(), as_cuda(s)));
    }
    return;
  }
  cudnnHandle_t handle = cudnn_handle(s);
  const ConvPlan& p = plan_for(handle, g);
  const ProductOperand<P> xs(s, x, g.images * g.in_image_floats());
  const ProductOperand<P> dys(s, dy, g.images * g.out_image_floats());
  Scratch<std::byte> workspace(s, p.filter_bytes);
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &kOne, p.x, xs.get(), p.y, dys.get(), p.conv,
                                             p.filter_algo, workspace.data(), p.filter_bytes,
                                             &beta, p.w, dw));
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_forward_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_backward_data_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_backward_filter_at);

void conv2d_backward_bias(Stream s, GradMode mode, float* db, const float* dy, std::int64_t images,
                          std::int64_t channels, std::int64_t pixels) {
  if (images <= 0 || pixels <= 0) {
    if (mode == GradMode::Overwrite) {
      CUDA_CHECK(cudaMemsetAsync(db, 0, sizeof(float) * channels, as_cuda(s)));
    }
    return;
  }
  cudnnHandle_t handle = cudnn_handle(s);
  // Descriptors of this call only: host objects, cheap beside the reduction.
  struct Descriptors {
    cudnnTensorDescriptor_t dy, db;
    ~Descriptors() {
      (void)cudnnDestroyTensorDescriptor(dy);
      (void)cudnnDestroyTensorDescriptor(db);
    }
  } d{tensor_descriptor(images, channels, pixels, 1), tensor_descriptor(1, channels, 1, 1)};
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, &kOne, d.dy, dy, &beta, d.db, db));
}

}  // namespace noeira::cuda
