// Convolutions on the CPU: oneDNN's convolution primitives (kernels/cpu/onednn_conv.hpp, the
// direct convolutions PyTorch's CPU convolutions run), at the table's precision, over slices of
// the batch spread over the threads.
//
// The same bits for any thread count: every primitive runs on one thread, and the slices are a
// function of the sizes alone (oneDNN splits a primitive's sums by its thread count).
// - Forward and input gradient: chunks of kChunkImages images, each its own primitive call.
// - Weight gradient: a sum over images. The images are cut into a fixed number of blocks
//   (filter_blocks), each summed by one call into a partial of its own, and the partials are
//   added in block order. A weight too large for several partials (one block) is cut instead
//   into fixed chunks of output channels, each summing every image in one call.
#include <algorithm>
#include <atomic>
#include <exception>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/onednn_conv.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

// Images a forward or input-gradient call takes: enough for oneDNN's kernels to run at speed,
// few enough that a batch makes several calls for the threads to share.
constexpr std::int64_t kChunkImages = 8;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Blocks of images whose weight-gradient partials are summed in order: at most one per chunk of
// images and kMaxFilterBlocks, and the partials at most 16 MiB.
constexpr std::int64_t kMaxFilterBlocks = 32;
constexpr std::int64_t kFilterPartialFloats = std::int64_t{1} << 22;
std::int64_t filter_blocks(const ConvGeometry& g) {
  const std::int64_t fit = kFilterPartialFloats / std::max<std::int64_t>(g.weight_floats(), 1);
  return std::clamp<std::int64_t>(std::min(fit, kMaxFilterBlocks), 1,
                                  std::max<std::int64_t>(ceil_div(g.images, kChunkImages), 1));
}

// With one block, chunks of the output channels (at least 16 each; groups = 1 only).
constexpr std::int64_t kMaxFilterRowChunks = 8;
constexpr std::int64_t kMinFilterChunkRows = 16;
std::int64_t filter_row_chunks(const ConvGeometry& g) {
  if (filter_blocks(g) > 1 || g.groups > 1) return 1;
  return std::clamp<std::int64_t>(g.out_channels / kMinFilterChunkRows, 1, kMaxFilterRowChunks);
}

void check_geometry(const ConvGeometry& g, const char* kernel) {
  NOEIRA_CHECK(g.groups > 0 && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0,
               kernel, ": ", g.groups, " groups do not divide ", g.in_channels, " input and ",
               g.out_channels, " output channels");
  NOEIRA_CHECK(g.kernel > 0 && g.stride > 0 && g.dilation > 0 && g.padding >= 0, kernel,
               ": kernel ", g.kernel, ", stride ", g.stride, ", dilation ", g.dilation,
               ", padding ", g.padding);
}

