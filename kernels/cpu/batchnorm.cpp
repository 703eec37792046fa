// Batch normalization on the CPU: one channel per iteration (channels in parallel), each
// channel's values summed in fixed lanes (kernels/cpu/lane_sums.hpp; every plane a run, rows in
// order). So nothing depends on the thread count or the vector width. The formulas are
// kernels/batchnorm_math.hpp's.

#include "kernels/batchnorm_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/lane_sums.hpp"
#include "kernels/cpu/vector_isa.hpp"

namespace noeira::cpu {

namespace {

// One iteration per channel; the channels of a [rows, C, pixels] batch are strided, so the team
// is worth waking only for batches of some size.
template <class Body>
void parallel_for_channels(std::int64_t channels, std::int64_t elements, Body&& body) {
#pragma omp parallel for schedule(static) if (elements >= (1 << 15) && channels > 1)
  for (std::int64_t c = 0; c < channels; ++c) body(c);
}

void store(GradMode mode, float& out, float value) {
  out = mode == GradMode::Accumulate ? out + value : value;
}

}  // namespace

void batchnorm_moments(Stream, double* moments, const float* x, bool counted, std::int64_t rows,
                       std::int64_t channels, std::int64_t pixels) {
  parallel_for_channels(channels, rows * channels * pixels, [&](std::int64_t c) {
    LaneSums<2> sums;
    if (counted) {
      with_vector_isa([&] {
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* __restrict xc = x + (r * channels + c) * pixels;
          sums.add(pixels, [&](std::int64_t p) {
            const double v = xc[p];
            return std::array{v, v * v};
          });
        }
      });
    }
    moments[c] = sums.total(0);
    moments[channels + c] = sums.total(1);
  });
  moments[2 * channels] = counted ? static_cast<double>(rows * pixels) : 0.0;
}

void batchnorm_statistics(Stream, BatchNormSource source, float* mean, float* rstd,
                          float* running_mean, float* running_var, float* batches_tracked,
                          const double* moments, std::int64_t channels, float eps, float momentum,
                          bool update_running) {
  if (source == BatchNormSource::Running) {
    for (std::int64_t c = 0; c < channels; ++c) {
      mean[c] = running_mean[c];
      rstd[c] = batchnorm::running_rstd(running_var[c], eps);
    }
    return;
  }
  const double count = moments[2 * channels];
  const bool update = update_running && count > 0.0;
  for (std::int64_t c = 0; c < channels; ++c) {
    const batchnorm::ChannelStats s =
        batchnorm::channel_stats(moments[c], moments[channels + c], count, eps);
    mean[c] = s.mean;
    rstd[c] = s.rstd;
    if (update) {
      running_mean[c] = batchnorm::running_update(running_mean[c], s.mean, momentum);
      running_var[c] = batchnorm::running_update(running_var[c], s.unbiased_var, momentum);
    }
  }
  if (update) batches_tracked[0] += 1.0f;
}

void batchnorm_forward(Stream, float* y, const float* x, const float* mean, const float* rstd,
                       const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t channels, std::int64_t pixels) {
  const std::int64_t planes = rows * channels;
#pragma omp parallel for schedule(static) if (planes * pixels >= (1 << 15))
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const std::int64_t c = plane % channels;
    const float m = mean[c];
    const float scale = rstd[c] * gamma[c];
    const float shift = beta[c];
    const float* __restrict xp = x + plane * pixels;
    float* __restrict yp = y + plane * pixels;
    with_vector_isa([&] {
      for (std::int64_t p = 0; p < pixels; ++p) yp[p] = (xp[p] - m) * scale + shift;
    });
  }
}

void batchnorm_grad_sums(Stream, double* grad_sums, const float* dy, const float* x,
                         const float* mean, const float* rstd, std::int64_t rows,
                         std::int64_t channels, std::int64_t pixels) {
  parallel_for_channels(channels, rows * channels * pixels, [&](std::int64_t c) {
    const float m = mean[c];
    const float rs = rstd[c];
    LaneSums<2> sums;
    with_vector_isa([&] {
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t o = (r * channels + c) * pixels;
        const float* __restrict xp = x + o;
        const float* __restrict dyp = dy + o;
        sums.add(pixels, [&](std::int64_t p) {
          const float xhat = (xp[p] - m) * rs;
          const double d = dyp[p];
          return std::array{d, d * xhat};
        });
      }
    });
    grad_sums[c] = sums.total(0);
    grad_sums[channels + c] = sums.total(1);
  });
}

void batchnorm_backward(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                        const double* local_sums, const double* batch_sums, const double* moments,
                        const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, std::int64_t rows, std::int64_t channels,
                        std::int64_t pixels) {
  for (std::int64_t c = 0; c < channels; ++c) {
    store(mode, dgamma[c], static_cast<float>(local_sums[channels + c]));
    store(mode, dbeta[c], static_cast<float>(local_sums[c]));
  }
  if (dx == nullptr) return;
  const double count = moments[2 * channels];
  const std::int64_t planes = rows * channels;
#pragma omp parallel for schedule(static) if (planes * pixels >= (1 << 15))
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const std::int64_t c = plane % channels;
    const float m = mean[c];
    const float rs = rstd[c];
    const float g = gamma[c];
    const float mean_dy = count > 0.0 ? static_cast<float>(batch_sums[c] / count) : 0.0f;
    const float mean_dy_xhat =
        count > 0.0 ? static_cast<float>(batch_sums[channels + c] / count) : 0.0f;
    const std::int64_t o = plane * pixels;
    const float* __restrict xp = x + o;
    const float* __restrict dyp = dy + o;
    float* __restrict dxp = dx + o;
    with_vector_isa([&] {
      for (std::int64_t p = 0; p < pixels; ++p) {
        const float xhat = (xp[p] - m) * rs;
        dxp[p] = batchnorm::input_grad(dyp[p], xhat, g, rs, mean_dy, mean_dy_xhat);
      }
    });
  }
}

}  // namespace noeira::cpu
