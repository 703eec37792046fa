#include "kernels/cpu/onednn_conv.hpp"

#include <array>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/bf16_rounding.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

using dnnl::memory;
using DataType = memory::data_type;
using Tag = memory::format_tag;

enum class ConvPass : std::uint8_t { Forward, BackwardData, BackwardFilter };

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return "conv2d_forward";
    case ConvPass::BackwardData: return "conv2d_backward_data";
    case ConvPass::BackwardFilter: return "conv2d_backward_filter";
  }
  return "conv2d";
}

// What makes two calls one primitive: the geometry with the slice's images and channels, the
// pass, the precision and whether there is a bias.
using PrimitiveKey = std::array<std::int64_t, 17>;

PrimitiveKey key_of(ConvPass pass, Precision precision, const ConvGeometry& g,
                    const ConvSlice& s, bool bias) {
  return {s.images,     g.in_channels, g.in_height, g.in_width, g.out_channels,
          g.out_height, g.out_width,   g.kernel,    g.stride,   g.padding,
          g.dilation,   g.groups,      s.first_out, s.outs,     static_cast<std::int64_t>(pass),
          static_cast<std::int64_t>(precision), bias};
}

// One argument of the primitive: the caller's plain fp32 layout and the primitive's own. When
// they differ, the argument is staged in the thread's buffer for it, in the primitive's layout,
// through a reorder built once.
struct Argument {
  int arg = 0;  // DNNL_ARG_*
  memory::desc plain;
  memory::desc staged;    // zero when the primitive takes the plain layout
  dnnl::reorder reorder;  // plain -> staged for an operand, staged -> plain for the result
};

// Which way an argument's reorder runs: into the primitive's layout (an operand) or out of it (the
// result).
enum class Flow : std::uint8_t { In, Out };

Argument argument(Flow flow, int arg, const memory::desc& plain, const memory::desc& wanted) {
  Argument a;
  a.arg = arg;
  a.plain = plain;
  if (wanted != plain) {
    const dnnl::engine& engine = onednn_engine();
    a.staged = wanted;
    const memory::desc& from = flow == Flow::In ? plain : wanted;
    const memory::desc& to = flow == Flow::In ? wanted : plain;
    a.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
  }
  return a;
}

struct ConvPrimitive {
  dnnl::primitive conv;
  std::array<Argument, 2> operands;
  Argument out;
  memory::desc bias;  // zero when there is none
  memory::desc scratchpad;
};

// The descriptions of one slice, in oneDNN's terms.
struct SliceDescs {
  memory::dims src, weights, dst, strides, dilates, padding;
  // Plain fp32 layouts: NCHW source, the slice's channels of an NCHW destination, and the
  // weight's rows in PyTorch's layout ([Co, Ci/G, k, k], grouped [G, Co/G, Ci/G, k, k]).
  memory::desc plain_src, plain_weights, plain_dst;

  SliceDescs(const ConvGeometry& g, const ConvSlice& s) {
    const std::int64_t outs = s.outs > 0 ? s.outs : g.out_channels;
    const std::int64_t out_pixels = g.out_height * g.out_width;
    src = {s.images, g.in_channels, g.in_height, g.in_width};
    dst = {s.images, outs, g.out_height, g.out_width};
    weights = g.groups == 1 ? memory::dims{outs, g.in_channels, g.kernel, g.kernel}
                            : memory::dims{g.groups, g.out_channels / g.groups,
                                           g.in_channels / g.groups, g.kernel, g.kernel};
    strides = {g.stride, g.stride};
    dilates = {g.dilation - 1, g.dilation - 1};
    padding = {g.padding, g.padding};
    plain_src = memory::desc(src, DataType::f32, Tag::nchw);
    plain_dst = memory::desc(dst, DataType::f32,
                             memory::dims{g.out_channels * out_pixels, out_pixels, g.out_width, 1});
    plain_weights = memory::desc(weights, DataType::f32, g.groups == 1 ? Tag::oihw : Tag::goihw);
  }
};

memory::desc any(const memory::dims& dims, DataType type) {
  return memory::desc(dims, type, Tag::any);
}

