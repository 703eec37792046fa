// The CPU's one matrix product (kernels/cpu/gemm.hpp) where its library's threads matter: a
// product's bits depend on the thread count it runs on and on nothing else, a product called
// inside an OpenMP region runs on the calling thread (as on one thread, without waiting for a
// team that never comes), and beta = 0 never reads C. Its values against loops, for every
// transpose, stride, alpha and beta: test_attention_kernels.cpp (batched matmul, one product per
// item).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "kernels/cpu/gemm.hpp"

namespace noeira {
namespace {

using testing::random_values;

// The mlp's largest forward product and its weight gradient: big enough that oneDNN and OpenBLAS
// split them over threads.
struct Product {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
};
const Product kProducts[] = {{false, true, 100, 256, 784}, {true, false, 256, 784, 100}};

std::vector<float> run(const Product& p, Precision precision, const std::vector<float>& a,
                       const std::vector<float>& b) {
  std::vector<float> c(static_cast<std::size_t>(p.m * p.n));
  cpu::gemm(precision, p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a.data(),
            p.trans_a ? p.m : p.k, b.data(), p.trans_b ? p.k : p.n, 0.0f, c.data(), p.n);
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Restores the thread count the test found.
class ThreadCount {
 public:
  ThreadCount() : saved_(omp_get_max_threads()) {}
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

TEST(CpuProducts, BitsFollowTheThreadCountAloneAndARegionRunsEachOnItsThread) {
  const ThreadCount restore;
  for (Precision precision : {Precision::Fp32, Precision::Bf16}) {
    for (const Product& p : kProducts) {
      SCOPED_TRACE(::testing::Message() << to_string(precision) << " " << p.m << "x" << p.n << "x"
                                      << p.k);
      const std::vector<float> a = random_values(static_cast<std::size_t>(p.m * p.k), 3, -1, 1);
      const std::vector<float> b = random_values(static_cast<std::size_t>(p.k * p.n), 4, -1, 1);
      omp_set_num_threads(1);
      const std::vector<float> one = run(p, precision, a, b);
      omp_set_num_threads(2);
      const std::vector<float> two = run(p, precision, a, b);
      EXPECT_TRUE(same_bits(run(p, precision, a, b), two)) << "2 threads, called again";
      for (std::size_t i = 0; i < one.size(); ++i) {
        ASSERT_NEAR(one[i], two[i], 1e-4 * (1.0 + std::abs(one[i]))) << "element " << i;
      }
      // Inside a region of 2 threads each product runs on its own thread alone: the one-thread
      // bits on both, while the library would split it over the 2 threads the region has.
      std::vector<float> in_region[2];
#pragma omp parallel num_threads(2)
      in_region[omp_get_thread_num()] = run(p, precision, a, b);
      EXPECT_TRUE(same_bits(in_region[0], one)) << "thread 0 of a region";
      if (!in_region[1].empty()) {
        EXPECT_TRUE(same_bits(in_region[1], one)) << "thread 1 of a region";
      }
      EXPECT_TRUE(same_bits(run(p, precision, a, b), two)) << "2 threads, after the region";
    }
  }
}

TEST(CpuProducts, BetaZeroNeverReadsCAndOneAccumulates) {
  const std::int64_t m = 37, n = 29, k = 53;
  const std::vector<float> a = random_values(static_cast<std::size_t>(m * k), 5, -1, 1);
  const std::vector<float> b = random_values(static_cast<std::size_t>(k * n), 6, -1, 1);
  for (Precision precision : {Precision::Fp32, Precision::Bf16}) {
    SCOPED_TRACE(to_string(precision));
    std::vector<float> c(static_cast<std::size_t>(m * n),
                         std::numeric_limits<float>::quiet_NaN());
    cpu::gemm(precision, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    for (float x : c) ASSERT_TRUE(std::isfinite(x)) << "beta = 0 read C's NaN";
    const std::vector<float> once = c;
    cpu::gemm(precision, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 1.0f, c.data(), n);
    for (std::size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], 2.0f * once[i], 1e-5 * (1.0 + std::abs(once[i]))) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace noeira
