// sgemm through the CBLAS interface, for benchmarks/compare_blas.sh: built once per BLAS library
// (the same source against OpenBLAS and BLIS), it prints the best GFLOP/s of 20 calls for each
// shape given as MxNxK, row-major C = A·Bᵀ (noeira's Linear layout: W is [out, in]).
//
//   blas_sgemm 1024x1024x1024 100x256x784 ...
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    int m = 0, n = 0, k = 0;
    if (std::sscanf(argv[i], "%dx%dx%d", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
      std::fprintf(stderr, "blas_sgemm: a shape is MxNxK, got '%s'\n", argv[i]);
      return 64;
    }
    std::vector<float> a(static_cast<std::size_t>(m) * k, 1.0f);
    std::vector<float> b(static_cast<std::size_t>(n) * k, 0.5f);
    std::vector<float> c(static_cast<std::size_t>(m) * n);
    double best = 1e30;
    for (int r = 0; r < 20; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(),
                  k, 0.0f, c.data(), n);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t < best) best = t;
    }
    std::printf("%dx%dx%d %.1f\n", m, n, k, 2.0 * m * n * k / best / 1e9);
  }
  return 0;
}
