// Convolutions on the CPU: im2col (kernels/cpu/im2col.hpp) and a product (kernels/cpu/gemm.hpp,
// at the table's precision) per image and group, the images spread over the threads, each with
// its own columns in the workspace.
//
// Every sgemm runs on one thread, whatever the thread count. OpenBLAS's own threads cut a product
// into tiles by their number, and the tiles' edges change the bits (measured: one image of a
// 16-channel 16x16 convolution differs between 3 threads and 1 or 2), so which products run is
// a function of the sizes alone, and only whole products are spread over the threads.
//
// The weight gradient sums over images: the images are cut into a fixed number of blocks
// (filter_blocks, from the sizes), each block sums its images in order into a partial of its
// own, and the partials are added in block order. A weight too large for partials (one block)
// is cut into fixed chunks of output channels instead, each summing every image in order.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

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

// Blocks of images whose weight-gradient partials are summed in order. A function of the sizes
// only (never of the thread count), and bounded so that the partials stay a few MiB.
constexpr std::int64_t kMaxFilterBlocks = 32;
constexpr std::int64_t kFilterPartialFloats = std::int64_t{1} << 22;  // 16 MiB
std::int64_t filter_blocks(const ConvGeometry& g) {
  const ConvSizes z(g);
  return std::clamp<std::int64_t>(std::min(kFilterPartialFloats / z.weight, kMaxFilterBlocks), 1,
                                  std::max<std::int64_t>(g.images, 1));
}

// With one block, chunks of each group's output channels (at least 16 rows each) run on the
// threads, each with its own im2col of every image.
constexpr std::int64_t kMaxFilterRowChunks = 8;
constexpr std::int64_t kMinFilterChunkRows = 16;
std::int64_t filter_row_chunks(const ConvGeometry& g) {
  if (filter_blocks(g) > 1) return 1;
  return std::clamp<std::int64_t>(g.out_channels / g.groups / kMinFilterChunkRows, 1,
                                  kMaxFilterRowChunks);
}

// Workspace slots of im2col columns: one per thread that can have work.
std::int64_t column_slots(const ConvGeometry& g, std::int64_t threads) {
  const std::int64_t tasks = std::max(g.images, filter_row_chunks(g));
  return std::max<std::int64_t>(1, std::min(tasks, threads));
}

// Partial sums of the weight gradient sit after the column slots (only with several blocks).
std::int64_t partial_floats(const ConvGeometry& g) {
  const std::int64_t blocks = filter_blocks(g);
  return blocks > 1 ? blocks * ConvSizes(g).weight : 0;
}

// Keeps OpenBLAS on one thread while a kernel runs (its OpenMP build takes its thread count from
// omp_get_max_threads()), and remembers the threads the kernel may spread its products over.
class BlasOnOneThread {
 public:
  BlasOnOneThread() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~BlasOnOneThread() { omp_set_num_threads(threads_); }
  BlasOnOneThread(const BlasOnOneThread&) = delete;
  BlasOnOneThread& operator=(const BlasOnOneThread&) = delete;

  int threads() const { return threads_; }

 private:
  int threads_;
};

void check_geometry(const ConvGeometry& g, const char* kernel) {
  NOEIRA_CHECK(g.groups > 0 && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0,
               kernel, ": ", g.groups, " groups do not divide ", g.in_channels, " input and ",
               g.out_channels, " output channels");
  NOEIRA_CHECK(g.kernel > 0 && g.stride > 0 && g.dilation > 0 && g.padding >= 0, kernel,
               ": kernel ", g.kernel, ", stride ", g.stride, ", dilation ", g.dilation,
               ", padding ", g.padding);
}

// Runs body(task, slot) for tasks [0, n) over at most `slots` threads; slot is the thread's
// columns in the workspace. Inside a BlasOnOneThread: the region's size is given explicitly.
template <class Body>
void for_each_task(std::int64_t n, std::int64_t slots, Body&& body) {
  const int threads = static_cast<int>(std::max<std::int64_t>(1, std::min(slots, n)));
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
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

// dw (beta: 0 overwrites, 1 adds) += dy · colsᵀ for one image, rows [r0, r1) of every group.
template <Precision P>
void filter_image(float* dw, float beta, const float* dy, const float* x, float* columns,
                  std::int64_t r0, std::int64_t r1, const ConvGeometry& g, const ConvSizes& z) {
  const float* cols = columns_of(x, columns, g);
  for (std::int64_t grp = 0; grp < g.groups; ++grp) {
    const std::int64_t row = grp * z.group_out + r0;
    gemm(P, false, true, r1 - r0, z.group_taps, z.out_pixels, 1.0f, dy + row * z.out_pixels,
         z.out_pixels, cols + grp * z.group_taps * z.out_pixels, z.out_pixels, beta,
         dw + row * z.group_taps, z.group_taps);
  }
}

}  // namespace

std::int64_t conv2d_workspace(const ConvGeometry& g) {
  return column_slots(g, omp_get_max_threads()) * ConvSizes(g).columns + partial_floats(g);
}