// Runs body(task) for tasks [0, n) over at most `threads` threads. Inside a OneThreadScope: the
// region's size is given explicitly. An exception may not leave an OpenMP region (the process
// would terminate), so it is kept and rethrown after the region: a primitive oneDNN refuses is
// the caller's one-line error. The error kept is that of the lowest failing task, whichever
// thread failed first, so the message does not depend on scheduling; tasks above a failed one
// are skipped.
template <class Body>
void for_each_task(std::int64_t n, int threads, Body&& body) {
  const int team = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n)));
  std::exception_ptr error;
  std::atomic<std::int64_t> lowest_failed{n};
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (std::int64_t i = 0; i < n; ++i) {
    if (i > lowest_failed.load(std::memory_order_relaxed)) continue;
    try {
      body(i);
    } catch (...) {
#pragma omp critical(noeira_conv_error)
      if (i < lowest_failed.load(std::memory_order_relaxed)) {
        lowest_failed.store(i, std::memory_order_relaxed);
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

// body(first image, images) for each chunk of kChunkImages images, over the threads.
template <class Body>
void for_each_chunk(const ConvGeometry& g, Body&& body) {
  const OneThreadScope scope;
  for_each_task(ceil_div(g.images, kChunkImages), scope.threads(), [&](std::int64_t chunk) {
    const std::int64_t first = chunk * kChunkImages;
    body(first, std::min(kChunkImages, g.images - first));
  });
}

// y[c, :] += b[c] over `channels` planes of `pixels`.
void add_channel_bias(float* y, const float* b, std::int64_t channels, std::int64_t pixels) {
  for (std::int64_t c = 0; c < channels; ++c) {
    float* __restrict plane = y + c * pixels;
    const float bias = b[c];
    for (std::int64_t p = 0; p < pixels; ++p) plane[p] += bias;
  }
}

}  // namespace

std::int64_t conv2d_workspace(const ConvGeometry& g) {
  return filter_blocks(g) * g.weight_floats();
}

template <Precision P>
void conv2d_forward_at(Stream, float* y, const float* x, const float* w, const float* b,
                       const ConvGeometry& g, float*) {
  check_geometry(g, "conv2d_forward");
  const std::int64_t in_image = g.in_image_floats();
  const std::int64_t out_image = g.out_image_floats();
  for_each_chunk(g, [&](std::int64_t first, std::int64_t images) {
    onednn_conv_forward(P, g, {.images = images}, y + first * out_image, x + first * in_image, w,
                        b);
  });
}

template <Precision P>
void conv2d_backward_data_at(Stream, float* dx, const float* dy, const float* w, const float* b,
                             const ConvGeometry& g, float*) {
  check_geometry(g, "conv2d_backward_data");
  const std::int64_t in_image = g.in_image_floats();
  const std::int64_t out_image = g.out_image_floats();
  for_each_chunk(g, [&](std::int64_t first, std::int64_t images) {
    float* dxn = dx + first * in_image;
    onednn_conv_backward_data(P, g, {.images = images}, dxn, dy + first * out_image, w);
    if (b == nullptr) return;
    for (std::int64_t n = 0; n < images; ++n) {
      add_channel_bias(dxn + n * in_image, b, g.in_channels, g.in_height * g.in_width);
    }
  });
}

template <Precision P>
void conv2d_backward_filter_at(Stream, GradMode mode, float* dw, const float* dy, const float* x,
                               const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_backward_filter");
  const std::int64_t weight = g.weight_floats();
  if (g.images <= 0) {
    if (mode == GradMode::Overwrite) std::fill(dw, dw + weight, 0.0f);
    return;
  }
  NOEIRA_CHECK(workspace != nullptr, "conv2d_backward_filter: no workspace");
  const std::int64_t in_image = g.in_image_floats();
  const std::int64_t out_image = g.out_image_floats();
  const std::int64_t blocks = filter_blocks(g);
  const std::int64_t row_chunks = filter_row_chunks(g);
  float* partials = workspace;  // [blocks, weight]
  const OneThreadScope scope;
  for_each_task(blocks * row_chunks, scope.threads(), [&](std::int64_t task) {
    const std::int64_t block = task / row_chunks, chunk = task % row_chunks;
    const std::int64_t first = block * g.images / blocks;
    const std::int64_t end = (block + 1) * g.images / blocks;
    const std::int64_t r0 = chunk * g.out_channels / row_chunks;
    const std::int64_t r1 = (chunk + 1) * g.out_channels / row_chunks;
    const ConvSlice slice{.images = end - first, .first_out = r0,
                          .outs = row_chunks > 1 ? r1 - r0 : 0};
    onednn_conv_backward_filter(P, g, slice, partials + block * weight, dy + first * out_image,
                                x + first * in_image);
  });
  // dw (=|+=) partial 0 + partial 1 + ..., in block order for every element.
  const bool accumulate = mode == GradMode::Accumulate;
#pragma omp parallel for schedule(static) num_threads(scope.threads()) \
    if (weight * blocks >= kParallelGrain)
  for (std::int64_t i = 0; i < weight; ++i) {
    float sum = accumulate ? dw[i] + partials[i] : partials[i];
    for (std::int64_t block = 1; block < blocks; ++block) sum += partials[block * weight + i];
    dw[i] = sum;
  }
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_forward_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_backward_data_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(conv2d_backward_filter_at);

void conv2d_backward_bias(Stream, GradMode mode, float* db, const float* dy, std::int64_t images,
                          std::int64_t channels, std::int64_t pixels) {
  // One channel per task, its planes in image order, each plane in 8 fixed lanes: the same bits
  // for any thread count, and a loop the compiler vectorizes.
  constexpr std::int64_t kLanes = 8;
#pragma omp parallel for schedule(static) if (images * channels * pixels >= kParallelGrain)
  for (std::int64_t c = 0; c < channels; ++c) {
    double total = 0.0;
    for (std::int64_t n = 0; n < images; ++n) {
      const float* __restrict plane = dy + (n * channels + c) * pixels;
      float lanes[kLanes] = {};
      const std::int64_t whole = pixels - pixels % kLanes;
      for (std::int64_t p = 0; p < whole; p += kLanes) {
        for (std::int64_t l = 0; l < kLanes; ++l) lanes[l] += plane[p + l];
      }
      for (std::int64_t p = whole; p < pixels; ++p) lanes[p - whole] += plane[p];
      for (float lane : lanes) total += lane;
    }
    db[c] = mode == GradMode::Accumulate ? db[c] + static_cast<float>(total)
                                         : static_cast<float>(total);
  }
}

}  // namespace noeira::cpu