ConvPrimitive make_primitive(ConvPass pass, Precision precision, const ConvGeometry& g,
                             const ConvSlice& s, bool bias) {
  const SliceDescs d(g, s);
  const DataType op = precision == Precision::Bf16 ? DataType::bf16 : DataType::f32;
  const DataType f32 = DataType::f32;
  const auto direct = dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = onednn_engine();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward convolution with a result of type `result` and a bias (a zero desc: none).
  auto forward = [&](DataType result, const memory::desc& bias_desc) {
    return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct,
                                           any(d.src, op), any(d.weights, op), bias_desc,
                                           any(d.dst, result), d.strides, d.dilates, d.padding,
                                           d.padding);
  };
  // The backward passes take a forward description as a hint of the layouts to choose.
  auto hint = [&] {
    return dnnl::convolution_forward::primitive_desc(forward(op, memory::desc()), engine);
  };
  ConvPrimitive p;
  switch (pass) {
    case ConvPass::Forward: {
      if (bias) p.bias = memory::desc({d.dst[1]}, f32, Tag::a);
      const dnnl::convolution_forward::primitive_desc pd(forward(f32, p.bias), attr, engine);
      p.conv = dnnl::convolution_forward(pd);
      p.operands = {argument(Flow::In, DNNL_ARG_SRC, d.plain_src, pd.src_desc()),
                    argument(Flow::In, DNNL_ARG_WEIGHTS, d.plain_weights, pd.weights_desc())};
      p.out = argument(Flow::Out, DNNL_ARG_DST, d.plain_dst, pd.dst_desc());
      p.scratchpad = pd.scratchpad_desc();
      break;
    }
    case ConvPass::BackwardData: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(direct, any(d.src, f32), any(d.weights, op),
                                                any(d.dst, op), d.strides, d.dilates, d.padding,
                                                d.padding),
          attr, engine, hint());
      p.conv = dnnl::convolution_backward_data(pd);
      p.operands = {argument(Flow::In, DNNL_ARG_DIFF_DST, d.plain_dst, pd.diff_dst_desc()),
                    argument(Flow::In, DNNL_ARG_WEIGHTS, d.plain_weights, pd.weights_desc())};
      p.out = argument(Flow::Out, DNNL_ARG_DIFF_SRC, d.plain_src, pd.diff_src_desc());
      p.scratchpad = pd.scratchpad_desc();
      break;
    }
    case ConvPass::BackwardFilter: {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(direct, any(d.src, op), any(d.weights, f32),
                                                   any(d.dst, op), d.strides, d.dilates,
                                                   d.padding, d.padding),
          attr, engine, hint());
      p.conv = dnnl::convolution_backward_weights(pd);
      p.operands = {argument(Flow::In, DNNL_ARG_DIFF_DST, d.plain_dst, pd.diff_dst_desc()),
                    argument(Flow::In, DNNL_ARG_SRC, d.plain_src, pd.src_desc())};
      p.out = argument(Flow::Out, DNNL_ARG_DIFF_WEIGHTS, d.plain_weights, pd.diff_weights_desc());
      p.scratchpad = pd.scratchpad_desc();
      break;
    }
  }
  return p;
}

// Primitives a thread keeps. A run has a few slices per layer (the full chunk, a short last one,
// evaluation's); a caller with ever new shapes starts the map again past this many.
constexpr std::size_t kKeptPrimitives = 512;

// Bytes from the CPU target's allocator (64-byte aligned: oneDNN's kernels read whole cache
// lines), grown, never shrunk.
class StagingBuffer {
 public:
  void* at_least(std::size_t bytes) {
    if (bytes > size_) {
      storage_.reset(allocate(bytes));
      size_ = bytes;
    }
    return storage_.get();
  }

 private:
  struct Release {
    void operator()(void* p) const { release(p); }
  };
  std::unique_ptr<void, Release> storage_;
  std::size_t size_ = 0;
};

// One thread's state. The staging buffers serve every primitive of the thread in turn, so a
// thread holds one slice's staged arguments, not one per layer.
struct ThreadConvs {
  dnnl::stream stream{onednn_engine()};
  std::map<PrimitiveKey, ConvPrimitive> primitives;
  std::array<StagingBuffer, 2> operands;
  StagingBuffer result, scratchpad;
  std::array<std::vector<float>, 2> widened;  // bf16 values of the operands (widen_operands)
};

memory staged_memory(const memory::desc& desc, StagingBuffer& buffer) {
  return memory(desc, onednn_engine(), buffer.at_least(desc.get_size()));
}