template <Precision P>
void conv2d_forward_at(Stream, float* y, const float* x, const float* w, const float* b,
                    const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_forward");
  const ConvSizes z(g);
  const BlasOnOneThread blas;
  for_each_task(g.images, column_slots(g, blas.threads()), [&](std::int64_t n, int slot) {
    const float* cols = columns_of(x + n * z.in_image, workspace + slot * z.columns, g);
    float* yn = y + n * z.out_image;
    // y[group] [Co/G, Ho·Wo] = w[group] [Co/G, taps] · cols[group] [taps, Ho·Wo]
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      gemm(P, false, false, z.group_out, z.out_pixels, z.group_taps, 1.0f,
           w + grp * z.group_out * z.group_taps, z.group_taps,
           cols + grp * z.group_taps * z.out_pixels, z.out_pixels, 0.0f,
           yn + grp * z.group_out * z.out_pixels, z.out_pixels);
    }
    if (b != nullptr) add_channel_bias(yn, b, g.out_channels, z.out_pixels);
  });
}

template <Precision P>
void conv2d_backward_data_at(Stream, float* dx, const float* dy, const float* w, const float* b,
                          const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_backward_data");
  const ConvSizes z(g);
  const bool pointwise = conv_is_pointwise(g);
  const BlasOnOneThread blas;
  for_each_task(g.images, column_slots(g, blas.threads()), [&](std::int64_t n, int slot) {
    float* dxn = dx + n * z.in_image;
    // Pointwise: the columns' gradient is the input gradient itself.
    float* cols = pointwise ? dxn : workspace + slot * z.columns;
    // cols[group] [taps, Ho·Wo] = w[group]ᵀ [taps, Co/G] · dy[group] [Co/G, Ho·Wo]
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      gemm(P, true, false, z.group_taps, z.out_pixels, z.group_out, 1.0f,
           w + grp * z.group_out * z.group_taps, z.group_taps,
           dy + n * z.out_image + grp * z.group_out * z.out_pixels, z.out_pixels, 0.0f,
           cols + grp * z.group_taps * z.out_pixels, z.out_pixels);
    }
    if (!pointwise) col2im(dxn, cols, g);
    if (b != nullptr) add_channel_bias(dxn, b, g.in_channels, g.in_height * g.in_width);
  });
}

template <Precision P>
void conv2d_backward_filter_at(Stream, GradMode mode, float* dw, const float* dy, const float* x,
                            const ConvGeometry& g, float* workspace) {
  check_geometry(g, "conv2d_backward_filter");
  const ConvSizes z(g);
  const float first_beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  if (g.images <= 0) {
    if (mode == GradMode::Overwrite) std::fill(dw, dw + z.weight, 0.0f);
    return;
  }
  const BlasOnOneThread blas;
  const std::int64_t slots = column_slots(g, blas.threads());
  const std::int64_t blocks = filter_blocks(g);
  if (blocks == 1) {
    // Straight into dw: every chunk of rows sums all images in order.
    const std::int64_t chunks = filter_row_chunks(g);
    for_each_task(chunks, slots, [&](std::int64_t chunk, int slot) {
      const std::int64_t r0 = chunk * z.group_out / chunks;
      const std::int64_t r1 = (chunk + 1) * z.group_out / chunks;
      for (std::int64_t n = 0; n < g.images; ++n) {
        filter_image<P>(dw, n == 0 ? first_beta : 1.0f, dy + n * z.out_image, x + n * z.in_image,
                     workspace + slot * z.columns, r0, r1, g, z);
      }
    });
    return;
  }
  float* partials = workspace + slots * z.columns;
  for_each_task(blocks, slots, [&](std::int64_t block, int slot) {
    const std::int64_t first = block * g.images / blocks;
    const std::int64_t end = (block + 1) * g.images / blocks;
    for (std::int64_t n = first; n < end; ++n) {
      filter_image<P>(partials + block * z.weight, n == first ? 0.0f : 1.0f, dy + n * z.out_image,
                   x + n * z.in_image, workspace + slot * z.columns, 0, z.group_out, g, z);
    }
  });
  // dw (=|+=) partial 0 + partial 1 + ..., in block order for every element.
  const bool accumulate = mode == GradMode::Accumulate;
#pragma omp parallel for schedule(static) num_threads(blas.threads()) \
    if (z.weight * blocks >= kParallelGrain)
  for (std::int64_t i = 0; i < z.weight; ++i) {
    float sum = accumulate ? dw[i] + partials[i] : partials[i];
    for (std::int64_t block = 1; block < blocks; ++block) sum += partials[block * z.weight + i];
    dw[i] = sum;
  }
}

void conv2d_forward(Stream s, float* y, const float* x, const float* w, const float* b,
                    const ConvGeometry& g, float* workspace) {
  conv2d_forward_at<Precision::Fp32>(s, y, x, w, b, g, workspace);
}

void conv2d_backward_data(Stream s, float* dx, const float* dy, const float* w, const float* b,
                          const ConvGeometry& g, float* workspace) {
  conv2d_backward_data_at<Precision::Fp32>(s, dx, dy, w, b, g, workspace);
}

void conv2d_backward_filter(Stream s, GradMode mode, float* dw, const float* dy, const float* x,
                            const ConvGeometry& g, float* workspace) {
  conv2d_backward_filter_at<Precision::Fp32>(s, mode, dw, dy, x, g, workspace);
}

template decltype(conv2d_forward) conv2d_forward_at<Precision::Bf16>;
template decltype(conv2d_backward_data) conv2d_backward_data_at<Precision::Bf16>;
template decltype(conv2d_backward_filter) conv2d_backward_filter_at<Precision::Bf16>;

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
