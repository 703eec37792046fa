// Convolutions on the CPU: im2col (kernels/cpu/im2col.hpp) and one OpenBLAS sgemm per image and
// group, the images spread over the threads, each with its own columns in the workspace (every
// sgemm then runs on one thread: OpenBLAS's OpenMP build stays serial inside a parallel region).
// With one image, or one thread, the images run one after another and OpenBLAS threads each
// product instead.
//
// The weight gradient sums over images. So that its bits do not depend on the thread count, the
// images are cut into a fixed number of blocks (filter_blocks: from the sizes alone), each block
// sums its images in order into a partial of its own, and the partials are added in block order.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

int as_blas_int(std::int64_t v) { return static_cast<int>(v); }

// The sizes one image's products see.
struct ConvSizes {
  std::int64_t in_image, out_image;  // floats of one input and one output image
  std::int64_t out_pixels;
  std::int64_t group_in, group_out;  // channels per group
  std::int64_t group_taps;           // group_in · k · k: the products' inner dimension
  std::int64_t weight;               // floats of the weight
  std::int64_t columns;              // floats of one image's im2col (0 when pointwise)

  explicit ConvSizes(const ConvGeometry& g)
      : in_image(g.in_channels * g.in_height * g.in_width),
        out_image(g.out_channels * g.out_height * g.out_width),
        out_pixels(g.out_height * g.out_width),
        group_in(g.in_channels / g.groups),
        group_out(g.out_channels / g.groups),
        group_taps(group_in * g.kernel * g.kernel),
        weight(g.out_channels * group_taps),
        columns(conv_is_pointwise(g) ? 0 : g.in_channels * g.kernel * g.kernel * out_pixels) {}
};

// Workspace slots of im2col columns: one per thread that can have an image.
std::int64_t column_slots(const ConvGeometry& g) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(g.images, omp_get_max_threads()));
}

// Blocks of images whose weight-gradient partials are summed in order. A function of the sizes
// only (never of the thread count), and bounded so that the partials stay a few MiB.
constexpr std::int64_t kMaxFilterBlocks = 32;
constexpr std::int64_t kFilterPartialFloats = std::int64_t{1} << 22;  // 16 MiB
std::int64_t filter_blocks(const ConvGeometry& g) {
  const ConvSizes z(g);
  return std::clamp<std::int64_t>(std::min(kFilterPartialFloats / z.weight, kMaxFilterBlocks), 1,
                                  std::max<std::int64_t>(g.images, 1));
}

// Partial sums of the weight gradient sit after the column slots (only with several blocks).
std::int64_t partial_floats(const ConvGeometry& g) {
  const std::int64_t blocks = filter_blocks(g);
  return blocks > 1 ? blocks * ConvSizes(g).weight : 0;
}

void check_geometry(const ConvGeometry& g, const char* kernel) {
  NOEIRA_CHECK(g.groups > 0 && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0,
               kernel, ": ", g.groups, " groups do not divide ", g.in_channels, " input and ",
               g.out_channels, " output channels");
  NOEIRA_CHECK(g.kernel > 0 && g.stride > 0 && g.dilation > 0 && g.padding >= 0, kernel,
               ": kernel ", g.kernel, ", stride ", g.stride, ", dilation ", g.dilation,
               ", padding ", g.padding);
}

// Runs body(image, slot) for every image: over the threads (slot = the thread's columns), or in
// order on slot 0 when there is one slot, outside any parallel region so that OpenBLAS may thread.
template <class Body>
void for_each_image(const ConvGeometry& g, Body&& body) {
  const std::int64_t slots = column_slots(g);
  if (slots <= 1) {
    for (std::int64_t n = 0; n < g.images; ++n) body(n, 0);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(slots))
  for (std::int64_t n = 0; n < g.images; ++n) body(n, omp_get_thread_num());
}

// y[c, :] += b[c] over `channels` planes of `pixels`.
void add_channel_bias(float* y, const float* b, std::int64_t channels, std::int64_t pixels) {
  for (std::int64_t c = 0; c < channels; ++c) {
    float* __restrict plane = y + c * pixels;
    const float bias = b[c];
    for (std::int64_t p = 0; p < pixels; ++p) plane[p] += bias;
  }
}

// The columns of image x: the image itself when pointwise, else im2col'd into `columns`.
const float* columns_of(const float* x, float* columns, const ConvGeometry& g) {
  if (conv_is_pointwise(g)) return x;
  im2col(columns, x, g);
  return columns;
}

