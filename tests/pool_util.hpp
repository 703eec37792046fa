#pragma once
// Image batches for the tests of the image leaves (test_pool.cpp, test_pool_torch.cpp,
// test_cuda_pool.cpp).
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gradcheck.hpp"
#include "nn/pool2d.hpp"

namespace noeira::testing {

// The windows every pooling test covers.

// Kernel 3 stride 2: overlapping windows over an odd image with H != W.
constexpr PoolSpec kOverlapping{{2, 7, 9}, 3, 2, 1};
// Disjoint 2 × 2 windows; the last column is read by none.
constexpr PoolSpec kTiled{{3, 6, 5}, 2, 2};
// Stride 1 with padding: each pixel in up to 9 windows.
constexpr PoolSpec kDense{{1, 5, 4}, 3, 1, 1};
// An even kernel padded by 1 (out 5 × 8).
constexpr PoolSpec kEvenPadded{{2, 4, 7}, 2, 1, 1};
// A stride past the kernel: rows and columns that no window reads.
constexpr PoolSpec kSparse{{1, 8, 5}, 2, 3};

// [rows, C, H, W] of values uniform in [lo, hi).
inline Tensor random_images(std::int64_t rows, ImageShape s, std::uint32_t seed,
                            Target target = Target::Cpu, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_host(image_batch_shape(rows, s),
                           random_values(static_cast<std::size_t>(rows * s.numel()), seed, lo, hi),
                           target);
}

// [rows, C, H, W] of a shuffled ladder of values 0.05 apart, centred on 0: no two elements are
// equal or within 2 · eps (1e-2, gradcheck's default) of each other, so a max pool has one
// maximum per window, also under a finite difference's perturbation.
inline Tensor distinct_images(std::int64_t rows, ImageShape s, std::uint32_t seed,
                              Target target = Target::Cpu) {
  const std::size_t n = static_cast<std::size_t>(rows * s.numel());
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = 0.05f * (static_cast<float>(i) - static_cast<float>(n) / 2.0f);
  }
  std::mt19937 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return Tensor::from_host(image_batch_shape(rows, s), v, target);
}

}  // namespace noeira::testing
