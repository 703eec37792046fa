#include <array>
#include <vector>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/lane_sums.hpp"
#include "kernels/cpu/vector_isa.hpp"

namespace noeira::cpu {

namespace {
// Fixed-size chunks summed in double (each in fixed lanes, kernels/cpu/lane_sums.hpp), then the
// chunk sums added in index order: the result is the same for any number of threads and any
// vector width, which bit-exact resume and simulated ranks rely on.
constexpr std::int64_t kChunk = 8192;

template <class Term>
double chunked_sum(std::int64_t n, Term term) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk;
    const std::int64_t end = begin + kChunk < n ? begin + kChunk : n;
    with_vector_isa([&] {
      LaneSums<1> s;
      s.add(end - begin, [&](std::int64_t i) { return std::array{term(begin + i)}; });
      partial[static_cast<std::size_t>(c)] = s.total(0);
    });
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}
}  // namespace

double sum_squares(Stream, const float* x, std::int64_t n) {
  return chunked_sum(n, [x](std::int64_t i) {
    const double v = x[i];
    return v * v;
  });
}

double sum(Stream, const float* x, std::int64_t n) {
  return chunked_sum(n, [x](std::int64_t i) { return static_cast<double>(x[i]); });
}

void sum_into(Stream s, double* acc, const float* x, std::int64_t n) { *acc += sum(s, x, n); }

}  // namespace noeira::cpu