// dw (beta: 0 overwrites, 1 adds) += dy · colsᵀ for one image, group by group.
void filter_image(float* dw, float beta, const float* dy, const float* x, float* columns,
                  const ConvGeometry& g, const ConvSizes& z) {
  const float* cols = columns_of(x, columns, g);
  for (std::int64_t grp = 0; grp < g.groups; ++grp) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas_int(z.group_out),
                as_blas_int(z.group_taps), as_blas_int(z.out_pixels), 1.0f,
                dy + grp * z.group_out * z.out_pixels, as_blas_int(z.out_pixels),
                cols + grp * z.group_taps * z.out_pixels, as_blas_int(z.out_pixels), beta,
                dw + grp * z.group_out * z.group_taps, as_blas_int(z.group_taps));
  }
}

}  // namespace

std::int64_t conv2d_workspace(const ConvGeometry& g) {
  return column_slots(g) * ConvSizes(g).columns + partial_floats(g);
}

void conv2d_forward(Stream, float* y, const float* x, const float* w, const float* b,
                    const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_forward");
  const ConvSizes z(g);
  for_each_image(g, [&](std::int64_t n, std::int64_t slot) {
    const float* cols = columns_of(x + n * z.in_image, workspace + slot * z.columns, g);
    float* yn = y + n * z.out_image;
    // y[group] [Co/G, Ho·Wo] = w[group] [Co/G, taps] · cols[group] [taps, Ho·Wo]
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas_int(z.group_out),
                  as_blas_int(z.out_pixels), as_blas_int(z.group_taps), 1.0f,
                  w + grp * z.group_out * z.group_taps, as_blas_int(z.group_taps),
                  cols + grp * z.group_taps * z.out_pixels, as_blas_int(z.out_pixels), 0.0f,
                  yn + grp * z.group_out * z.out_pixels, as_blas_int(z.out_pixels));
    }
    if (b != nullptr) add_channel_bias(yn, b, g.out_channels, z.out_pixels);
  });
}

void conv2d_backward_data(Stream, float* dx, const float* dy, const float* w, const float* b,
                          const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_backward_data");
  const ConvSizes z(g);
  const bool pointwise = conv_is_pointwise(g);
  for_each_image(g, [&](std::int64_t n, std::int64_t slot) {
    float* dxn = dx + n * z.in_image;
    // Pointwise: the columns' gradient is the input gradient itself.
    float* cols = pointwise ? dxn : workspace + slot * z.columns;
    // cols[group] [taps, Ho·Wo] = w[group]ᵀ [taps, Co/G] · dy[group] [Co/G, Ho·Wo]
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas_int(z.group_taps),
                  as_blas_int(z.out_pixels), as_blas_int(z.group_out), 1.0f,
                  w + grp * z.group_out * z.group_taps, as_blas_int(z.group_taps),
                  dy + n * z.out_image + grp * z.group_out * z.out_pixels,
                  as_blas_int(z.out_pixels), 0.0f, cols + grp * z.group_taps * z.out_pixels,
                  as_blas_int(z.out_pixels));
    }
    if (!pointwise) col2im(dxn, cols, g);
    if (b != nullptr) add_channel_bias(dxn, b, g.in_channels, g.in_height * g.in_width);
  });
}

void conv2d_backward_filter(Stream, GradMode mode, float* dw, const float* dy, const float* x,
                            const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_backward_filter");
  const ConvSizes z(g);
  const float first_beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  if (g.images <= 0) {
    if (mode == GradMode::Overwrite) std::fill(dw, dw + z.weight, 0.0f);
    return;
  }
  const std::int64_t blocks = filter_blocks(g);
  if (blocks == 1) {
    // Straight into dw, image after image; OpenBLAS threads each product.
    for (std::int64_t n = 0; n < g.images; ++n) {
      filter_image(dw, n == 0 ? first_beta : 1.0f, dy + n * z.out_image, x + n * z.in_image,
                   workspace, g, z);
    }
    return;
  }
  float* partials = workspace + column_slots(g) * z.columns;
  const int threads = static_cast<int>(std::min(column_slots(g), blocks));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t block = 0; block < blocks; ++block) {
    float* columns = workspace + omp_get_thread_num() * z.columns;
    const std::int64_t first = block * g.images / blocks;
    const std::int64_t end = (block + 1) * g.images / blocks;
    for (std::int64_t n = first; n < end; ++n) {
      filter_image(partials + block * z.weight, n == first ? 0.0f : 1.0f, dy + n * z.out_image,
                   x + n * z.in_image, columns, g, z);
    }
  }
  // dw (=|+=) partial 0 + partial 1 + ..., in block order for every element.
  parallel_for_chunks(z.weight, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      float sum = mode == GradMode::Accumulate ? dw[i] + partials[i] : partials[i];
      for (std::int64_t block = 1; block < blocks; ++block) sum += partials[block * z.weight + i];
      dw[i] = sum;
    }
  });
}

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