// Runs the primitive on the caller's arrays: operands staged, the convolution, the result back.
void run(ThreadConvs& t, const ConvPrimitive& p, float* out, std::array<const float*, 2> in,
         const float* bias) {
  const dnnl::engine& engine = onednn_engine();
  const memory::desc none;
  std::unordered_map<int, memory> args;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Argument& a = p.operands[i];
    memory user(a.plain, engine, const_cast<float*>(in[i]));
    if (a.staged == none) {
      args.emplace(a.arg, user);
      continue;
    }
    memory staged = staged_memory(a.staged, t.operands[i]);
    a.reorder.execute(t.stream, user, staged);
    args.emplace(a.arg, staged);
  }
  memory user_out(p.out.plain, engine, out);
  const bool staged_out = p.out.staged != none;
  memory result = staged_out ? staged_memory(p.out.staged, t.result) : user_out;
  args.emplace(p.out.arg, result);
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(p.bias, engine, const_cast<float*>(bias)));
  args.emplace(DNNL_ARG_SCRATCHPAD, staged_memory(p.scratchpad, t.scratchpad));
  p.conv.execute(t.stream, args);
  if (staged_out) p.out.reorder.execute(t.stream, result, user_out);
  t.stream.wait();
}

// A bf16 convolution where oneDNN has none (onednn_has_bf16): the fp32 one of the operands'
// bf16 values, rounded into the thread's buffers (the whole extent of each operand's plain
// layout, which a slice of channels reads strided).
void widen_operands(ThreadConvs& t, const ConvPrimitive& p, std::array<const float*, 2>& in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto count = static_cast<std::int64_t>(p.operands[i].plain.get_size() / sizeof(float));
    t.widened[i].resize(static_cast<std::size_t>(count));
    round_to_bf16_values(t.widened[i].data(), in[i], count);
    in[i] = t.widened[i].data();
  }
}

void convolve(ConvPass pass, Precision precision, const ConvGeometry& g, const ConvSlice& slice,
              float* out, std::array<const float*, 2> in, const float* bias) {
  if (slice.images <= 0) return;
  const bool widen = precision == Precision::Bf16 && !onednn_has_bf16();
  const Precision computed = widen ? Precision::Fp32 : precision;
  try {
    const OneThreadScope one_thread;  // the primitive is built and run for this thread alone
    thread_local ThreadConvs t;
    const PrimitiveKey key = key_of(pass, computed, g, slice, bias != nullptr);
    auto found = t.primitives.find(key);
    if (found == t.primitives.end()) {
      if (t.primitives.size() >= kKeptPrimitives) t.primitives.clear();
      found =
          t.primitives.emplace(key, make_primitive(pass, computed, g, slice, bias != nullptr))
              .first;
    }
    if (widen) widen_operands(t, found->second, in);
    run(t, found->second, out, in, bias);
  } catch (const dnnl::error& e) {
    throw Error(::noeira::detail::concat(
        pass_name(pass), " (oneDNN", precision == Precision::Bf16 ? ", bf16" : "", ") of ",
        slice.images, "x", g.in_channels, "x", g.in_height, "x", g.in_width, " to ",
        g.out_channels, " channels, kernel ", g.kernel, " stride ", g.stride, " padding ",
        g.padding, " dilation ", g.dilation, " groups ", g.groups, ": ", e.what()));
  }
}

}  // namespace

void onednn_conv_forward(Precision precision, const ConvGeometry& g, const ConvSlice& slice,
                         float* y, const float* x, const float* w, const float* b) {
  convolve(ConvPass::Forward, precision, g, slice, y, {x, w}, b);
}

void onednn_conv_backward_data(Precision precision, const ConvGeometry& g,
                               const ConvSlice& slice, float* dx, const float* dy,
                               const float* w) {
  convolve(ConvPass::BackwardData, precision, g, slice, dx, {dy, w}, nullptr);
}

void onednn_conv_backward_filter(Precision precision, const ConvGeometry& g,
                                 const ConvSlice& slice, float* dw, const float* dy,
                                 const float* x) {
  const std::int64_t taps = g.in_channels / g.groups * g.kernel * g.kernel;
  const std::int64_t out_pixels = g.out_height * g.out_width;
  convolve(ConvPass::BackwardFilter, precision, g, slice, dw + slice.first_out * taps,
           {dy + slice.first_out * out_pixels, x}, nullptr);
}

}  // namespace noeira::cpu
